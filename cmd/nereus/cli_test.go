package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/server"
)

// startServer runs an in-process server on a free loopback port.
func startServer(t *testing.T) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.KafkaAddr, cfg.PulsarAddr = "", ""
	s, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return "http://" + s.HTTPAddr()
}

// syncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type result struct {
	code           int
	stdout, stderr string
}

type cli struct {
	t      *testing.T
	server string
	// signal cancels the context that the "signal" context derives from.
	sigCtx    context.Context
	sigCancel context.CancelFunc
}

func newCLI(t *testing.T) *cli {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &cli{t: t, server: startServer(t), sigCtx: ctx, sigCancel: cancel}
}

func (c *cli) env(stdin io.Reader, stdout, stderr io.Writer) env {
	return env{
		stdin: stdin, stdout: stdout, stderr: stderr,
		lookupEnv: func(k string) (string, bool) {
			if k == "NEREUS_SERVER" {
				return c.server, true
			}
			return "", false
		},
		signalContext: func(parent context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(parent)
			stop := context.AfterFunc(c.sigCtx, cancel)
			return ctx, func() { stop(); cancel() }
		},
		isTerminal: func(io.Writer) bool { return false },
	}
}

func (c *cli) run(stdin string, args ...string) result {
	c.t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := run(ctx, c.env(strings.NewReader(stdin), &out, &errb), args)
	return result{code, out.String(), errb.String()}
}

func (c *cli) ok(stdin string, args ...string) string {
	c.t.Helper()
	r := c.run(stdin, args...)
	if r.code != 0 {
		c.t.Fatalf("nereus %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	if r.stderr != "" {
		c.t.Fatalf("nereus %s: unexpected stderr %q", strings.Join(args, " "), r.stderr)
	}
	return r.stdout
}

// fails checks a command fails with exactly one stderr line containing want.
func (c *cli) fails(want string, stdin string, args ...string) {
	c.t.Helper()
	r := c.run(stdin, args...)
	if r.code == 0 {
		c.t.Fatalf("nereus %s: succeeded, want failure", strings.Join(args, " "))
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "nereus: ") || !strings.Contains(lines[0], want) {
		c.t.Fatalf("nereus %s: stderr %q, want one 'nereus: ' line containing %q", strings.Join(args, " "), r.stderr, want)
	}
}

func TestCLITour(t *testing.T) {
	c := newCLI(t)
	out := c.ok("", "stream", "create", "orders")
	if !strings.Contains(out, "created stream orders") || !strings.Contains(out, "OBJECT_WAL_ASYNC_OBJECT") {
		t.Fatalf("create printed %q", out)
	}
	c.fails(`stream "orders" already exists`, "", "stream", "create", "orders")
	c.ok("", "stream", "create", "sync", "--profile", "OBJECT_WAL_SYNC_OBJECT")

	if out := c.ok("first\nsecond\r\nthird", "stream", "append", "orders"); out != "0\n1\n2\n" {
		t.Fatalf("append printed %q", out)
	}
	if out := c.ok("fourth\n", "stream", "append", "orders", "--quiet"); out != "" {
		t.Fatalf("append --quiet printed %q", out)
	}
	if out := c.ok("", "stream", "read", "orders", "--from", "0"); out != "first\nsecond\nthird\nfourth\n" {
		t.Fatalf("read printed %q", out)
	}
	if out := c.ok("", "stream", "read", "orders", "--from", "1", "--limit", "2"); out != "second\nthird\n" {
		t.Fatalf("read --limit printed %q", out)
	}
	out = c.ok("", "stream", "read", "orders", "--from", "3", "--format", "json")
	var je jsonEntry
	if err := json.Unmarshal([]byte(out), &je); err != nil || je.Offset != 3 || string(je.Payload) != "fourth" || je.Text == nil || *je.Text != "fourth" {
		t.Fatalf("read --format json printed %q (%v)", out, err)
	}

	out = c.ok("", "stream", "list")
	if !strings.Contains(out, "orders") || !strings.Contains(out, "sync") || !strings.Contains(out, "OBJECT_WAL_SYNC_OBJECT") {
		t.Fatalf("list printed %q", out)
	}
	var infos []map[string]any
	if err := json.Unmarshal([]byte(c.ok("", "stream", "list", "--format", "json", "--prefix", "ord")), &infos); err != nil || len(infos) != 1 {
		t.Fatalf("list json: %v %v", infos, err)
	}
	out = c.ok("", "stream", "describe", "orders")
	if !strings.Contains(out, "offsets:") || !strings.Contains(out, "[0, 4)") {
		t.Fatalf("describe printed %q", out)
	}

	if out := c.ok("", "stream", "trim", "orders", "--to", "2"); !strings.Contains(out, "[2, 4)") {
		t.Fatalf("trim printed %q", out)
	}
	c.fails("trimmed", "", "stream", "read", "orders", "--from", "0")
	if out := c.ok("", "stream", "read", "orders"); out != "third\nfourth\n" {
		t.Fatalf("read from start after trim printed %q", out)
	}
	if out := c.ok("", "stream", "seal", "orders"); !strings.Contains(out, "sealed orders") {
		t.Fatalf("seal printed %q", out)
	}
	c.fails("sealed", "x\n", "stream", "append", "orders")
	if out := c.ok("", "stream", "delete", "orders"); !strings.Contains(out, "deleted orders") {
		t.Fatalf("delete printed %q", out)
	}
	c.fails(`stream "orders" not found`, "", "stream", "describe", "orders")
}

func TestCLIErrors(t *testing.T) {
	c := newCLI(t)
	c.fails("accepts 1 arg", "", "stream", "create")
	c.fails("unknown flag", "", "stream", "list", "--bogus")
	c.fails("--format", "", "stream", "list", "--format", "xml")
	c.fails("needs --to", "", "stream", "trim", "x")
	c.fails("unknown storage profile", "", "stream", "create", "x", "--profile", "FAST")
	c.fails("not found", "a\n", "stream", "append", "missing")
	c.fails("unknown command", "", "strem")

	// A server that is not there: one clear line.
	c.server = "http://127.0.0.1:1"
	c.fails("cannot reach nereus server at http://127.0.0.1:1", "", "stream", "list")
	c.fails("bad server URL", "", "stream", "list", "--server", "ftp://x")
}

func TestCLIAppendFileBatchesInOrder(t *testing.T) {
	c := newCLI(t)
	c.ok("", "stream", "create", "big")
	var in strings.Builder
	const n = 2500
	for i := range n {
		fmt.Fprintf(&in, "line-%05d\n", i)
	}
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := c.ok("", "stream", "append", "big", "--file", path, "--batch", "700")
	offs := strings.Fields(out)
	if len(offs) != n || offs[0] != "0" || offs[n-1] != fmt.Sprint(n-1) {
		t.Fatalf("append printed %d offsets (first %v)", len(offs), offs[:min(3, len(offs))])
	}
	read := c.ok("", "stream", "read", "big")
	if read != in.String() {
		t.Fatalf("read back differs from input (%d vs %d bytes)", len(read), in.Len())
	}
	// Binary (non-UTF-8) lines survive byte for byte.
	c.ok("", "stream", "create", "bin")
	c.ok("\xff\xfe\x00x\n", "stream", "append", "bin")
	if out := c.ok("", "stream", "read", "bin"); out != "\xff\xfe\x00x\n" {
		t.Fatalf("binary read back %q", out)
	}
}

func TestCLITailFollowsUntilInterrupted(t *testing.T) {
	c := newCLI(t)
	c.ok("", "stream", "create", "t")
	c.ok("old\n", "stream", "append", "t")

	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), c.env(strings.NewReader(""), &out, &errb), []string{"stream", "tail", "t", "--wait", "2s"})
	}()
	deadline := time.Now().Add(30 * time.Second)
	// Keep appending until the tail shows an entry: tail starts at the end
	// as of its start, so "old" must never appear, and some "new-k" must.
	for k := 0; !strings.Contains(out.String(), "new-"); k++ {
		if time.Now().After(deadline) {
			t.Fatalf("tail printed %q, stderr %q", out.String(), errb.String())
		}
		c.ok(fmt.Sprintf("new-%d\n", k), "stream", "append", "t", "--quiet")
		time.Sleep(20 * time.Millisecond)
	}
	c.sigCancel() // Ctrl-C
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("tail exited %d after interrupt, stderr %q", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tail did not stop on interrupt")
	}
	if strings.Contains(out.String(), "old") {
		t.Fatalf("tail printed an entry from before it started: %q", out.String())
	}
}

func TestCLIVersionAndHelp(t *testing.T) {
	c := newCLI(t)
	if out := c.ok("", "version"); !strings.HasPrefix(out, "nereus ") {
		t.Fatalf("version printed %q", out)
	}
	out := c.ok("", "serve", "--help")
	for _, want := range []string{"--data-dir", "--http-addr", "--kafka-addr", "--pulsar-addr", "--bookkeeper-zk", "--bookkeeper-root", "--config", "--log-format", "--log-level", "NEREUS_DATA_DIR"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	if strings.Contains(out, "addr-file") {
		t.Error("hidden --addr-file shows in help")
	}
}

// TestCLIAppendProgressOnTerminal: with stderr on a terminal, large input
// gets a progress bar and a closing summary on stderr; stdout still has
// exactly one offset per line.
func TestCLIAppendProgressOnTerminal(t *testing.T) {
	c := newCLI(t)
	c.ok("", "stream", "create", "p")
	var in strings.Builder
	const n = 40000
	for i := range n {
		fmt.Fprintf(&in, "progress-line-%08d\n", i)
	}
	var out, errb bytes.Buffer
	e := c.env(strings.NewReader(in.String()), &out, &errb)
	e.isTerminal = func(w io.Writer) bool { return w == io.Writer(&errb) }
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if code := run(ctx, e, []string{"stream", "append", "p"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got := len(strings.Fields(out.String())); got != n {
		t.Fatalf("printed %d offsets, want %d", got, n)
	}
	if !strings.Contains(errb.String(), "appending p") || !strings.Contains(errb.String(), fmt.Sprintf("appended %d entries to p at offsets [0, %d)", n, n)) {
		t.Fatalf("stderr lacks the progress bar or summary: %q", errb.String())
	}
}
