package generation

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore/fsstore"
)

// TestReaderVerifiesOnceOnFsstore: on fsstore the Reader reads spans with
// ReadRange(CallerVerifies), so fsstore skips its block CRCs and this
// package's entry and block CRCs are the only check. Flipping any of a
// sample of bytes in every block (entry header fields, the entry CRC, the
// payload's first, middle and last byte) must make every Read and
// ReadPooled covering that block fail with ErrCorrupt, and leave reads of
// the other blocks exact: corrupt bytes are an error, never served.
func TestReaderVerifiesOnceOnFsstore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := fsstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	o := putObjects(t, fs, 1, 11)[0]
	path := filepath.Join(dir, "objects", "gen.d", "42.d", "a.o")
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dataAt := int64(len(clean)) - o.info.Size // fsstore's header and CRC table come first
	f, err := NewReader(fs, 1<<20).Footer(ctx, o.key, o.info)
	if err != nil {
		t.Fatal(err)
	}
	for k := range f.NumBlocks() {
		b := f.Block(k)
		size := int64(le.Uint32(clean[dataAt+b.Pos:]))
		for _, at := range []int64{0, 5, 9, 17, entryHeaderLen, entryHeaderLen + size/2, entryHeaderLen + size - 1} {
			if at >= b.Len {
				continue
			}
			raw := append([]byte(nil), clean...)
			raw[dataAt+b.Pos+at] ^= 0x04
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			r := NewReader(fs, 1<<20) // footer intact: only the data is damaged
			for _, e := range o.entries {
				inBlock := e.Offset >= b.First && e.Offset < f.blockEnd(k)
				es, err := r.Read(ctx, o.key, o.info, e.Offset, 1)
				pes, buf, perr := r.ReadPooled(ctx, o.key, o.info, e.Offset, 1, 0)
				if inBlock {
					mustCorrupt(t, "flipped block, Read", err)
					mustCorrupt(t, "flipped block, ReadPooled", perr)
					if buf != nil {
						t.Fatal("a failed ReadPooled returned a buffer")
					}
					continue
				}
				if err != nil || perr != nil {
					t.Fatalf("block %d flipped at %d: read at %d (another block): %v / %v", k, at, e.Offset, err, perr)
				}
				if err := checkPrefix(es, o.entries, e.Offset); err != nil {
					t.Fatal(err)
				}
				if err := checkPrefix(pes, o.entries, e.Offset); err != nil {
					t.Fatal(err)
				}
				buf.Release()
			}
		}
	}
}

// TestReadPooledReuse: a catch-up through ReadPooled, releasing each
// buffer once its entries were checked, returns exactly the entries of
// Read although the same few buffers serve every read; a buffer released
// twice panics rather than serve one read's bytes to another.
func TestReadPooledReuse(t *testing.T) {
	ctx := context.Background()
	fs, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	objs := putObjects(t, fs, 3, 12)
	r := NewReader(fs, 1<<20)
	pooled := 0
	for round := range 3 {
		for _, o := range objs {
			for from := o.info.Start; from < o.info.End; {
				es, buf, err := r.ReadPooled(ctx, o.key, o.info, from, 24<<10*(round+1), 0)
				if err != nil {
					t.Fatal(err)
				}
				if buf != nil {
					pooled++
				}
				if err := checkPrefix(es, o.entries, from); err != nil {
					t.Fatal(err)
				}
				from = es[len(es)-1].End()
				buf.Release()
			}
		}
	}
	if pooled == 0 {
		t.Fatal("no read used a pooled buffer")
	}
	_, buf, err := r.ReadPooled(ctx, objs[0].key, objs[0].info, objs[0].info.Start, 1<<20, 0)
	if err != nil || buf == nil {
		t.Fatalf("ReadPooled: buffer %v, %v", buf, err)
	}
	buf.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("a second Release did not panic")
		}
	}()
	buf.Release()
}

// TestReleasePoisonsUnderRace: with the race detector on (CI), a released
// buffer's bytes are overwritten at once, so any payload used after its
// Release is junk that checksums and byte comparisons catch.
func TestReleasePoisonsUnderRace(t *testing.T) {
	if !poisonOnRelease {
		t.Skip("poisoning is on only under -race") // skip-ok: a race-build feature; CI runs -race
	}
	ctx := context.Background()
	fs, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	objs := putObjects(t, fs, 1, 12)
	r := NewReader(fs, 1<<20)
	es, buf, err := r.ReadPooled(ctx, objs[0].key, objs[0].info, objs[0].info.Start, 1<<20, 0)
	if err != nil || buf == nil || len(es) == 0 {
		t.Fatalf("ReadPooled: %d entries, buffer %v, %v", len(es), buf, err)
	}
	payload := es[0].Payload
	buf.Release()
	for i, c := range payload {
		if c != poisonByte {
			t.Fatalf("byte %d of a released payload is %#x, want the poison %#x", i, c, poisonByte)
		}
	}
}
