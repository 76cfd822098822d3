package generation

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

// pieceStore is a memstore that reads ranges in pieces
// (objectstore.PieceReader) of its own size, and can fault: flip one byte
// of what it delivers at object position flipAt, fail (a lost response)
// once failAfter pieces were delivered, or serve short by cut bytes (a
// truncated object). It counts the pieces it read.
type pieceStore struct {
	*memstore.Store
	piece int

	mu        sync.Mutex
	flipAt    int64 // < 0: none
	failAfter int   // < 0: never
	cut       int
	pieces    int // pieces read, over every call
	calls     int
}

var errLost = errors.New("lost response")

func newPieceStore(piece int) *pieceStore {
	return &pieceStore{Store: memstore.New(), piece: piece, flipAt: -1, failAfter: -1}
}

func (s *pieceStore) ReadRangePieces(ctx context.Context, key string, offset int64, dst []byte, _ int, opts objectstore.ReadRangeOptions, filled func(n int) error) (int, error) {
	s.mu.Lock()
	s.calls++
	flipAt, failAfter, cut := s.flipAt, s.failAfter, s.cut
	s.mu.Unlock()
	n, err := s.Store.ReadRange(ctx, key, offset, dst, opts)
	if err != nil {
		return 0, err
	}
	n = max(n-cut, 0)
	for done, k := 0, 0; done < n; k++ {
		if k == failAfter {
			return done, errLost
		}
		end := min(done+s.piece, n)
		if flipAt >= offset+int64(done) && flipAt < offset+int64(end) {
			dst[flipAt-offset] ^= 0x40
		}
		s.mu.Lock()
		s.pieces++
		s.mu.Unlock()
		done = end
		if err := filled(done); err != nil {
			return done, err
		}
	}
	return n, nil
}

func (s *pieceStore) set(flipAt int64, failAfter, cut int) {
	s.mu.Lock()
	s.flipAt, s.failAfter, s.cut = flipAt, failAfter, cut
	s.mu.Unlock()
}

func (s *pieceStore) counts() (calls, pieces int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.pieces
}

// TestPiecesSameAsWhole: a Reader over a store that reads in pieces (of
// sizes that end inside blocks, on them and past whole spans) returns
// exactly what it returns over a store without pieces, for reads from
// every entry with small and large budgets, plain and pooled, and it uses
// the pieces (one ReadRangePieces per span).
func TestPiecesSameAsWhole(t *testing.T) {
	ctx := context.Background()
	for _, piece := range []int{1, 777, 8 << 10, 1 << 20} {
		ps := newPieceStore(piece)
		objs := putObjects(t, ps, 2, 21)
		plainStore := memstore.New()
		for _, o := range objs {
			obj, _, _ := ps.Get(ctx, o.key)
			if _, err := plainStore.Put(ctx, o.key, obj, objectstore.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pr, plain := NewReader(ps, 1<<20), NewReader(plainStore, 1<<20)
		for _, o := range objs {
			for _, e := range o.entries {
				for _, budget := range []int{1, 20 << 10, 1 << 20} {
					want, err := plain.Read(ctx, o.key, o.info, e.Offset, budget)
					if err != nil {
						t.Fatal(err)
					}
					got, err := pr.Read(ctx, o.key, o.info, e.Offset, budget)
					if err != nil {
						t.Fatalf("piece %d, read at %d of %d: %v", piece, e.Offset, budget, err)
					}
					if len(got) != len(want) {
						t.Fatalf("piece %d, read at %d of %d: %d entries, want %d", piece, e.Offset, budget, len(got), len(want))
					}
					if err := checkPrefix(got, o.entries, e.Offset); err != nil {
						t.Fatalf("piece %d: %v", piece, err)
					}
					pooled, buf, err := pr.ReadPooled(ctx, o.key, o.info, e.Offset, budget, 0)
					if err != nil {
						t.Fatal(err)
					}
					if len(pooled) != len(want) {
						t.Fatalf("piece %d, pooled read at %d: %d entries, want %d", piece, e.Offset, len(pooled), len(want))
					}
					if err := checkPrefix(pooled, o.entries, e.Offset); err != nil {
						t.Fatalf("piece %d, pooled: %v", piece, err)
					}
					buf.Release()
				}
			}
		}
		if calls, _ := ps.counts(); calls == 0 {
			t.Fatalf("piece %d: the Reader never read in pieces", piece)
		}
	}
}

// TestPiecesCorrupt: a byte flipped in any block of a span read in pieces
// fails the Read with ErrCorrupt and returns no entries and no buffer, also
// when the flip is in the last piece (after the read-ahead point); a flip
// in an early block stops the read: the store reads no piece past the one
// that completed the bad block.
func TestPiecesCorrupt(t *testing.T) {
	ctx := context.Background()
	const piece = 1 << 10
	ps := newPieceStore(piece)
	o := putObjects(t, ps, 1, 22)[0]
	r := NewReader(ps, 1<<20)
	f, err := r.Footer(ctx, o.key, o.info)
	if err != nil {
		t.Fatal(err)
	}
	if f.NumBlocks() < 4 {
		t.Fatalf("want several blocks, have %d", f.NumBlocks())
	}
	for k := range f.NumBlocks() {
		b := f.Block(k)
		for _, at := range []int64{b.Pos, b.Pos + b.Len/2, b.Pos + b.Len - 1} {
			ps.set(at, -1, 0)
			_, before := ps.counts()
			es, err := r.Read(ctx, o.key, o.info, o.info.Start, 1<<30)
			mustCorrupt(t, "flipped byte", err)
			if es != nil {
				t.Fatal("a corrupt span returned entries")
			}
			es, buf, err := r.ReadPooled(ctx, o.key, o.info, o.info.Start, 1<<30, 0)
			mustCorrupt(t, "flipped byte (pooled)", err)
			if es != nil || buf != nil {
				t.Fatal("a corrupt pooled span returned entries or a buffer")
			}
			_, after := ps.counts()
			// Two reads; each stops at the piece that completes block k.
			first := f.Block(0).Pos
			upTo := int((b.Pos+b.Len-first+piece-1)/piece) + 1
			if got := (after - before) / 2; got > upTo {
				t.Fatalf("block %d corrupt: %d pieces read per Read, at most %d needed to see it", k, got, upTo)
			}
		}
	}
	ps.set(-1, -1, 0)
	es, err := r.Read(ctx, o.key, o.info, o.info.Start, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPrefix(es, o.entries, o.info.Start); err != nil || len(es) != len(o.entries) {
		t.Fatalf("healed: %d entries, err %v", len(es), err)
	}
}

// TestPiecesLostAndShort: a response lost part-way through a span's
// pieces is the store's error (retryable, not ErrCorrupt) and returns no
// entries, and the next Read succeeds; a store that serves fewer bytes
// than the footer says (a truncated object) is ErrCorrupt, whether the
// cut ends on a block boundary or inside a block.
func TestPiecesLostAndShort(t *testing.T) {
	ctx := context.Background()
	ps := newPieceStore(3 << 10)
	o := putObjects(t, ps, 1, 23)[0]
	r := NewReader(ps, 1<<20)
	f, err := r.Footer(ctx, o.key, o.info)
	if err != nil {
		t.Fatal(err)
	}
	for _, after := range []int{0, 1, 3} {
		ps.set(-1, after, 0)
		es, err := r.Read(ctx, o.key, o.info, o.info.Start, 1<<30)
		if !errors.Is(err, errLost) || errors.Is(err, ErrCorrupt) || es != nil {
			t.Fatalf("lost after %d pieces: %d entries, err %v; want the store's error", after, len(es), err)
		}
	}
	last := f.Block(f.NumBlocks() - 1)
	for _, cut := range []int{1, int(last.Len), int(last.Len) + 5} {
		ps.set(-1, -1, cut)
		es, err := r.Read(ctx, o.key, o.info, o.info.Start, 1<<30)
		mustCorrupt(t, "short read", err)
		if es != nil {
			t.Fatal("a short span returned entries")
		}
	}
	ps.set(-1, -1, 0)
	es, err := r.Read(ctx, o.key, o.info, o.info.Start, 1<<30)
	if err != nil || len(es) != len(o.entries) {
		t.Fatalf("healed: %d entries, err %v", len(es), err)
	}
}
