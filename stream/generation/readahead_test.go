package generation

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/faultstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

// TestReadAheadSequential: with read-ahead, a sequential catch-up returns
// the same entries with the same number of GETs (every prefetched span is
// the one the next Read wants, and it is used), and nothing is left behind.
func TestReadAheadSequential(t *testing.T) {
	fs, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	for _, c := range []struct {
		name  string
		store objectstore.ObjectStore
	}{{"memstore", memstore.New()}, {"fsstore", fs}} {
		t.Run(c.name, func(t *testing.T) {
			counted := faultstore.New(c.store, faultstore.Config{})
			objs := putObjects(t, counted, 3, 21)
			r := NewReader(counted, 1<<20)
			r.SetReadAhead(1 << 20)
			before := counted.Counts(faultstore.OpGetRange).Calls
			reads := catchUp(t, r, objs, 32<<10)
			gets := counted.Counts(faultstore.OpGetRange).Calls - before
			if gets != int64(reads+len(objs)) {
				t.Fatalf("%d reads of %d objects made %d GETs, want %d", reads, len(objs), gets, reads+len(objs))
			}
			st := r.Stats()
			// The first read of each object is not prefetched (read-ahead
			// stays within an object); every other read is.
			if st.ReadAheadHits != int64(reads-len(objs)) || st.ReadAheads != st.ReadAheadHits || st.ReadAheadBytes != 0 {
				t.Fatalf("stats %+v after %d sequential reads of %d objects", st, reads, len(objs))
			}
		})
	}
}

// TestReadAheadRandomAndConcurrent: random and concurrent readers with a
// small budget read the right bytes and the budget holds.
func TestReadAheadRandomAndConcurrent(t *testing.T) {
	store := memstore.New()
	objs := putObjects(t, store, 3, 22)
	r := NewReader(store, 1<<20)
	const budget = 100 << 10
	r.SetReadAhead(budget)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 60 {
				o := objs[rng.IntN(len(objs))]
				from := o.info.Start + rng.Int64N(o.info.End-o.info.Start)
				// Half the readers walk sequentially for a while.
				for step := 0; step < 1+rng.IntN(6) && from < o.info.End; step++ {
					es, err := r.Read(context.Background(), o.key, o.info, from, 1+rng.IntN(40<<10))
					if err == nil {
						err = checkPrefix(es, o.entries, from)
					}
					if err != nil {
						errs <- err
						return
					}
					if st := r.Stats(); st.ReadAheadBytes > budget {
						errs <- errors.New("read-ahead over budget")
						return
					}
					from = es[len(es)-1].End()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := r.Stats(); st.ReadAheads == 0 || st.ReadAheadHits == 0 {
		t.Fatalf("read-ahead never used: %+v", st)
	}
	r.SetReadAhead(0)
	if st := r.Stats(); st.ReadAheadBytes != 0 {
		t.Fatalf("disabling read-ahead kept %d bytes", st.ReadAheadBytes)
	}
}

// TestReadAheadFaults: failed prefetches are never reported (the Read GETs
// itself), corrupt prefetched bytes are refused like any others, and Forget
// drops an object's prefetches.
func TestReadAheadFaults(t *testing.T) {
	ctx := context.Background()
	t.Run("lost-prefetch-responses", func(t *testing.T) {
		inner := memstore.New()
		objs := putObjects(t, inner, 2, 23)
		fault := faultstore.New(inner, faultstore.Config{Seed: 5, Rules: []faultstore.Rule{
			{Ops: []faultstore.Op{faultstore.OpGetRange}, Probability: 0.4, Kind: faultstore.LoseResponse},
		}})
		r := NewReader(fault, 1<<20)
		r.SetReadAhead(1 << 20)
		for _, o := range objs {
			for from := o.info.Start; from < o.info.End; {
				es, err := r.Read(ctx, o.key, o.info, from, 16<<10)
				if err != nil {
					if !errors.Is(err, faultstore.ErrInjected) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) {
						t.Fatalf("misreported: %v", err)
					}
					continue
				}
				if err := checkPrefix(es, o.entries, from); err != nil {
					t.Fatal(err)
				}
				from = es[len(es)-1].End()
			}
		}
		if fault.Counts(faultstore.OpGetRange).LostResponses == 0 {
			t.Fatal("no fault fired")
		}
	})
	t.Run("corrupt-prefetched-block", func(t *testing.T) {
		store := memstore.New()
		o := putObjects(t, store, 1, 24)[0]
		r := NewReader(store, 1<<20)
		r.SetReadAhead(1 << 20)
		f, err := r.Footer(ctx, o.key, o.info)
		if err != nil {
			t.Fatal(err)
		}
		obj, _, _ := store.Get(ctx, o.key)
		victim := f.Block(1)
		obj[victim.Pos+victim.Len-1] ^= 4
		if _, err := store.Put(ctx, o.key, obj, objectstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		// Read block 0, which prefetches block 1; then read block 1.
		es, err := r.Read(ctx, o.key, o.info, o.info.Start, 1)
		if err != nil || checkPrefix(es, o.entries, o.info.Start) != nil {
			t.Fatalf("block 0: %v", err)
		}
		_, err = r.Read(ctx, o.key, o.info, victim.First, 1)
		mustCorrupt(t, "prefetched corrupt block", err)
		if r.Stats().ReadAheadHits != 1 {
			t.Fatalf("the corrupt block did not come from the prefetch: %+v", r.Stats())
		}
	})
	t.Run("forget-drops-prefetches", func(t *testing.T) {
		store := memstore.New()
		o := putObjects(t, store, 1, 25)[0]
		r := NewReader(store, 1<<20)
		r.SetReadAhead(1 << 20)
		if _, err := r.Read(ctx, o.key, o.info, o.info.Start, 1); err != nil {
			t.Fatal(err)
		}
		if r.Stats().ReadAheadBytes == 0 {
			t.Fatal("no prefetch started")
		}
		r.Forget(o.key)
		if st := r.Stats(); st.ReadAheadBytes != 0 || st.Footers != 0 {
			t.Fatalf("after Forget: %+v", st)
		}
	})
}

// TestPrefetchNextObject: a reader that Prefetches the next object before
// reading it finds its footer and first span fetched: the catch-up makes
// the same GETs as without read-ahead and every read is a prefetch hit.
func TestPrefetchNextObject(t *testing.T) {
	ctx := context.Background()
	counted := faultstore.New(memstore.New(), faultstore.Config{})
	objs := putObjects(t, counted, 4, 26)
	r := NewReader(counted, 1<<20)
	r.SetReadAhead(1 << 20)
	const budget = 32 << 10
	reads := 0
	for i, o := range objs {
		for from := o.info.Start; from < o.info.End; {
			es, err := r.Read(ctx, o.key, o.info, from, budget)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkPrefix(es, o.entries, from); err != nil {
				t.Fatal(err)
			}
			from = es[len(es)-1].End()
			reads++
			if from == o.info.End && i+1 < len(objs) {
				n := objs[i+1]
				r.Prefetch(ctx, n.key, n.info, n.info.Start, budget)
				waitAhead(t, r, n.key, n.info.Start)
			}
		}
	}
	gets := counted.Counts(faultstore.OpGetRange).Calls
	if gets != int64(reads+len(objs)) {
		t.Fatalf("%d reads of %d objects made %d GETs, want %d", reads, len(objs), gets, reads+len(objs))
	}
	if st := r.Stats(); st.ReadAheadHits != int64(reads-1) || st.ReadAheadBytes != 0 {
		t.Fatalf("stats %+v after %d reads (all but the first should be prefetched)", st, reads)
	}
	// Outside the object or without a budget: nothing.
	r.Prefetch(ctx, objs[0].key, objs[0].info, objs[0].info.End, budget)
	r.SetReadAhead(0)
	r.Prefetch(ctx, objs[1].key, objs[1].info, objs[1].info.Start, budget)
	if st := r.Stats(); st.ReadAheads != int64(reads-1) {
		t.Fatalf("prefetch started when it should not: %+v", st)
	}
}

// waitAhead waits (bounded) until the Reader holds a completed prefetch of
// key from the block holding offset from.
func waitAhead(t *testing.T, r *Reader, key string, from int64) {
	t.Helper()
	for range 2000 {
		r.mu.Lock()
		var done bool
		for at, p := range r.ahead {
			if at.key == key {
				select {
				case <-p.done:
					done = true
				default:
				}
			}
		}
		r.mu.Unlock()
		if done {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no prefetch of %s at %d completed", key, from)
}

// TestPrefetchOfAnotherLength: a prefetch longer than the Read's span
// serves it and keeps the rest for the next Read; a shorter one serves its
// blocks and the Read GETs only the rest. Entries are exactly right and
// no byte is fetched twice.
func TestPrefetchOfAnotherLength(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name             string
		prefetch, budget int
	}{{"longer", 200 << 10, 20 << 10}, {"shorter", 10 << 10, 60 << 10}, {"whole-object", 1 << 30, 16 << 10}} {
		t.Run(c.name, func(t *testing.T) {
			counted := &byteCounter{ObjectStore: memstore.New()}
			o := putObjects(t, counted, 1, 27)[0]
			r := NewReader(counted, 1<<20)
			r.SetReadAhead(4 << 20)
			if _, err := r.Footer(ctx, o.key, o.info); err != nil {
				t.Fatal(err)
			}
			r.Prefetch(ctx, o.key, o.info, o.info.Start, c.prefetch)
			waitAhead(t, r, o.key, o.info.Start)
			before, prefetched := counted.bytes.Load(), r.Stats().ReadAheadBytes
			reads := catchUp(t, r, []storedObject{o}, c.budget)
			st := r.Stats()
			if st.ReadAheadHits == 0 || st.ReadAheadBytes != 0 {
				t.Fatalf("stats %+v after %d reads", st, reads)
			}
			f, _ := r.Footer(ctx, o.key, o.info)
			data := o.info.FooterOffset - f.Block(0).Pos
			if got := counted.bytes.Load() - before; got+prefetched != data {
				t.Fatalf("catch-up fetched %d bytes after a prefetch of %d; the data is %d bytes (each byte should be fetched once)", got, prefetched, data)
			}
		})
	}
}

// TestKeptPrefetchCorrupt: bytes kept from a longer prefetch are verified
// when a Read uses them: a flipped bit there is refused.
func TestKeptPrefetchCorrupt(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	o := putObjects(t, store, 1, 28)[0]
	r := NewReader(store, 1<<20)
	r.SetReadAhead(4 << 20)
	f, err := r.Footer(ctx, o.key, o.info)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, _ := store.Get(ctx, o.key)
	victim := f.Block(2)
	obj[victim.Pos+victim.Len/2] ^= 1
	if _, err := store.Put(ctx, o.key, obj, objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r.Prefetch(ctx, o.key, o.info, o.info.Start, 1<<30) // the whole object
	waitAhead(t, r, o.key, o.info.Start)
	es, err := r.Read(ctx, o.key, o.info, o.info.Start, 1) // block 0 only
	if err != nil || checkPrefix(es, o.entries, o.info.Start) != nil {
		t.Fatalf("block 0: %v", err)
	}
	if _, err := r.Read(ctx, o.key, o.info, f.Block(1).First, 1); err != nil {
		t.Fatalf("block 1: %v", err)
	}
	_, err = r.Read(ctx, o.key, o.info, victim.First, 1)
	mustCorrupt(t, "corrupt block kept from a longer prefetch", err)
}

// byteCounter counts the bytes GetRange returns.
type byteCounter struct {
	objectstore.ObjectStore
	bytes atomic.Int64
}

func (c *byteCounter) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	b, err := c.ObjectStore.GetRange(ctx, key, off, n)
	c.bytes.Add(int64(len(b)))
	return b, err
}

// proberStore answers objectstore.CacheProber with cached, and counts
// GetRange calls (ReadRange is left to GetRange: objectstore.ReadRange).
type proberStore struct {
	objectstore.ObjectStore
	cached atomic.Bool
	probes atomic.Int64
}

func (s *proberStore) Cached(ctx context.Context, key string, off, n int64) (bool, error) {
	s.probes.Add(1)
	return s.cached.Load(), nil
}

// TestReadAheadOnlyWhenNotCached: a store that says a span is in memory
// gets no read-ahead of it (a warm reader runs as without read-ahead: the
// same GETs, no prefetch started), and one that says it is not gets every
// span after the first of each object prefetched. With the gate switched
// off (startAhead ignoring Cached) the warm half fails.
func TestReadAheadOnlyWhenNotCached(t *testing.T) {
	for _, cached := range []bool{true, false} {
		t.Run(map[bool]string{true: "cached", false: "not-cached"}[cached], func(t *testing.T) {
			counted := faultstore.New(memstore.New(), faultstore.Config{})
			ps := &proberStore{ObjectStore: counted}
			ps.cached.Store(cached)
			objs := putObjects(t, ps, 3, 31)
			r := NewReader(ps, 1<<20)
			r.SetReadAhead(1 << 20)
			before := counted.Counts(faultstore.OpGetRange).Calls
			reads := catchUp(t, r, objs, 32<<10)
			gets := counted.Counts(faultstore.OpGetRange).Calls - before
			if gets != int64(reads+len(objs)) {
				t.Fatalf("%d reads of %d objects made %d GETs, want %d", reads, len(objs), gets, reads+len(objs))
			}
			st := r.Stats()
			if ps.probes.Load() == 0 {
				t.Fatal("the store was never asked")
			}
			if cached && (st.ReadAheads != 0 || st.ReadAheadsCached != int64(reads-len(objs))) {
				t.Fatalf("warm: stats %+v after %d reads of %d objects (want no read-ahead, %d not started)", st, reads, len(objs), reads-len(objs))
			}
			if !cached && (st.ReadAheadHits != int64(reads-len(objs)) || st.ReadAheads != st.ReadAheadHits || st.ReadAheadsCached != 0) {
				t.Fatalf("cold: stats %+v after %d reads of %d objects", st, reads, len(objs))
			}
		})
	}
}

// TestReadAheadPooled: a pooled Read (the Kafka fetch's) claims a
// prefetched span with its buffer: the entries are right, the buffer is
// handed over (released by the caller, reused by a later read), and a
// flipped bit in a prefetched span is ErrCorrupt, never served.
func TestReadAheadPooled(t *testing.T) {
	ctx := context.Background()
	fs, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	store := &proberStore{ObjectStore: fs} // fsstore's ReadRange, never "cached"
	o := putObjects(t, fs, 1, 32)[0]
	r := NewReader(&rangeProber{store}, 1<<20)
	r.SetReadAhead(1 << 20)
	f, err := r.Footer(ctx, o.key, o.info)
	if err != nil {
		t.Fatal(err)
	}
	for from := o.info.Start; from < o.info.End; {
		es, buf, err := r.ReadPooled(ctx, o.key, o.info, from, 16<<10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPrefix(es, o.entries, from); err != nil {
			t.Fatal(err)
		}
		if from != o.info.Start && buf == nil {
			t.Fatalf("a prefetched span at %d came without its pooled buffer", from)
		}
		from = es[len(es)-1].End()
		buf.Release()
	}
	if st := r.Stats(); st.ReadAheadHits == 0 {
		t.Fatalf("no prefetch used: %+v", st)
	}

	obj, _, _ := fs.Get(ctx, o.key)
	victim := f.Block(1)
	obj[victim.Pos+victim.Len-1] ^= 4
	if _, err := fs.Put(ctx, o.key, obj, objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	hits := r.Stats().ReadAheadHits
	es, buf, err := r.ReadPooled(ctx, o.key, o.info, o.info.Start, 1, 0) // block 0; prefetches block 1
	if err != nil || checkPrefix(es, o.entries, o.info.Start) != nil {
		t.Fatalf("block 0: %v", err)
	}
	buf.Release()
	_, buf, err = r.ReadPooled(ctx, o.key, o.info, victim.First, 1, 0)
	mustCorrupt(t, "prefetched corrupt block (pooled)", err)
	if buf != nil {
		t.Fatal("a failed read returned a buffer")
	}
	if r.Stats().ReadAheadHits != hits+1 {
		t.Fatalf("the corrupt block did not come from the prefetch: %+v", r.Stats())
	}
}

// rangeProber is a proberStore that keeps the inner store's ReadRange
// (pooled reads need objectstore.RangeReader).
type rangeProber struct{ *proberStore }

func (s *rangeProber) ReadRange(ctx context.Context, key string, off int64, dst []byte, opts objectstore.ReadRangeOptions) (int, error) {
	return objectstore.ReadRange(ctx, s.ObjectStore, key, off, dst, opts)
}

// TestReadAheadEntryBound: a Read cut short by its entry bound ends inside
// its span, so the next Read starts there: no read-ahead is started at the
// span's end (it would never be used, and would cost the device a second
// read of those bytes). Without the check every such Read starts one.
func TestReadAheadEntryBound(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	// Small entries, many to a block: a 5-entry read ends inside a block.
	es := randomEntries(rand.New(rand.NewPCG(33, 1)), 0, 400, 1, 200, 1)
	obj, info := build(t, 42, 1, es, BuilderOptions{BlockBytes: 1 << 10})
	if _, err := store.Put(ctx, "gen/42/a", obj, objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	o := storedObject{key: "gen/42/a", info: info, entries: es}
	r := NewReader(store, 1<<20)
	r.SetReadAhead(1 << 20)
	for from := o.info.Start; from < o.info.End; {
		es, err := r.ReadLimit(ctx, o.key, o.info, from, 1<<20, 5)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPrefix(es, o.entries, from); err != nil {
			t.Fatal(err)
		}
		from = es[min(len(es), 5)-1].End()
	}
	if st := r.Stats(); st.ReadAheads != st.ReadAheadHits {
		t.Fatalf("entry-bound reads started read-aheads nobody used: %+v", st)
	}
}

// TestReadAheadKeepsFreshPrefetches: with the budget full of completed
// prefetches younger than aheadStale, a newer one is not started (the
// older ones' readers, reading streams in turn, come back first); once
// they are stale it may replace them. Dropping the oldest for the newest,
// as before, fails the first half.
func TestReadAheadKeepsFreshPrefetches(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	objs := putObjects(t, store, 3, 34)
	r := NewReader(store, 1<<20)
	var spans []int64 // each object's first block
	for _, o := range objs {
		f, err := r.Footer(ctx, o.key, o.info)
		if err != nil {
			t.Fatal(err)
		}
		spans = append(spans, f.Block(0).Len)
	}
	r.SetReadAhead(spans[0] + spans[1])
	for i, o := range objs[:2] {
		r.Prefetch(ctx, o.key, o.info, o.info.Start, int(spans[i]))
		waitAhead(t, r, o.key, o.info.Start)
	}
	r.Prefetch(ctx, objs[2].key, objs[2].info, objs[2].info.Start, int(spans[2]))
	if st := r.Stats(); st.ReadAheads != 2 {
		t.Fatalf("a fresh prefetch was dropped for a newer one: %+v", st)
	}
	es, err := r.Read(ctx, objs[0].key, objs[0].info, objs[0].info.Start, int(spans[0]))
	if err != nil || checkPrefix(es, objs[0].entries, objs[0].info.Start) != nil {
		t.Fatalf("first object: %v", err)
	}
	if st := r.Stats(); st.ReadAheadHits != 1 {
		t.Fatalf("the oldest prefetch was not there for its reader: %+v", st)
	}
}
