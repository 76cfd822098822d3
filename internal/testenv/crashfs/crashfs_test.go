package crashfs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func write(t *testing.T, path, data string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func read(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// The model: only fsync'd data and fsync'd directory entries survive a cut.
func TestOnlySyncedStateSurvivesAPowerCut(t *testing.T) {
	f := Mount(t)
	d := f.Dir()
	// Durable entries: a (synced data), c (data never synced), r.tmp, sub.
	write(t, filepath.Join(d, "a"), "alpha", true)
	write(t, filepath.Join(d, "c"), "", false)
	write(t, filepath.Join(d, "r.tmp"), "rename-me", true)
	sub := filepath.Join(d, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, d)
	write(t, filepath.Join(sub, "x"), "xray", true)
	syncDir(t, sub)
	// From here on d is never synced again: its changes are all lost.
	write(t, filepath.Join(d, "c"), "gamma", false)                                     // unsynced data
	write(t, filepath.Join(d, "b"), "beta", true)                                       // synced data, unsynced entry
	if err := os.Rename(filepath.Join(d, "r.tmp"), filepath.Join(d, "r")); err != nil { // unsynced rename
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(sub, "x"), filepath.Join(d, "hard")); err != nil { // unsynced link
		t.Fatal(err)
	}
	if got, _ := read(filepath.Join(d, "c")); got != "gamma" {
		t.Fatalf("before the cut, readers see the page cache: c=%q", got)
	}

	f.PowerCut(t)

	for path, want := range map[string]string{"a": "alpha", "c": "", "r.tmp": "rename-me", "sub/x": "xray"} {
		if got, err := read(filepath.Join(d, path)); err != nil || got != want {
			t.Errorf("%s after the cut: %q %v, want %q", path, got, err, want)
		}
	}
	for _, gone := range []string{"b", "r", "hard"} {
		if _, err := os.Stat(filepath.Join(d, gone)); !os.IsNotExist(err) {
			t.Errorf("%s survived the cut without a directory sync (err %v)", gone, err)
		}
	}
	if s := f.Stats(); s.PowerCuts != 1 || s.LostEntries == 0 || s.LostBytes == 0 {
		t.Fatalf("stats %v", s)
	}
}

// flock, hard links and mmap work through the mount (fsstore and bbolt use
// them).
func TestKernelFeatures(t *testing.T) {
	f := Mount(t)
	p := filepath.Join(f.Dir(), "m")
	write(t, p, "0123456789", true)
	fd, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if err := syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("flock: %v", err)
	}
	fd2, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fd2.Close()
	if err := syscall.Flock(int(fd2.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != syscall.EWOULDBLOCK {
		t.Fatalf("second flock: %v, want EWOULDBLOCK", err)
	}
	mm, err := syscall.Mmap(int(fd.Fd()), 0, 10, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	defer syscall.Munmap(mm)
	if _, err := fd.WriteAt([]byte("AB"), 0); err != nil {
		t.Fatal(err)
	}
	if string(mm[:2]) != "AB" {
		t.Fatalf("mmap does not see a pwrite: %q", mm[:2])
	}
}
