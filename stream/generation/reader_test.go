package generation

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/faultstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

type storedObject struct {
	key     string
	info    Info
	entries []Entry
}

// putObjects writes n consecutive generation objects of one stream to store.
func putObjects(t *testing.T, store objectstore.ObjectStore, n int, seed uint64) []storedObject {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []storedObject
	start := int64(0)
	for i := range n {
		es := randomEntries(rng, start, 40+rng.IntN(40), 1, 40<<10, 20)
		obj, info := build(t, 42, uint64(i+1), es, BuilderOptions{BlockBytes: 8 << 10})
		key := "gen/42/" + string(rune('a'+i))
		if _, err := store.Put(context.Background(), key, obj, objectstore.PutOptions{Mode: objectstore.PutCreate}); err != nil {
			t.Fatal(err)
		}
		out = append(out, storedObject{key: key, info: info, entries: es})
		start = info.End
	}
	return out
}

// catchUp reads every object from its start to its end with budget-sized
// reads and checks the result is exactly its entries.
func catchUp(t *testing.T, r *Reader, objs []storedObject, budget int) (reads int) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		var got []Entry
		for from := o.info.Start; from < o.info.End; {
			es, err := r.Read(ctx, o.key, o.info, from, budget)
			if err != nil {
				t.Fatalf("%s at %d: %v", o.key, from, err)
			}
			if err := checkPrefix(es, o.entries, from); err != nil {
				t.Fatal(err)
			}
			got = append(got, es...)
			from = es[len(es)-1].End()
			reads++
		}
		if len(got) != len(o.entries) {
			t.Fatalf("%s: %d entries, want %d", o.key, len(got), len(o.entries))
		}
	}
	return reads
}

func TestReaderStores(t *testing.T) {
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
			// faultstore without rules only counts calls.
			counted := faultstore.New(c.store, faultstore.Config{})
			objs := putObjects(t, counted, 4, 1)
			r := NewReader(counted, 1<<20)
			before := counted.Counts(faultstore.OpGetRange).Calls
			reads := catchUp(t, r, objs, 32<<10)
			gets := counted.Counts(faultstore.OpGetRange).Calls - before
			// One footer GET per object, then one GET per read.
			if gets != int64(reads+len(objs)) {
				t.Fatalf("%d reads of %d objects made %d ranged GETs, want %d", reads, len(objs), gets, reads+len(objs))
			}
			if st := r.Stats(); st.Misses != int64(len(objs)) || st.Footers != len(objs) || st.Hits != int64(reads-len(objs)) {
				t.Fatalf("stats %+v after %d reads", st, reads)
			}
			// A second catch-up is all cache hits: exactly one GET per read.
			before = counted.Counts(faultstore.OpGetRange).Calls
			reads = catchUp(t, r, objs, 1<<20)
			if gets := counted.Counts(faultstore.OpGetRange).Calls - before; gets != int64(reads) {
				t.Fatalf("cached catch-up: %d reads made %d GETs", reads, gets)
			}
			// Every other access pattern: random offsets, tiny budgets.
			rng := rand.New(rand.NewPCG(2, 2))
			for range 200 {
				o := objs[rng.IntN(len(objs))]
				from := o.info.Start + rng.Int64N(o.info.End-o.info.Start)
				es, err := r.Read(context.Background(), o.key, o.info, from, rng.IntN(64<<10))
				if err != nil {
					t.Fatal(err)
				}
				if err := checkPrefix(es, o.entries, from); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestReaderNotFound(t *testing.T) {
	store := memstore.New()
	objs := putObjects(t, store, 2, 3)
	r := NewReader(store, 1<<20)
	ctx := context.Background()
	o := objs[0]
	_, err := r.Read(ctx, "gen/42/missing", o.info, o.info.Start, 1<<20)
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, objectstore.ErrNotFound) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("missing object: %v", err)
	}
	// Deleted after its footer was cached: the data GET reports it, and
	// the footer is forgotten.
	if _, err := r.Read(ctx, o.key, o.info, o.info.Start, 1); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, o.key, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ctx, o.key, o.info, o.info.Start, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted object: %v", err)
	}
	if st := r.Stats(); st.Footers != 0 {
		t.Fatalf("footer of a deleted object still cached: %+v", st)
	}
	// Out-of-range offsets never touch the store.
	for _, from := range []int64{o.info.Start - 1, o.info.End} {
		if _, err := r.Read(ctx, objs[1].key, o.info, from, 1); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("Read at %d: %v", from, err)
		}
	}
}

func TestReaderCorrupt(t *testing.T) {
	ctx := context.Background()
	t.Run("replaced-object", func(t *testing.T) {
		// Another object under the key than the metadata describes (e.g.
		// an unknown PUT outcome resolved wrongly): the footer check
		// refuses it.
		store := memstore.New()
		objs := putObjects(t, store, 2, 4)
		other, _, _ := store.Get(ctx, objs[1].key)
		if _, err := store.Put(ctx, objs[0].key, other, objectstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		r := NewReader(store, 1<<20)
		_, err := r.Read(ctx, objs[0].key, objs[0].info, objs[0].info.Start, 1<<20)
		mustCorrupt(t, "replaced object", err)
		if r.Stats().Footers != 0 {
			t.Fatal("a footer that failed its check was cached")
		}
	})
	t.Run("data-flip-after-footer-cached", func(t *testing.T) {
		store := memstore.New()
		objs := putObjects(t, store, 1, 5)
		o := objs[0]
		r := NewReader(store, 1<<20)
		if _, err := r.Read(ctx, o.key, o.info, o.info.Start, 1); err != nil {
			t.Fatal(err)
		}
		obj, _, _ := store.Get(ctx, o.key)
		f, _ := r.Footer(ctx, o.key, o.info)
		victim := f.Block(f.NumBlocks() / 2)
		obj[victim.Pos+victim.Len/2] ^= 0x10
		if _, err := store.Put(ctx, o.key, obj, objectstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		// Every read that covers the flipped block fails; the others
		// return the right bytes.
		failed := 0
		for _, e := range o.entries {
			es, err := r.Read(ctx, o.key, o.info, e.Offset, 1)
			if err != nil {
				mustCorrupt(t, "flipped block", err)
				failed++
				continue
			}
			if err := checkPrefix(es, o.entries, e.Offset); err != nil {
				t.Fatal(err)
			}
		}
		if failed != int(victim.Entries) {
			t.Fatalf("%d reads failed, the flipped block holds %d entries", failed, victim.Entries)
		}
	})
	t.Run("truncated-object", func(t *testing.T) {
		store := memstore.New()
		objs := putObjects(t, store, 1, 6)
		o := objs[0]
		r := NewReader(store, 1<<20)
		if _, err := r.Read(ctx, o.key, o.info, o.info.Start, 1); err != nil {
			t.Fatal(err)
		}
		f, _ := r.Footer(ctx, o.key, o.info)
		obj, _, _ := store.Get(ctx, o.key)
		last := f.Block(f.NumBlocks() - 1)
		// Cut exactly at the start of the last block: the short GET
		// ends on a block boundary and must still be refused.
		if _, err := store.Put(ctx, o.key, obj[:last.Pos], objectstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := r.Read(ctx, o.key, o.info, f.Block(f.NumBlocks()-2).First, 1<<30)
		mustCorrupt(t, "truncated object", err)
	})
	t.Run("fsstore-reports-corrupt", func(t *testing.T) {
		dir := t.TempDir()
		fs, err := fsstore.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = fs.Close() }()
		objs := putObjects(t, fs, 1, 7)
		o := objs[0]
		path := filepath.Join(dir, "objects", "gen.d", "42.d", "a.o")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		raw[len(raw)-1] ^= 1 // our trailer's last byte, fsstore's last block
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = NewReader(fs, 1<<20).Read(ctx, o.key, o.info, o.info.Start, 1)
		if !errors.Is(err, ErrCorrupt) || !errors.Is(err, objectstore.ErrCorrupt) {
			t.Fatalf("store-detected corruption: %v", err)
		}
	})
	t.Run("info-lies-about-lengths", func(t *testing.T) {
		store := memstore.New()
		o := putObjects(t, store, 1, 8)[0]
		r := NewReader(store, 1<<20)
		for _, bad := range []Info{
			func() Info { i := o.info; i.FooterLength = 1 << 40; return i }(),
			func() Info { i := o.info; i.FooterOffset = 0; return i }(),
			func() Info { i := o.info; i.Size += 100; i.FooterOffset += 100; return i }(),
		} {
			_, err := r.Read(ctx, o.key, bad, o.info.Start, 1)
			mustCorrupt(t, "lying info", err)
		}
	})
}

// TestReaderLostResponses: GETs whose responses are lost (or fail cleanly)
// surface as plain errors (neither ErrNotFound nor ErrCorrupt); retrying
// succeeds with the right bytes, and a failure never poisons the cache.
func TestReaderLostResponses(t *testing.T) {
	inner := memstore.New()
	objs := putObjects(t, inner, 3, 9)
	fault := faultstore.New(inner, faultstore.Config{Seed: 11, Rules: []faultstore.Rule{
		{Ops: []faultstore.Op{faultstore.OpGetRange}, Probability: 0.3, Kind: faultstore.LoseResponse},
		{Ops: []faultstore.Op{faultstore.OpGetRange}, Probability: 0.2, Kind: faultstore.FailClean},
	}})
	r := NewReader(fault, 1<<20)
	ctx := context.Background()
	failures := 0
	for _, o := range objs {
		for from := o.info.Start; from < o.info.End; {
			es, err := r.Read(ctx, o.key, o.info, from, 16<<10)
			if err != nil {
				if errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) || !errors.Is(err, faultstore.ErrInjected) {
					t.Fatalf("transient failure misreported: %v", err)
				}
				failures++
				continue
			}
			if err := checkPrefix(es, o.entries, from); err != nil {
				t.Fatal(err)
			}
			from = es[len(es)-1].End()
		}
	}
	if failures == 0 || fault.Counts(faultstore.OpGetRange).LostResponses == 0 {
		t.Fatal("no faults fired")
	}
}

// TestReaderSharedFooterLoad: concurrent first reads of one object share
// one footer GET.
func TestReaderSharedFooterLoad(t *testing.T) {
	inner := memstore.New()
	o := putObjects(t, inner, 1, 10)[0]
	// Delay GETs so the readers overlap.
	slow := faultstore.New(inner, faultstore.Config{Rules: []faultstore.Rule{
		{Ops: []faultstore.Op{faultstore.OpGetRange}, Probability: 1, Kind: faultstore.Latency, Latency: 20e6},
	}})
	r := NewReader(slow, 1<<20)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			from := o.entries[g%len(o.entries)].Offset
			es, err := r.Read(context.Background(), o.key, o.info, from, 4<<10)
			if err == nil {
				err = checkPrefix(es, o.entries, from)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Stats(); st.Misses != 1 {
		t.Fatalf("16 concurrent readers made %d footer GETs", st.Misses)
	}
}

// TestReaderCacheBound: the cache never holds more than its budget, evicts
// least recently used footers, and a zero budget caches nothing.
func TestReaderCacheBound(t *testing.T) {
	store := memstore.New()
	objs := putObjects(t, store, 6, 12)
	ctx := context.Background()
	f, err := NewReader(store, 1<<20).Footer(ctx, objs[0].key, objs[0].info)
	if err != nil {
		t.Fatal(err)
	}
	one := f.memSize() + int64(len(objs[0].key))
	r := NewReader(store, 3*one+one/2) // room for three (footers are similar in size)
	for _, o := range objs {
		if _, err := r.Footer(ctx, o.key, o.info); err != nil {
			t.Fatal(err)
		}
		if st := r.Stats(); st.Bytes > 3*one+one/2 {
			t.Fatalf("cache holds %d bytes, budget %d", st.Bytes, 3*one+one/2)
		}
	}
	if st := r.Stats(); st.Footers < 2 || st.Footers > 3 {
		t.Fatalf("cache holds %d footers", st.Footers)
	}
	// The most recent footer is a hit, the oldest a miss.
	misses := r.Stats().Misses
	if _, err := r.Footer(ctx, objs[5].key, objs[5].info); err != nil || r.Stats().Misses != misses {
		t.Fatalf("most recent footer was evicted: %v", err)
	}
	if _, err := r.Footer(ctx, objs[0].key, objs[0].info); err != nil || r.Stats().Misses != misses+1 {
		t.Fatalf("oldest footer still cached: %v", err)
	}
	r.Forget(objs[0].key)
	if _, err := r.Footer(ctx, objs[0].key, objs[0].info); err != nil || r.Stats().Misses != misses+2 {
		t.Fatal("Forget did not drop the footer")
	}
	none := NewReader(store, 0)
	for range 3 {
		if _, err := none.Read(ctx, objs[0].key, objs[0].info, objs[0].info.Start, 1); err != nil {
			t.Fatal(err)
		}
	}
	if st := none.Stats(); st.Footers != 0 || st.Misses != 3 {
		t.Fatalf("uncached reader: %+v", st)
	}
}

// TestReaderStoreSentinels: a store's NotFound and Corrupt answers (here
// injected by faultstore on the footer GET and on the data GET) map onto
// ErrNotFound and ErrCorrupt, keep the store's sentinel in the chain, and
// are never confused with each other.
func TestReaderStoreSentinels(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		inject  error
		want    error
		wantNot error
	}{
		{"not-found", objectstore.ErrNotFound, ErrNotFound, ErrCorrupt},
		{"corrupt", objectstore.ErrCorrupt, ErrCorrupt, ErrNotFound},
	} {
		for _, footerCached := range []bool{false, true} {
			inner := memstore.New()
			o := putObjects(t, inner, 1, 13)[0]
			fault := faultstore.New(inner, faultstore.Config{Rules: []faultstore.Rule{
				{Ops: []faultstore.Op{faultstore.OpGetRange}, Probability: 1, Kind: faultstore.FailClean, CleanErr: c.inject},
			}})
			r := NewReader(fault, 1<<20)
			if footerCached {
				fault.SetEnabled(false)
				if _, err := r.Footer(ctx, o.key, o.info); err != nil {
					t.Fatal(err)
				}
				fault.SetEnabled(true)
			}
			_, err := r.Read(ctx, o.key, o.info, o.info.Start, 1<<20)
			if !errors.Is(err, c.want) || !errors.Is(err, c.inject) || errors.Is(err, c.wantNot) {
				t.Fatalf("%s (footer cached %v): %v", c.name, footerCached, err)
			}
			// Healed, the same reader reads the right bytes.
			fault.SetEnabled(false)
			es, err := r.Read(ctx, o.key, o.info, o.info.Start, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkPrefix(es, o.entries, o.info.Start); err != nil {
				t.Fatal(err)
			}
		}
	}
}
