//go:build unix

package fsstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
)

// TestReadRangePieces: ReadRangePieces returns ReadRange's bytes and count
// for ranges inside, across and past the object's end, with pieces smaller
// than, equal to and larger than the range; filled sees the filled prefix
// grow piece by piece up to the count; an error from filled stops the read
// (at most the one piece being read ahead is read past it: dst beyond that
// stays untouched) and is returned; a missing key is ErrNotFound; a torn
// file is ErrCorrupt (the header is checked as ReadRange checks it); without CallerVerifies the
// read is GetRange's verified one and filled is called once.
func TestReadRangePieces(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	data := make([]byte, 300<<10+17)
	for i := range data {
		data[i] = byte(i*13 + i>>8)
	}
	if _, err := s.Put(ctx, "a/b", data, objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var _ objectstore.PieceReader = s
	verifies := objectstore.ReadRangeOptions{CallerVerifies: true}
	for _, c := range []struct{ off, n int64 }{{0, 1}, {0, int64(len(data))}, {5, 100 << 10}, {200 << 10, 200 << 10}, {int64(len(data)) - 3, 10}, {int64(len(data)), 5}} {
		for _, piece := range []int{1 << 10, 7777, 64 << 10, 1 << 20} {
			for _, opts := range []objectstore.ReadRangeOptions{verifies, {}} {
				dst := make([]byte, c.n)
				var seen []int
				want := data[min(c.off, int64(len(data))):min(c.off+c.n, int64(len(data)))]
				n, err := s.ReadRangePieces(ctx, "a/b", c.off, dst, piece, opts, func(m int) error {
					seen = append(seen, m)
					// The prefix handed over is complete while the next
					// piece is being read (and -race sees any overlap).
					if !bytes.Equal(dst[:m], want[:m]) {
						t.Errorf("range %+v, piece %d: prefix %d differs while filled looks at it", c, piece, m)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if n != len(want) || !bytes.Equal(dst[:n], want) {
					t.Fatalf("range %+v, piece %d: %d bytes, want %d (or different bytes)", c, piece, n, len(want))
				}
				wantCalls := 0
				if n > 0 {
					wantCalls = 1
					if opts.CallerVerifies {
						wantCalls = (n + piece - 1) / piece
					}
				}
				if len(seen) != wantCalls || (n > 0 && seen[len(seen)-1] != n) {
					t.Fatalf("range %+v, piece %d, %+v: filled saw %v, want %d calls ending at %d", c, piece, opts, seen, wantCalls, n)
				}
				for i := 1; i < len(seen); i++ {
					if seen[i]-seen[i-1] != piece && seen[i] != n {
						t.Fatalf("range %+v, piece %d: filled saw %v", c, piece, seen)
					}
				}
			}
		}
	}
	stop := errors.New("stop")
	dst := make([]byte, 100<<10)
	// The piece read ahead after the failing one is slow, so a return
	// that does not wait for the reader would leave it writing into dst.
	pieceReadHook = func(done int) {
		if done == 30<<10 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	defer func() { pieceReadHook = nil }()
	calls := 0
	n, err := s.ReadRangePieces(ctx, "a/b", 0, dst, 10<<10, verifies, func(m int) error {
		calls++
		if m >= 30<<10 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 30<<10 || calls != 3 {
		t.Fatalf("stopped read: n %d, %d calls, err %v", n, calls, err)
	}
	// The reader runs one piece ahead of filled, so the piece after the
	// failed one may have been read; nothing past that one.
	if !bytes.Equal(dst[:n], data[:n]) || bytes.ContainsFunc(dst[n+10<<10:], func(r rune) bool { return r != 0 }) {
		t.Fatal("the read went on more than one piece past filled's error")
	}
	// dst is the caller's once the call returned: the reader has stopped
	// (under -race a write still in flight would be reported here).
	clear(dst)
	if _, err := s.ReadRangePieces(ctx, "a/missing", 0, dst, 1<<10, verifies, func(int) error { return nil }); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	// A torn file (its header cut) is refused before any piece.
	var path string
	_ = filepath.Walk(filepath.Join(dir), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && info.Size() > int64(len(data)) {
			path = p
		}
		return nil
	})
	if path == "" {
		t.Fatal("object file not found")
	}
	if err := os.Truncate(path, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadRangePieces(ctx, "a/b", 0, dst, 1<<10, verifies, func(int) error {
		t.Fatal("a torn file's piece was delivered")
		return nil
	}); !errors.Is(err, objectstore.ErrCorrupt) {
		t.Fatalf("torn file: %v", err)
	}
}
