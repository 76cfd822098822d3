package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
)

func TestLifecycle(t *testing.T) {
	s := Start(t, Options{})
	h := s.Health()
	if h.Status != "ok" || h.NodeID == "" || h.Listeners["http"] != s.HTTPAddr() {
		t.Fatalf("health %+v", h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().CreateStream(ctx, adminapi.CreateStreamRequest{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	addr, pid := s.HTTPAddr(), s.Pid()

	s.Stop()
	if s.Running() {
		t.Fatal("running after Stop")
	}
	s.Restart()
	if s.HTTPAddr() != addr || s.Pid() == pid {
		t.Fatalf("restart: addr %s (was %s), pid %d (was %d)", s.HTTPAddr(), addr, s.Pid(), pid)
	}
	if h2 := s.Health(); h2.NodeID != h.NodeID {
		t.Fatalf("node id changed across restart: %s -> %s", h.NodeID, h2.NodeID)
	}

	s.Kill()
	if s.Running() {
		t.Fatal("running after Kill")
	}
	s.Restart()
	if !s.Running() || s.HTTPAddr() != addr {
		t.Fatalf("not serving on %s after kill+restart", addr)
	}
	// What survives depends on the storage backend's durability.
	_, err := s.Client().DescribeStream(ctx, "x")
	if h.Durable && err != nil {
		t.Fatalf("durable backend lost stream x across SIGKILL: %v", err)
	}
	if !h.Durable && !adminapi.HasCode(err, adminapi.CodeStreamNotFound) {
		t.Fatalf("non-durable backend: describe after restart = %v", err)
	}
}

// recordingTB captures Fatalf instead of failing the test.
type recordingTB struct {
	testing.TB
	fatal chan string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fatal <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestFailureReportsItsReason: a failed Stop ends the test with its reason
// (fatalf once recursed until the stack overflowed).
func TestFailureReportsItsReason(t *testing.T) {
	rec := &recordingTB{TB: t, fatal: make(chan string, 1)}
	s := &Server{tb: rec, logPath: filepath.Join(t.TempDir(), "nereus.log")}
	go s.Stop() // never started: signalAndWait fails
	select {
	case msg := <-rec.fatal:
		if !strings.Contains(msg, "testserver: stop: not started") {
			t.Fatalf("Fatalf(%q)", msg)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Stop of a server that never started did not fail the test")
	}
}

// TestServerDiesWithTheTestBinary: a test binary that is SIGKILLed (no
// cleanup runs) takes its `nereus serve` with it.
func TestServerDiesWithTheTestBinary(t *testing.T) {
	if os.Getenv("NEREUS_TESTSERVER_ORPHAN_HELPER") == "1" {
		s := Start(t, Options{DisableKafka: true, DisablePulsar: true})
		fmt.Printf("server-pid %d\n", s.Pid())
		time.Sleep(10 * time.Minute) // the parent kills this process
		return
	}
	Binary(t) // build outside the helper's time budget
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTheTestBinary$", "-test.count=1", "-test.v")
	// The helper dies by SIGKILL, so its own t.TempDir cleanup never
	// runs: its temp dirs (the server's data and log) go under ours.
	cmd.Env = append(os.Environ(), "NEREUS_TESTSERVER_ORPHAN_HELPER=1", "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "server-pid %d", &pid); err == nil {
			break
		}
	}
	if pid <= 0 {
		t.Fatalf("the helper never reported its server's pid (scan: %v)", sc.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if !alive(pid) {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // ours: started by our helper
			t.Fatalf("nereus serve (pid %d) outlived its SIGKILLed test binary by 60s", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether pid runs: it exists and is not a zombie (an orphan
// is reparented to pid 1, which in a container may never reap it).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// "pid (comm) S ...": the state follows the last ')'.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
