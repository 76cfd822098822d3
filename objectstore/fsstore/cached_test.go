//go:build linux

package fsstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nereusstream/nereus-go/objectstore"
)

// TestCachedPageCache: Cached follows the page cache of the object's
// file: a just-written object is resident, the same range after its
// pages were evicted (POSIX_FADV_DONTNEED of the clean pages) is not, and
// a read brings it back; part of a range missing is "not cached". A
// missing key is ErrNotFound. Cached itself starts no read (the range
// stays evicted after asking).
func TestCachedPageCache(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if _, err := s.Put(ctx, "a/b", data, objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var _ objectstore.CacheProber = s
	probe := func(off, n int64) bool {
		t.Helper()
		ok, err := s.Cached(ctx, "a/b", off, n)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !probe(0, int64(len(data))) {
		t.Skip("a just-written file is not reported resident here (cachestat(2) unavailable?)") // skip-ok: needs Linux 6.5+
	}
	evict := func() {
		t.Helper()
		f, err := os.Open(filepath.Join(s.objectsDir, relPath("a/b")))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
	}
	evict()
	if probe(0, int64(len(data))) || probe(8<<20, 4096) {
		t.Fatal("evicted pages reported cached")
	}
	if probe(0, int64(len(data))) {
		t.Fatal("asking brought the pages in")
	}
	if _, err := s.GetRange(ctx, "a/b", 0, 256<<10); err != nil {
		t.Fatal(err)
	}
	if !probe(4096, 128<<10) {
		t.Fatal("pages just read reported not cached")
	}
	// The kernel's readahead of that read reaches a few MiB at most.
	if probe(0, int64(len(data))) || probe(int64(len(data))-1<<20, 1<<20) {
		t.Fatal("a range partly evicted reported cached")
	}
	if !probe(int64(len(data)), 10) {
		t.Fatal("a range past the end has nothing to wait for")
	}
	if _, err := s.Cached(ctx, "a/missing", 0, 1); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
}
