// Package crashfs is a power-loss file system for crash tests: a FUSE file
// system, served from the test process, whose files live in a model of a
// disk with a page cache. Every write reaches the cache at once (readers see
// it, as on a real kernel), but only fsync or fdatasync makes a file's data
// durable, and only fsync of a directory makes its entries — creates,
// renames, links, unlinks — durable. PowerCut drops everything that was not
// made durable, the worst case a real power failure may leave, and mounts
// the survivors again at the same path.
//
// Why a file system and not a Go interface: the programs under test open
// files through the operating system — fsstore with flock, hard links and
// renames, bbolt with mmap and fdatasync on an *os.File — so the only layer
// at which both can be cut honestly is the kernel's file-system boundary.
// With FUSE's default write-through mode every write(2) and every
// fsync(2)/fdatasync(2) reaches this model synchronously; reads and mmaps
// are served from the kernel's page cache, which the remount discards.
// Locks (flock, fcntl) are left to the kernel: the file system implements
// no lock operations, so the kernel keeps them locally.
//
// The file system is served by a separate process (crashfsd, built on first
// use), never by the test process: a Go process that page-faults on an mmap
// of a FUSE file system it serves itself deadlocks at the next
// stop-the-world (bbolt mmaps its file). A process killed by the test
// (SIGKILL) is the usual writer: its open files close with it, so the mount
// can be taken down for the cut. Files the test process itself holds open
// must be closed before PowerCut.
//
// Mounting needs /dev/fuse and the right to mount (root or CAP_SYS_ADMIN):
// without them Mount skips the test, or fails it under
// NEREUS_REQUIRE_EXTERNAL=1 (testenv.SkipOrFail).
//
// It owns only the model and the mount. It must never be imported by
// non-test code.
package crashfs

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

// FS is a mounted crash file system, served by a crashfsd process.
type FS struct {
	dir   string
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	mu    sync.Mutex
	alive bool
}

// Mount builds crashfsd (once per test binary), starts it on a fresh
// temporary directory and waits for the mount; a cleanup unmounts it.
func Mount(tb testing.TB) *FS {
	tb.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testenv.SkipOrFail(tb, "crashfs needs FUSE: %v", err)
	}
	bin, err := buildDaemon()
	if err != nil {
		tb.Fatalf("crashfs: building crashfsd: %v", err)
	}
	f := &FS{dir: tb.TempDir()}
	f.cmd = exec.Command(bin, f.dir)
	f.cmd.SysProcAttr = testenv.ChildProcAttr()
	f.cmd.Stderr = os.Stderr
	if f.in, err = f.cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	f.out = bufio.NewScanner(stdout)
	if err := f.cmd.Start(); err != nil {
		tb.Fatalf("crashfs: starting crashfsd: %v", err)
	}
	f.alive = true
	tb.Cleanup(f.stop)
	if line := f.readLine(); line != "READY" {
		f.stop()
		testenv.SkipOrFail(tb, "crashfs: cannot mount a FUSE file system (needs root or CAP_SYS_ADMIN): %s", line)
	}
	return f
}

func (f *FS) readLine() string {
	if f.out.Scan() {
		return f.out.Text()
	}
	if err := f.out.Err(); err != nil {
		return "crashfsd: " + err.Error()
	}
	return "crashfsd exited"
}

// command sends one command and returns the answer line.
func (f *FS) command(cmd string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := fmt.Fprintln(f.in, cmd); err != nil {
		return "ERR crashfsd: " + err.Error()
	}
	return f.readLine()
}

// stop ends the daemon (it unmounts) and, if the mount is still there
// (the daemon died), detaches it.
func (f *FS) stop() {
	f.mu.Lock()
	alive := f.alive
	f.alive = false
	f.mu.Unlock()
	if !alive {
		return
	}
	_, _ = fmt.Fprintln(f.in, "EXIT")
	_ = f.in.Close()
	done := make(chan struct{})
	go func() { _ = f.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = f.cmd.Process.Kill() // ours, by pid
		<-done
	}
	_ = syscall.Unmount(f.dir, syscall.MNT_DETACH) // no-op once unmounted
}

// Dir is the mount point.
func (f *FS) Dir() string { return f.dir }

// Stats returns what the file system saw so far.
func (f *FS) Stats() Stats {
	var s Stats
	_ = json.Unmarshal([]byte(f.command("STATS")), &s)
	return s
}

// PowerCut takes the file system down as a power failure would: it
// unmounts (every file must be closed: kill the writer first), drops every
// write and directory change that was not made durable, and mounts what
// survived at the same path.
func (f *FS) PowerCut(tb testing.TB) {
	tb.Helper()
	if ans := f.command("CUT"); ans != "OK" {
		tb.Fatalf("crashfs: power cut: %s", ans)
	}
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// buildDaemon builds ./internal/testenv/crashfs/crashfsd into
// <module>/.cache/crashfs/ (Go's build cache makes repeats cheap).
func buildDaemon() (string, error) {
	buildOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		dir := filepath.Join(root, ".cache", "crashfs")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		tmp, err := os.CreateTemp(dir, ".crashfsd-*")
		if err != nil {
			buildErr = err
			return
		}
		tmp.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp.Name(), "./internal/testenv/crashfs/crashfsd")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp.Name())
			buildErr = fmt.Errorf("go build ./internal/testenv/crashfs/crashfsd: %v\n%s", err, b)
			return
		}
		buildPath = filepath.Join(dir, "crashfsd")
		if err := os.Rename(tmp.Name(), buildPath); err != nil {
			os.Remove(tmp.Name())
			buildErr = err
		}
	})
	return buildPath, buildErr
}

// String helps test failure messages.
func (s Stats) String() string {
	return fmt.Sprintf("writes %d, file syncs %d, dir syncs %d, power cuts %d (lost %d unsynced bytes, %d unsynced entry changes)",
		s.Writes, s.FileSyncs, s.DirSyncs, s.PowerCuts, s.LostBytes, s.LostEntries)
}
