package generation

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

// TestSpanEntries: a span bounded by entries holds at least maxEntries
// entries ending after from (unless the object or the byte budget ends it
// first), holds at most one block more than those need, and never exceeds
// the byte-bounded Span.
func TestSpanEntries(t *testing.T) {
	for _, maxRecords := range []uint32{1, 5} {
		t.Run(fmt.Sprintf("records=%d", maxRecords), func(t *testing.T) { spanEntriesTest(t, maxRecords) })
	}
}

func spanEntriesTest(t *testing.T, maxRecords uint32) {
	rng := rand.New(rand.NewPCG(9, uint64(maxRecords)))
	es := randomEntries(rng, 100, 700, 1, 3000, maxRecords)
	obj, info := build(t, 1, 1, es, BuilderOptions{BlockBytes: 4 << 10})
	f, err := ParseFooter(obj[info.FooterOffset:], info)
	if err != nil {
		t.Fatal(err)
	}
	if f.NumBlocks() < 50 {
		t.Fatalf("only %d blocks: the test needs many", f.NumBlocks())
	}
	// Entries of the span [off, off+n) that end after from.
	count := func(off, n, from int64) int {
		got, err := DecodeSpan(f, obj[off:off+n], off, from)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	checked := 0
	for _, from := range sampleOffsets(rng, es) {
		rest := len(es) - indexOf(es, from) // entries ending after from
		for _, maxBytes := range []int{1, 9 << 10, 64 << 10, 1 << 30} {
			bo, bn, err := f.Span(from, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, maxEntries := range []int{-1, 0, 1, 2, 7, 50, 10000} {
				off, n, err := f.SpanEntries(from, maxBytes, maxEntries)
				if err != nil {
					t.Fatal(err)
				}
				if maxEntries <= 0 {
					if off != bo || n != bn {
						t.Fatalf("from %d bytes %d: no entry bound gave [%d,+%d), Span [%d,+%d)", from, maxBytes, off, n, bo, bn)
					}
					continue
				}
				if off != bo || n > bn {
					t.Fatalf("from %d bytes %d entries %d: [%d,+%d) is not within Span's [%d,+%d)", from, maxBytes, maxEntries, off, n, bo, bn)
				}
				got := count(off, n, from)
				if got < min(maxEntries, rest) && n != bn {
					t.Fatalf("from %d bytes %d entries %d: span holds %d entries (of %d left) and stops before the byte bound", from, maxBytes, maxEntries, got, rest)
				}
				// Minimal: without its last block the span would hold fewer
				// than maxEntries entries (exactly known when entries cover
				// one offset each or from starts a block).
				if maxRecords > 1 && from != f.Block(f.blockFor(from)).First {
					checked++
					continue
				}
				last := -1
				for k := 0; k < f.NumBlocks(); k++ {
					if b := f.Block(k); b.Pos+b.Len == off+n {
						last = k
					}
				}
				if last < 0 {
					t.Fatalf("from %d: span [%d,+%d) does not end on a block boundary", from, off, n)
				}
				if lb := f.Block(last); lb.Pos > off && count(off, lb.Pos-off, from) >= maxEntries {
					t.Fatalf("from %d bytes %d entries %d: span [%d,+%d) has a block more than %d entries need", from, maxBytes, maxEntries, off, n, maxEntries)
				}
				checked++
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d cases checked", checked)
	}
}

// sampleOffsets returns every entry's first offset, some offsets inside
// entries and the last offset.
func sampleOffsets(rng *rand.Rand, es []Entry) []int64 {
	var out []int64
	for i, e := range es {
		if i%3 == 0 {
			out = append(out, e.Offset)
		}
		if e.RecordCount > 1 && rng.IntN(4) == 0 {
			out = append(out, e.Offset+1+rng.Int64N(int64(e.RecordCount)-1))
		}
	}
	return append(out, es[len(es)-1].End()-1)
}

// countingStore counts the bytes read from the store it wraps.
type countingStore struct {
	objectstore.ObjectStore
	bytes atomic.Int64
}

func (s *countingStore) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	b, err := s.ObjectStore.GetRange(ctx, key, offset, length)
	s.bytes.Add(int64(len(b)))
	return b, err
}

func (s *countingStore) ReadRange(ctx context.Context, key string, offset int64, dst []byte, opts objectstore.ReadRangeOptions) (int, error) {
	n, err := objectstore.ReadRange(ctx, s.ObjectStore, key, offset, dst, opts)
	s.bytes.Add(int64(n))
	return n, err
}

// TestReadLimit: ReadLimit and ReadPooled with an entry bound return
// exactly the entries Read does, at least maxEntries of them, fetching
// only the blocks those need (here: a read of one entry fetches one
// block, not the byte budget).
func TestReadLimit(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{ObjectStore: memstore.New()}
	objs := putObjects(t, store, 3, 21)
	for _, o := range objs {
		r := NewReader(store, 1<<20)
		if _, err := r.Footer(ctx, o.key, o.info); err != nil { // footer GET out of the counts
			t.Fatal(err)
		}
		for i, e := range o.entries {
			if i%5 != 0 {
				continue
			}
			for _, maxEntries := range []int{1, 3, 25} {
				f, _ := r.Footer(ctx, o.key, o.info)
				_, want, _ := f.SpanEntries(e.Offset, 1<<30, maxEntries)
				before := store.bytes.Load()
				got, err := r.ReadLimit(ctx, o.key, o.info, e.Offset, 1<<30, maxEntries)
				if err != nil {
					t.Fatal(err)
				}
				if fetched := store.bytes.Load() - before; fetched != want {
					t.Fatalf("%s at %d, %d entries: fetched %d bytes, the span is %d", o.key, e.Offset, maxEntries, fetched, want)
				}
				if err := checkPrefix(got, o.entries, e.Offset); err != nil {
					t.Fatal(err)
				}
				if len(got) < min(maxEntries, len(o.entries)-i) {
					t.Fatalf("%s at %d: %d entries, want at least %d", o.key, e.Offset, len(got), maxEntries)
				}
				pes, buf, err := r.ReadPooled(ctx, o.key, o.info, e.Offset, 1<<30, maxEntries)
				if err != nil {
					t.Fatal(err)
				}
				if err := checkPrefix(pes, o.entries, e.Offset); err != nil || len(pes) != len(got) {
					t.Fatalf("pooled read at %d: %d entries, ReadLimit %d (%v)", e.Offset, len(pes), len(got), err)
				}
				buf.Release()
			}
		}
		// One entry from a block start: exactly that block.
		f, _ := r.Footer(ctx, o.key, o.info)
		b := f.Block(f.NumBlocks() / 2)
		before := store.bytes.Load()
		if _, err := r.ReadLimit(ctx, o.key, o.info, b.First, 1<<30, 1); err != nil {
			t.Fatal(err)
		}
		if fetched := store.bytes.Load() - before; fetched != b.Len {
			t.Fatalf("%s: a read of one entry fetched %d bytes, its block is %d", o.key, fetched, b.Len)
		}
	}
}
