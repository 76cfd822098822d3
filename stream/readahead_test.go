package stream_test

import (
	"testing"

	"github.com/nereusstream/nereus-go/stream"
)

// TestCatchUpReadAhead: a catch-up reader on another core (no tail cache)
// reads a stream materialized into several generations with read-ahead on:
// every entry comes back exactly, and reads use the spans
// fetched ahead of them, across generation objects.
func TestCatchUpReadAhead(t *testing.T) {
	e := newLCEnv(t)
	w := e.open(t, "w1")
	ctx := ctxT(t)
	info, err := w.Create(ctx, "catchup", stream.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := w.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	want := appendN(t, w, s, 0, 800)
	waitFor(t, "materialized", func() bool {
		in, err := w.Describe(ctx, info.ID)
		return err == nil && in.MaterializedThrough == 800
	})
	if gens := e.keys(t, "gen/"); len(gens) < 4 {
		t.Fatalf("want several generation objects, have %v", gens)
	}
	e.lc.GenerationReadAheadBytes = 1 << 20
	r := e.open(t, "r1")
	if end := readAll(t, r, info.ID, 0, want); end != 800 {
		t.Fatalf("read to %d", end)
	}
	st := r.Stats()
	t.Logf("reads %d, generation reads %d, read-aheads %d, hits %d", st.Reads, st.GenerationReads, st.GenerationReadAheads, st.GenerationReadAheadHits)
	if st.GenerationReads == 0 || st.GenerationReadAheadHits == 0 || st.GenerationReadAheadHits > st.GenerationReadAheads {
		t.Fatalf("read-ahead not used: %+v", st)
	}
	// What the next read wants is estimated from payload sizes (a read
	// that crosses into an object the estimate did not reach finds nothing
	// fetched there), so not every read hits; most must.
	if 2*st.GenerationReadAheadHits < st.GenerationReads {
		t.Fatalf("%d of %d generation reads used read-ahead", st.GenerationReadAheadHits, st.GenerationReads)
	}
}

// TestCatchUpFooterAhead: a catch-up reader on another core, read-ahead
// off (the default), reading a stream materialized into several
// generations loads each next object's footer ahead of crossing into it
// (the stream names the source after the one it reads), and every entry
// comes back exactly.
func TestCatchUpFooterAhead(t *testing.T) {
	e := newLCEnv(t)
	w := e.open(t, "w1")
	ctx := ctxT(t)
	info, err := w.Create(ctx, "footers", stream.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := w.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	want := appendN(t, w, s, 0, 800)
	waitFor(t, "materialized", func() bool {
		in, err := w.Describe(ctx, info.ID)
		return err == nil && in.MaterializedThrough == 800
	})
	gens := e.keys(t, "gen/")
	if len(gens) < 4 {
		t.Fatalf("want several generation objects, have %v", gens)
	}
	r := e.open(t, "r1")
	if end := readAll(t, r, info.ID, 0, want); end != 800 {
		t.Fatalf("read to %d", end)
	}
	if st := r.Stats(); st.GenerationFootersAhead == 0 || st.GenerationReadAheads != 0 {
		t.Fatalf("footers not loaded ahead (or read-ahead on while off): %+v", st)
	}
}
