package fsstore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
)

// openFDs counts this process's open descriptors (Linux; -1 elsewhere).
func openFDs(t *testing.T) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(des)
}

// TestPooledTempFiles: with the pool topped up between Puts, no Put creates
// its temp file itself; objects read back intact, including a key replaced
// many times (whose old inodes are closed by the housekeeper); Close leaves
// no descriptor open and no temp file behind.
func TestPooledTempFiles(t *testing.T) {
	before := openFDs(t)
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var v objectstore.UpdateVersion
	for i := range 20 {
		s.hk.refill() // what the background goroutine does, done here so the test needs no waiting
		put(t, s, "seg/"+string(rune('a'+i)), pattern(1000+i), objectstore.PutOptions{Mode: objectstore.PutCreate})
		s.hk.refill()
		opts := objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: v}
		if v.IsZero() {
			opts = objectstore.PutOptions{Mode: objectstore.PutCreate}
		}
		v = put(t, s, "manifest", pattern(i+1), opts)
	}
	if m := s.hk.misses.Load(); m != 0 {
		t.Fatalf("%d Puts created their temp file on the caller's path with a full pool", m)
	}
	for i := range 20 {
		if b, _, err := s.Get(ctx(), "seg/"+string(rune('a'+i))); err != nil || string(b) != string(pattern(1000+i)) {
			t.Fatalf("seg %d: %d bytes, %v", i, len(b), err)
		}
	}
	if b, got, err := s.Get(ctx(), "manifest"); err != nil || string(b) != string(pattern(20)) || !got.Equal(v) {
		t.Fatalf("manifest: %d bytes, %v, %v", len(b), got, err)
	}
	if err := s.Delete(ctx(), "seg/a", nil); err != nil {
		t.Fatal(err)
	}
	tmpDir := s.tmp.dir
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmpDir); !os.IsNotExist(err) {
		t.Fatalf("temp dir %s survived Close: %v", tmpDir, err)
	}
	if after := openFDs(t); before >= 0 && after != before {
		t.Fatalf("open descriptors: %d before Open, %d after Close", before, after)
	}
	// The temp root holds nothing of the closed store.
	left, _ := filepath.Glob(filepath.Join(dir, "tmp", "*"))
	if len(left) != 0 {
		t.Fatalf("left in tmp/: %v", left)
	}
}

// TestPoolEmptyCreatesOnTheSpot: with no housekeeper goroutine (so the pool
// stays empty), Puts create their own temp files, count the misses, and
// replaced inodes are still closed (by the caller when the queue is full).
func TestPoolEmptyCreatesOnTheSpot(t *testing.T) {
	s := open(t, t.TempDir())
	s.hk.shutdown()
	s.hk = newHousekeeper(s.tmp.dir, &s.tmpSeq)
	s.hk.release = make(chan *os.File) // unbuffered, nobody receives: closeLater closes itself
	close(s.hk.done)                   // no goroutine to wait for at Close
	var v objectstore.UpdateVersion
	for i := range 3 {
		opts := objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: v}
		if v.IsZero() {
			opts = objectstore.PutOptions{Mode: objectstore.PutCreate}
		}
		v = put(t, s, "k", pattern(i+1), opts)
	}
	if b, _, err := s.Get(ctx(), "k"); err != nil || string(b) != string(pattern(3)) {
		t.Fatalf("Get: %d bytes, %v", len(b), err)
	}
	if m := s.hk.misses.Load(); m != 3 {
		t.Fatalf("misses = %d, want 3 (every Put created its own temp file)", m)
	}
}
