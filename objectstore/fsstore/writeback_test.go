//go:build linux

package fsstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
)

// TestPacedWriteback: an object of at least pacedWriteMin bytes is written
// chunk by chunk, chunk k's writeback started once it is written and chunk
// k-1's awaited before chunk k+1 is written (so at most two chunks are in
// flight), every byte covered exactly once; it reads back identical; a
// smaller object is written in one piece with no sync_file_range at all;
// an error of a writeback call fails the Put and leaves no object and no
// temp file behind.
func TestPacedWriteback(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	var events []string
	var started, awaited []int64 // chunk offsets, in call order
	var covered int64
	writebackHook = func(op string, off int64, n int) error {
		events = append(events, fmt.Sprintf("%s@%d+%d", op, off, n))
		switch op {
		case "start":
			if len(started) > 0 && off != started[len(started)-1]+writebackChunk {
				t.Errorf("chunk at %d started after the one at %d: not contiguous", off, started[len(started)-1])
			}
			// Before chunk k+1 starts, chunk k-1 was awaited: at most
			// two chunks (k and k+1) in flight.
			if k := len(started); k >= 2 && (len(awaited) != k-1 || awaited[k-2] != started[k-2]) {
				t.Errorf("chunk %d started with chunk %d not awaited (%v)", k, k-2, events)
			}
			started = append(started, off)
			covered += int64(n)
		case "await":
			awaited = append(awaited, off)
		}
		return nil
	}
	defer func() { writebackHook = nil }()

	size := 3*pacedWriteMin/2 + 12345 // several chunks and a short last one
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	if _, err := s.Put(ctx, "gen/big", data, objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := (size + writebackChunk - 1) / writebackChunk; len(started) != want || len(awaited) != want-1 {
		t.Fatalf("%d chunks started, %d awaited; want %d and %d (%v)", len(started), len(awaited), want, want-1, events)
	}
	if covered != int64(size) {
		t.Fatalf("writeback covered %d bytes of %d", covered, size)
	}
	got, _, err := s.Get(ctx, "gen/big")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v, equal %v", err, bytes.Equal(got, data))
	}

	events, started, awaited, covered = nil, nil, nil, 0
	if _, err := s.Put(ctx, "gen/small", data[:pacedWriteMin-1], objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(events) != 0 {
		t.Fatalf("an object below pacedWriteMin made writeback calls: %v", events)
	}

	boom := errors.New("writeback failed")
	for _, failOp := range []string{"start", "await"} {
		writebackHook = func(op string, off int64, n int) error {
			if op == failOp && off >= 2*writebackChunk {
				return boom
			}
			return nil
		}
		key := "gen/fail-" + failOp
		if _, err := s.Put(ctx, key, data, objectstore.PutOptions{}); !errors.Is(err, boom) {
			t.Fatalf("%s error: Put returned %v", failOp, err)
		}
		if _, _, err := s.Get(ctx, key); !errors.Is(err, objectstore.ErrNotFound) {
			t.Fatalf("%s error: the object exists (%v)", failOp, err)
		}
	}
	writebackHook = nil
	left, err := filepath.Glob(filepath.Join(dir, "tmp", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range left {
		if fi, err := os.Stat(p); err == nil && fi.Size() >= pacedWriteMin {
			t.Fatalf("a failed paced Put left its temp file %s (%d bytes)", p, fi.Size())
		}
	}
}

// TestWritebackUnsupported: a sync_file_range the file system refuses as
// unsupported (EINVAL here, from flags no kernel accepts) turns pacing off
// instead of failing the write, and a large Put is then written in one
// piece; any other error stays the write's error (TestPacedWriteback).
func TestWritebackUnsupported(t *testing.T) {
	defer writebackUnpaced.Store(false)
	f, err := os.CreateTemp(t.TempDir(), "w")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if err := syncFileRange(f, 0, 4096, 1<<30); err != nil || !writebackUnpaced.Load() {
		t.Fatalf("an unsupported sync_file_range: err %v, pacing off %v; want nil and true", err, writebackUnpaced.Load())
	}
	var calls int
	writebackHook = func(string, int64, int) error { calls++; return nil }
	defer func() { writebackHook = nil }()
	data := make([]byte, pacedWriteMin+1)
	if err := writeData(f, data, 0); err != nil || calls != 0 {
		t.Fatalf("with pacing off: err %v, %d writeback calls; want nil and 0", err, calls)
	}
}
