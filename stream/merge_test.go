package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

// slowAppends appends rounds batches of 5 small entries, waiting after
// each until it is materialized, so every generation is tiny.
func slowAppends(t *testing.T, c *stream.Core, s stream.Session, id stream.ID, first, rounds int, want map[int64][]byte) {
	t.Helper()
	ctx := ctxT(t)
	for r := 0; r < rounds; r++ {
		for off, p := range appendN(t, c, s, first+r*5, 5) {
			want[off] = p
		}
		waitFor(t, "a small generation", func() bool {
			in, err := c.Describe(ctx, id)
			return err == nil && in.MaterializedThrough == in.EndOffset
		})
	}
}

// tileCheck fails unless stream id's generation records tile [from, to)
// exactly: no gap, no overlap (no superseded record left behind).
func tileCheck(t *testing.T, meta metadata.Store, id stream.ID, from, to int64) {
	t.Helper()
	rs, err := stream.GenRanges(context.Background(), meta, id)
	if err != nil {
		t.Fatal(err)
	}
	next := from
	for _, r := range rs {
		if r[1] <= from {
			continue
		}
		if r[0] > next || r[0] < next && next != from {
			t.Fatalf("generation records do not tile [%d, %d): %v", from, to, rs)
		}
		next = r[1]
	}
	if next != to {
		t.Fatalf("generation records end at %d, want %d: %v", next, to, rs)
	}
}

// TestMergeSmallGenerations: a slow stream's tiny generations are merged
// into larger ones (same entries, same offsets); the sources are retired by
// GC after the grace period; reads are identical before, during and after.
func TestMergeSmallGenerations(t *testing.T) {
	e := newLCEnv(t)
	c := e.open(t, "b1")
	ctx := ctxT(t)
	info, s := createWithSession(ctx, t, c, "slow", "b1")
	want := map[int64][]byte{}
	slowAppends(t, c, s, info.ID, 0, 12, want)
	waitFor(t, "indexed", func() bool { return len(e.genRecords(t, info.ID)) == 12 })
	before := len(e.keys(t, "gen/"))
	// Readers run through the merges.
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			readAll(t, c, info.ID, 0, want)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for c.LifecycleStats().Merges == 0 && time.Now().Before(deadline) {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := c.LifecycleStats()
	if st.Merges == 0 {
		t.Fatalf("no merge: %+v", st)
	}
	// GC retires the sources after the grace period. A pass may start
	// another merge in the background (whose sources then wait for their
	// grace): settled means objects == records over three passes in a row
	// with the record count unchanged.
	stable, lastRecs := 0, -1
	for stable < 3 && time.Now().Before(deadline) {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		recs := len(e.genRecords(t, info.ID))
		if len(e.keys(t, "gen/")) == recs && recs == lastRecs {
			stable++
		} else {
			stable = 0
		}
		lastRecs = recs
		time.Sleep(2 * e.lc.GCGrace)
	}
	close(stop)
	<-readerDone
	st = c.LifecycleStats()
	recs := e.genRecords(t, info.ID)
	t.Logf("generations %d -> %d records, %d objects; %d merges of %d sources", before, len(recs), len(e.keys(t, "gen/")), st.Merges, st.MergedSources)
	if len(recs) >= 12 || st.MergedSources < 2 {
		t.Fatalf("%d records after %d merges", len(recs), st.Merges)
	}
	if n := len(e.keys(t, "gen/")); n != len(recs) {
		t.Fatalf("%d generation objects for %d records: sources not retired (pending %+v)", n, len(recs), c.GCStatus().Pending)
	}
	tileCheck(t, e.meta, info.ID, 0, 60)
	if end := readAll(t, c, info.ID, 0, want); end != 60 {
		t.Fatalf("read to %d", end)
	}
	if c.LifecycleStats().MergeFailures != 0 {
		t.Fatalf("merge failures: %+v", c.LifecycleStats())
	}
}
