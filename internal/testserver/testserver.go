// Package testserver runs a real `nereus serve` process for tests: it builds
// the nereus binary once per test binary, starts it on free loopback ports
// with a temporary data dir, waits for /healthz, and can stop it (SIGTERM),
// kill it (SIGKILL) and restart it on the same data dir and ports. Crash
// tests of the core and the protocol front ends are built on it.
//
// It owns only process management. It must never reach into the server's
// internals (it talks to the process over its ports like a user), and it
// signals only the processes it started, by pid. Every server it starts
// gets a parent-death signal (testenv.ChildProcAttr): it is SIGKILLed by
// the kernel when the test binary dies, even without cleanups.
//
// The binary is built with -race when the test binary is (override with
// NEREUS_TESTSERVER_RACE=0 or 1) into <module>/.cache/testserver/, so
// repeated runs reuse Go's build cache and nothing leaks into /tmp.
package testserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testenv"
)

// Timeouts. Generous: the machine is shared and the binary may be
// race-instrumented.
const (
	buildTimeout = 10 * time.Minute
	readyTimeout = 90 * time.Second
	stopTimeout  = 60 * time.Second
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the nereus module")
	}
	return filepath.Dir(gomod), nil
}

func wantRace() bool {
	switch os.Getenv("NEREUS_TESTSERVER_RACE") {
	case "0":
		return false
	case "1":
		return true
	}
	return raceEnabled
}

// Binary returns the path of the nereus binary, building it on first use
// in this test binary.
func Binary(tb testing.TB) string {
	tb.Helper()
	path, err := buildBinary()
	if err != nil {
		tb.Fatalf("testserver: building nereus: %v", err)
	}
	return path
}

func buildBinary() (string, error) {
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir := filepath.Join(root, ".cache", "testserver")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		name := "nereus"
		args := []string{"build"}
		if wantRace() {
			name += "-race"
			args = append(args, "-race")
		}
		// Build to a private name, then rename: test binaries of other
		// packages may build the same path concurrently, and a running
		// process keeps its (replaced) inode.
		tmp, err := os.CreateTemp(dir, "."+name+"-*")
		if err != nil {
			buildErr = err
			return
		}
		tmp.Close()
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", append(args, "-o", tmp.Name(), "./cmd/nereus")...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp.Name())
			buildErr = fmt.Errorf("go build ./cmd/nereus: %v\n%s", err, out)
			return
		}
		buildPath = filepath.Join(dir, name)
		if err := os.Rename(tmp.Name(), buildPath); err != nil {
			os.Remove(tmp.Name())
			buildErr = err
		}
	})
	return buildPath, buildErr
}

// Launch starts a server outside any test, for a TestMain that shares one
// server across a package. Errors are returned instead of failing a test;
// the caller must Close it. Methods that would fail a test (Stop, Kill,
// Restart, Health, Client) panic on error for a launched server, so tests
// should only use its addresses.
func Launch(opts Options) (*Server, error) {
	bin, err := buildBinary()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "nereus-testserver-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, opts: opts, dataDir: opts.DataDir, tmpDir: tmp}
	if s.dataDir == "" {
		s.dataDir = filepath.Join(tmp, "data")
	}
	s.logPath = filepath.Join(tmp, "nereus.log")
	s.httpAddr, s.kafkaAddr, s.pulsarAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	if opts.DisableKafka {
		s.kafkaAddr = ""
	}
	if opts.DisablePulsar {
		s.pulsarAddr = ""
	}
	if err := s.start(); err != nil {
		tail := s.LogTail(60)
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("%v\n%s", err, tail)
	}
	return s, nil
}

// Close kills a launched server (if it runs) and removes its temporary
// files; with keepOnFailure it leaves them and returns the log path.
func (s *Server) Close() {
	if s.Running() {
		_ = s.signalAndWait(syscall.SIGKILL, stopTimeout)
	}
	if s.tmpDir != "" {
		os.RemoveAll(s.tmpDir)
	}
}

// fatalf fails the owning test, or panics for a launched server.
func (s *Server) fatalf(format string, args ...any) {
	if s.tb == nil {
		panic(fmt.Sprintf(format, args...))
	}
	s.tb.Helper()
	s.tb.Fatalf(format, args...)
}

// Options configures Start.
type Options struct {
	// DataDir defaults to a fresh temporary directory.
	DataDir string
	// Args are extra `nereus serve` flags (e.g. "--bookkeeper-zk", zk).
	Args []string
	// Env are extra environment variables ("K=V"). The child does not
	// inherit the test's NEREUS_* variables.
	Env []string
	// DisableKafka / DisablePulsar start without that listener.
	DisableKafka, DisablePulsar bool
}

// Server is a running (or stopped) `nereus serve` process.
type Server struct {
	tb      testing.TB // nil for a Launched server
	tmpDir  string     // owned temp dir of a Launched server
	bin     string
	opts    Options
	dataDir string
	logPath string

	mu sync.Mutex
	// addresses from the last start; a restart binds the same ones.
	httpAddr, kafkaAddr, pulsarAddr string
	addrs                           map[string]string // the last start's addr-file
	cmd                             *exec.Cmd
	exited                          chan struct{}
	exitErr                         error
	starts                          int
}

// Start builds (once) and starts a server, waits until /healthz answers,
// and registers a cleanup that kills it. It fails the test on error.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: Binary(tb), opts: opts, dataDir: opts.DataDir}
	if s.dataDir == "" {
		s.dataDir = filepath.Join(tb.TempDir(), "data")
	}
	s.logPath = filepath.Join(tb.TempDir(), "nereus.log")
	s.httpAddr, s.kafkaAddr, s.pulsarAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	if opts.DisableKafka {
		s.kafkaAddr = ""
	}
	if opts.DisablePulsar {
		s.pulsarAddr = ""
	}
	tb.Cleanup(func() {
		if s.Running() {
			_ = s.signalAndWait(syscall.SIGKILL, stopTimeout)
		}
		if tb.Failed() {
			tb.Logf("testserver: last lines of %s:\n%s", s.logPath, s.LogTail(60))
		}
	})
	if err := s.start(); err != nil {
		tb.Fatalf("testserver: %v\n%s", err, s.LogTail(60))
	}
	return s
}

// HTTPAddr is the admin HTTP address (host:port).
func (s *Server) HTTPAddr() string { s.mu.Lock(); defer s.mu.Unlock(); return s.httpAddr }

// URL is the admin base URL ("http://host:port").
func (s *Server) URL() string { return "http://" + s.HTTPAddr() }

// KafkaAddr is the bound Kafka listener address, or "" if the server has
// no Kafka front end (or it is disabled).
func (s *Server) KafkaAddr() string { return s.boundOrEmpty(func() string { return s.kafkaAddr }) }

// PulsarAddr is the bound Pulsar listener address, or "".
func (s *Server) PulsarAddr() string { return s.boundOrEmpty(func() string { return s.pulsarAddr }) }

func (s *Server) boundOrEmpty(get func() string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := get()
	if strings.HasSuffix(a, ":0") {
		return ""
	}
	return a
}

// ListenerAddr is the bound address of a listener by its ID
// ("kafka:SASL_SSL", "pulsar:internal:pulsar+ssl", "http:internal:https"),
// or "" when the server has no such listener.
func (s *Server) ListenerAddr(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs[id]
}

func (s *Server) hasArg(flag string) bool {
	for _, a := range s.opts.Args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// DataDir is the server's data directory (kept across restarts).
func (s *Server) DataDir() string { return s.dataDir }

// LogPath is the file the server's stdout and stderr go to (all runs).
func (s *Server) LogPath() string { return s.logPath }

// Client returns an admin API client for the server.
func (s *Server) Client() *adminapi.Client {
	c, err := adminapi.NewClient(s.URL(), nil)
	if err != nil {
		s.fatalf("testserver: %v", err)
	}
	return c
}

// Health returns the server's /healthz answer.
func (s *Server) Health() adminapi.Health {
	if s.tb != nil {
		s.tb.Helper()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := s.Client().Health(ctx)
	if err != nil {
		s.fatalf("testserver: /healthz: %v", err)
	}
	return h
}

// Running reports whether the process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Pid is the current process id (0 when not running).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop sends SIGTERM and waits for a graceful exit; it fails the test if
// the process does not exit in time or exits non-zero.
func (s *Server) Stop() {
	if s.tb != nil {
		s.tb.Helper()
	}
	if err := s.signalAndWait(syscall.SIGTERM, stopTimeout); err != nil {
		s.fatalf("testserver: stop: %v\n%s", err, s.LogTail(40))
	}
}

// Kill sends SIGKILL (a crash) and waits for the process to be gone.
func (s *Server) Kill() {
	if s.tb != nil {
		s.tb.Helper()
	}
	_ = s.signalAndWait(syscall.SIGKILL, stopTimeout)
}

// Restart stops the server gracefully if it runs, then starts it again on
// the same data dir and the same ports, and waits for /healthz.
func (s *Server) Restart() {
	if s.tb != nil {
		s.tb.Helper()
	}
	if s.Running() {
		s.Stop()
	}
	// A just-freed port can be briefly unavailable; retry a few times.
	var err error
	for attempt := range 5 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	s.fatalf("testserver: restart: %v\n%s", err, s.LogTail(60))
}

// signalAndWait signals the running process and waits for it to exit.
// With SIGTERM the exit must be clean.
func (s *Server) signalAndWait(sig syscall.Signal, timeout time.Duration) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("not started")
	}
	select {
	case <-exited:
		return fmt.Errorf("process had already exited: %v", s.exitErr)
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return err
	}
	select {
	case <-exited:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("no exit within %v after %v; killed", timeout, sig)
	}
	if sig == syscall.SIGTERM && s.exitErr != nil {
		return fmt.Errorf("exit after SIGTERM: %v", s.exitErr)
	}
	return nil
}

func (s *Server) start() error {
	s.mu.Lock()
	args := []string{"serve", "--data-dir", s.dataDir, "--log-level", "debug"}
	// A protocol configured with its listener list (--kafka-listeners, ...)
	// in Args takes no single-address flag.
	for _, a := range []struct{ flag, val string }{{"http", s.httpAddr}, {"kafka", s.kafkaAddr}, {"pulsar", s.pulsarAddr}} {
		if !s.hasArg("--" + a.flag + "-listeners") {
			args = append(args, "--"+a.flag+"-addr", a.val)
		}
	}
	s.mu.Unlock()
	addrFile := filepath.Join(filepath.Dir(s.logPath), fmt.Sprintf("addrs-%d.json", s.starts))
	s.starts++
	args = append(args, "--addr-file", addrFile)
	args = append(args, s.opts.Args...)

	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== testserver: start #%d: %s %s\n", s.starts, s.bin, strings.Join(args, " "))
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server dies with the test binary, however that ends.
	cmd.SysProcAttr = testenv.ChildProcAttr()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NEREUS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, s.opts.Env...)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited, s.exitErr = cmd, exited, nil
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		s.mu.Lock()
		s.exitErr = err
		s.mu.Unlock()
		close(exited)
	}()

	deadline := time.Now().Add(readyTimeout)
	var addrs map[string]string
	for {
		if b, err := os.ReadFile(addrFile); err == nil && json.Unmarshal(b, &addrs) == nil && addrs["http"] != "" {
			break
		}
		select {
		case <-exited:
			return fmt.Errorf("nereus serve exited before it was ready: %v", s.exitErr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.signalAndWait(syscall.SIGKILL, stopTimeout)
			return fmt.Errorf("nereus serve not ready within %v", readyTimeout)
		}
	}
	s.mu.Lock()
	s.addrs = addrs
	s.httpAddr = addrs["http"]
	if a := addrs["kafka"]; a != "" {
		s.kafkaAddr = a
	}
	if a := addrs["pulsar"]; a != "" {
		s.pulsarAddr = a
	}
	s.mu.Unlock()
	c := s.Client()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		h, err := c.Health(ctx)
		cancel()
		if err == nil && h.Status == "ok" {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("nereus serve exited before /healthz was ok: %v", s.exitErr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.signalAndWait(syscall.SIGKILL, stopTimeout)
			return fmt.Errorf("/healthz not ok within %v: %v", readyTimeout, err)
		}
	}
}

// LogTail returns up to n last lines of the server log.
func (s *Server) LogTail(n int) string {
	f, err := os.Open(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// FreePort returns a loopback address with a port that was free a moment
// ago (for tests that must name an address up front).
func FreePort(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
