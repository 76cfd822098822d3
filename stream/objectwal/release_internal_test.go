package objectwal

import (
	"context"
	"testing"
	"time"
	"unsafe"

	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// TestReleaseFindsItsRunWithoutAllocating: every run written through Write
// is found again by Release from its target (by segment and byte offset,
// segmentRuns), so a committed release records the run's own identity,
// the segment's outstanding count and run map empty as the runs are
// released, and a release allocates nothing (the map keyed by whole
// targets cost a string copy per write and decoding the target another
// per release).
func TestReleaseFindsItsRunWithoutAllocating(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Open(ctx, Config{Store: osmem.New(), Prefix: "wal/w1", FlushInterval: time.Millisecond, TruncateInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)

	const runs = 150
	type result struct {
		t   provider.Target
		err error
	}
	done := make(chan result, runs)
	for i := range runs {
		run := provider.Run{Stream: uint64(i + 1), Epoch: 3, Token: 7, Commit: 1, Start: int64(i) * 10,
			Entries: []provider.Entry{{RecordCount: 10, Payload: []byte("payload")}}}
		p.Write(run, func(t provider.Target, err error) { done <- result{t, err} })
	}
	targets := make([]provider.Target, 0, runs)
	for range runs {
		r := <-done
		if r.err != nil {
			t.Fatalf("write: %v", r.err)
		}
		targets = append(targets, r.t)
	}

	// The waiter cuts targets from shared chunks (targetChunk): most
	// consecutive targets lie next to each other.
	adjacent := 0
	for i := 1; i < runs; i++ {
		a, b := targets[i-1], targets[i]
		if unsafe.Pointer(&b[0]) == unsafe.Add(unsafe.Pointer(&a[0]), len(a)) {
			adjacent++
		}
	}
	if adjacent < runs/2 {
		t.Errorf("only %d of %d consecutive targets share a chunk", adjacent, runs-1)
	}

	p.mu.Lock()
	held := 0
	for loc, sr := range p.runsOf {
		if sr.location != loc || p.outstanding[loc] != len(sr.runs) {
			t.Fatalf("segment %s: runsOf names %q with %d runs, outstanding %d", loc, sr.location, len(sr.runs), p.outstanding[loc])
		}
		held += len(sr.runs)
		// Room for every committed run, so the test measures Release,
		// not the growth of this slice.
		p.committed[loc] = make([]provider.RunRef, 0, runs)
	}
	p.mu.Unlock()
	if held != runs {
		t.Fatalf("runsOf holds %d runs, want %d", held, runs)
	}

	next := 0
	allocs := testing.AllocsPerRun(runs-1, func() {
		p.Release(targets[next], true)
		next++
	})
	if allocs != 0 {
		t.Errorf("Release of a run written here: %v allocations, want 0", allocs)
	}
	for ; next < runs; next++ {
		p.Release(targets[next], true)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.runsOf) != 0 || len(p.outstanding) != 0 {
		t.Fatalf("after releasing every run: runsOf %d segments, outstanding %v", len(p.runsOf), p.outstanding)
	}
	seen := map[uint64]bool{}
	for _, refs := range p.committed {
		for _, ref := range refs {
			if ref.Stream == ^uint64(0) || ref.Epoch != 3 || ref.Token != 7 || ref.End-ref.Start != 10 || ref.Start != int64(ref.Stream-1)*10 {
				t.Fatalf("committed run recorded as %+v: not its own identity", ref)
			}
			seen[ref.Stream] = true
		}
	}
	if len(seen) != runs {
		t.Fatalf("%d distinct committed runs recorded, want %d", len(seen), runs)
	}
}
