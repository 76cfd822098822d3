package fsstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
)

// The multi-process test re-executes this test binary as child processes
// (selected by envChild) that open the same directory and race conditional
// writes. Children talk to the parent over stdin/stdout only: each prints
// READY once its store is open, blocks reading "GO <version>" from stdin (so all start
// together without sleeps), runs its attempts and prints one result line per
// attempt.
const (
	envChild  = "NEREUS_FSSTORE_CHILD"
	envDir    = "NEREUS_FSSTORE_DIR"
	envRounds = "NEREUS_FSSTORE_ROUNDS"
)

func TestMain(m *testing.M) {
	if os.Getenv(envWriter) != "" {
		os.Exit(runWriter())
	}
	if os.Getenv(envPowerWriter) != "" {
		os.Exit(runPowerWriter())
	}
	if id := os.Getenv(envChild); id != "" {
		os.Exit(runChild(id))
	}
	os.Exit(m.Run())
}

const envWriter = "NEREUS_FSSTORE_WRITER"

// runWriter puts 256 KiB objects in a loop and prints "ACK <key>" after
// each Put returned nil, until it is killed.
func runWriter() int {
	s, err := fsstore.Open(os.Getenv(envDir))
	if err != nil {
		fmt.Printf("ERROR open: %v\n", err)
		return 1
	}
	data := make([]byte, 256<<10)
	for i := 0; ; i++ {
		for j := range data {
			data[j] = byte(i + j)
		}
		key := fmt.Sprintf("w/%06d", i)
		if _, err := s.Put(context.Background(), key, data, objectstore.PutOptions{Mode: objectstore.PutCreate}); err != nil {
			fmt.Printf("ERROR put: %v\n", err)
			return 1
		}
		fmt.Println("ACK " + key)
	}
}

// Kill a writer process with SIGKILL in the middle of its Put loop: after
// reopening, every acknowledged object is present and intact, no listed
// object is partial or corrupt, and the dead writer's temp files are gone.
// (A process kill keeps the page cache, so this checks visibility and
// cleanup; power-loss durability rests on the fsync protocol in the doc.)
func TestKilledWriterLeavesNoPartialObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process") // skip-ok: -short asked for it
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWriter+"=1", envDir+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && len(acked) < 40 {
		l := sc.Text()
		key, ok := strings.CutPrefix(l, "ACK ")
		if !ok {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("writer: %s", l)
		}
		acked[key] = true
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL, by pid
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for sc.Scan() { // acks printed before the kill landed
		if key, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
			acked[key] = true
		}
	}

	s, err := fsstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if s.StaleTempDirsRemoved() != 1 {
		t.Fatalf("removed %d stale temp dirs, want the killed writer's 1", s.StaleTempDirsRemoved())
	}
	ctx := context.Background()
	listed := 0
	for info, err := range s.List(ctx, "w/") {
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		data, _, err := s.Get(ctx, info.Key)
		if err != nil || len(data) != 256<<10 {
			t.Fatalf("%s: %d bytes, %v", info.Key, len(data), err)
		}
		delete(acked, info.Key)
		listed++
	}
	if len(acked) != 0 {
		t.Fatalf("acknowledged objects missing after the kill: %v", acked)
	}
	if listed < 40 {
		t.Fatalf("only %d objects listed", listed)
	}
}

// runChild performs, per round r: PutUpdate of "head" from the version the
// parent sent with "GO <version>" (the same for every child), PutCreate of "created-r", and one Overwrite of a private key whose
// version it reports (to check versions are unique across processes).
func runChild(id string) int {
	s, err := fsstore.Open(os.Getenv(envDir))
	if err != nil {
		fmt.Printf("ERROR open: %v\n", err)
		return 1
	}
	defer func() { _ = s.Close() }()
	var rounds int
	if _, err := fmt.Sscan(os.Getenv(envRounds), &rounds); err != nil {
		fmt.Printf("ERROR rounds: %v\n", err)
		return 1
	}
	fmt.Println("READY")
	in := bufio.NewScanner(os.Stdin)
	ctx := context.Background()
	result := func(what string, err error) string {
		switch {
		case err == nil:
			return what + " WIN"
		case errors.Is(err, objectstore.ErrPreconditionFailed), errors.Is(err, objectstore.ErrAlreadyExists):
			return what + " LOSE"
		default:
			return what + " ERROR " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
	}
	for r := range rounds {
		if !in.Scan() || !strings.HasPrefix(in.Text(), "GO ") {
			fmt.Println("ERROR no GO")
			return 1
		}
		base := objectstore.UpdateVersion{ETag: strings.TrimPrefix(in.Text(), "GO ")}
		_, err := s.Put(ctx, "head", []byte(fmt.Sprintf("round %d child %s", r, id)), objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: base})
		fmt.Println(result("update", err))
		_, err = s.Put(ctx, fmt.Sprintf("created-%d", r), []byte("child "+id), objectstore.PutOptions{Mode: objectstore.PutCreate})
		fmt.Println(result("create", err))
		v, err := s.Put(ctx, "private/"+id, []byte("same"), objectstore.PutOptions{})
		if err != nil {
			fmt.Printf("ERROR overwrite: %v\n", err)
			return 1
		}
		fmt.Println("version " + v.ETag)
		fmt.Println("DONE")
	}
	return 0
}

type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func TestMultiProcessCAS(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes") // skip-ok: -short asked for it
	}
	const children = 8
	const rounds = 8
	dir := t.TempDir()
	s, err := fsstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	head, err := s.Put(ctx, "head", []byte("base"), objectstore.PutOptions{Mode: objectstore.PutCreate})
	if err != nil {
		t.Fatal(err)
	}

	deadline := time.After(2 * time.Minute)
	recv := func(c *child) string {
		t.Helper()
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child %d exited early", c.cmd.Process.Pid)
			}
			if strings.HasPrefix(l, "ERROR") {
				t.Fatalf("child: %s", l)
			}
			return l
		case <-deadline:
			t.Fatalf("timed out waiting for children")
		}
		return ""
	}

	var cs []*child
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"="+fmt.Sprint(i), envDir+"="+dir, envRounds+"="+fmt.Sprint(rounds))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				c.lines <- sc.Text()
			}
			close(c.lines)
		}()
		cs = append(cs, c)
		t.Cleanup(func() {
			_ = stdin.Close()
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill() // by pid: only our own child
				_ = cmd.Wait()
			}
		})
	}
	for _, c := range cs {
		if l := recv(c); l != "READY" {
			t.Fatalf("child said %q, want READY", l)
		}
	}
	versions := map[string]bool{}
	for r := range rounds {
		for _, c := range cs {
			if _, err := io.WriteString(c.stdin, "GO "+head.ETag+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		updateWins, createWins := 0, 0
		for _, c := range cs {
			for {
				l := recv(c)
				if l == "DONE" {
					break
				}
				switch {
				case l == "update WIN":
					updateWins++
				case l == "create WIN":
					createWins++
				case l == "update LOSE", l == "create LOSE":
				case strings.HasPrefix(l, "version "):
					if versions[l] {
						t.Fatalf("round %d: %s handed out twice across processes", r, l)
					}
					versions[l] = true
				default:
					t.Fatalf("unexpected child line %q", l)
				}
			}
		}
		if updateWins != 1 {
			t.Fatalf("round %d: %d PutUpdate winners from one version, want 1", r, updateWins)
		}
		if createWins != 1 {
			t.Fatalf("round %d: %d PutCreate winners, want 1", r, createWins)
		}
		data, v, err := s.Get(ctx, "head")
		if err != nil || !strings.HasPrefix(string(data), fmt.Sprintf("round %d child ", r)) {
			t.Fatalf("round %d: head %q, %v", r, data, err)
		}
		head = v
	}
	for _, c := range cs {
		_ = c.stdin.Close()
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child exit: %v", err)
		}
	}
}
