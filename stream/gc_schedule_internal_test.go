package stream

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/objectwal"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// waitGCIdle waits (bounded) until no scheduled GC pass runs: the passes
// run on real goroutines while the clock and timers are the test's.
func waitGCIdle(t *testing.T, c *Core) {
	t.Helper()
	for i := 0; i < 5000; i++ {
		c.gcs.mu.Lock()
		running := c.gcs.running
		c.gcs.mu.Unlock()
		if !running {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("a GC pass did not finish")
}

func gcPassCounts(c *Core) (full, due int64) { return c.lc.gcPasses.Load(), c.lc.gcDuePasses.Load() }

// TestGCScheduleKicksAndDeadlines drives the GC scheduler on a hand-driven
// clock: a full pass comes every GCInterval; a kick (a trim) brings it
// forward, but never sooner than gcMinGap after the previous pass; a
// provider's grace end wakes a due-only pass gcMinGap after it unless a
// full pass starts in between (a kick just after the grace end, the
// periodic pass), which does the work; a kick a moment before a grace end
// waits for it.
func TestGCScheduleKicksAndDeadlines(t *testing.T) {
	rt := &tickRuntime{at: time.Unix(1_700_000_000, 0)}
	const interval = time.Hour
	c, err := Open(context.Background(), Config{Metadata: memstore.New(), ObjectWAL: memprovider.New(1, memprovider.Faults{}),
		WriterID: "b1", RetentionInterval: 100 * time.Hour, runtime: rt,
		Lifecycle: LifecycleConfig{GCInterval: interval, DisableMaterialization: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	step := func(d time.Duration) {
		t.Helper()
		rt.advance(d)
		rt.fire(false)
		waitGCIdle(t, c)
	}
	expect := func(what string, full, due int64) {
		t.Helper()
		if f, d := gcPassCounts(c); f != full || d != due {
			t.Fatalf("%s: %d full and %d due passes, want %d and %d", what, f, d, full, due)
		}
	}
	step(0)
	expect("before anything is due", 0, 0)
	c.gcKick()
	step(0)
	expect("a kick", 1, 0)
	c.gcKick()
	step(c.gcMinGap() / 2)
	expect("a kick within the minimum gap", 1, 0)
	step(c.gcMinGap())
	expect("the same kick once the gap passed", 2, 0)

	// A grace end wakes a due pass a gap after it, not at the interval.
	gap := c.gcMinGap()
	rt.advance(gap)
	c.gcNoteDue(rt.now().Add(2 * time.Second))
	step(2 * time.Second)
	expect("at the grace end", 2, 0)
	step(gap)
	expect("a gap after the grace end", 2, 1)

	// A kick just after a grace end: its full pass does the work.
	c.gcNoteDue(rt.now().Add(time.Second))
	step(time.Second + gap/2)
	c.gcKick()
	step(0)
	expect("a kick just after a grace end", 3, 1)
	step(gap)
	expect("a gap after that", 3, 1)

	// The periodic pass still comes, and a grace end just before it is
	// left to it.
	c.gcs.mu.Lock()
	next := c.gcs.nextFull
	c.gcs.mu.Unlock()
	c.gcNoteDue(next.Add(-c.gcMinGap() / 2))
	step(next.Add(-c.gcMinGap() / 2).Sub(rt.now()))
	expect("a grace end a moment before the periodic pass", 3, 1)
	step(c.gcMinGap() / 2)
	expect("the periodic pass", 4, 1)

	// A kick a moment before a grace end: one full pass, at the grace end.
	rt.advance(c.gcMinGap())
	c.gcNoteDue(rt.now().Add(c.gcMinGap() / 2))
	c.gcKick()
	step(0)
	expect("a kick a moment before a grace end", 4, 1)
	step(c.gcMinGap() / 2)
	expect("at the grace end", 5, 1)
}

// TestTrimDeletesSegmentsWithoutWaitingForTheInterval: on the real Object
// WAL, a trim of everything a stream wrote makes its segments deletable,
// and they are deleted once the grace period has passed on the clock —
// with a GC interval of an hour that never comes, by a pass the trim asked
// for and a due pass gcMinGap after the grace end (no full pass came in
// between to do it). Nothing is deleted before the grace ends.
func TestTrimDeletesSegmentsWithoutWaitingForTheInterval(t *testing.T) {
	ctx := context.Background()
	rt := &tickRuntime{at: time.Unix(1_700_000_000, 0)}
	objs := objmem.New()
	w, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/b1", FlushInterval: time.Millisecond, TruncateInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const grace = 2 * time.Second
	c, err := Open(ctx, Config{Metadata: memstore.New(), ObjectWAL: w, ObjectStore: objs, WriterID: "b1",
		RetentionInterval: 100 * time.Hour, runtime: rt,
		Lifecycle: LifecycleConfig{GCInterval: time.Hour, GCGrace: grace, DisableMaterialization: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Create(ctx, "s", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.AcquireSession(ctx, info.ID, SessionOptions{WriterID: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for i := 0; i < 8; i++ {
		r, err := c.Append(ctx, s, AppendRequest{Entries: []Entry{{Payload: []byte(strings.Repeat("x", 1000)), RecordCount: 1}}, ExpectedStart: -1})
		if err != nil {
			t.Fatal(err)
		}
		end = r.End
	}
	segments := func() int {
		n := 0
		for info, err := range objs.List(ctx, "wal/b1/seg/") {
			if err != nil {
				t.Fatal(err)
			}
			_ = info
			n++
		}
		return n
	}
	n := segments()
	if n == 0 {
		t.Fatal("no segment written")
	}
	// Every segment is out of the live manifest (the truncator runs on
	// real time) once a pass finds them all kept for their runs.
	for i := 0; ; i++ {
		st, err := c.CollectGarbage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.PendingCount == n {
			break
		}
		if i == 2000 {
			t.Fatalf("%d of %d segments retained", st.PendingCount, n)
		}
		time.Sleep(time.Millisecond)
	}
	full0, due0 := gcPassCounts(c)

	if err := c.Trim(ctx, info.ID, end); err != nil {
		t.Fatal(err)
	}
	rt.fire(false) // the pass the trim asked for: it finds the segments retired
	waitGCIdle(t, c)
	if f, _ := gcPassCounts(c); f != full0+1 {
		t.Fatalf("the trim ran %d full passes, want 1", f-full0)
	}
	if got := segments(); got != n {
		t.Fatalf("%d of %d segments deleted before the grace period ended", n-got, n)
	}
	rt.advance(grace - time.Millisecond)
	rt.fire(false)
	waitGCIdle(t, c)
	if got := segments(); got != n {
		t.Fatalf("%d of %d segments deleted before the grace period ended", n-got, n)
	}
	rt.advance(time.Millisecond)
	rt.fire(false)
	waitGCIdle(t, c)
	if got := segments(); got != n {
		t.Fatalf("%d of %d segments deleted at the grace end, before the pass for it", n-got, n)
	}
	rt.advance(c.gcMinGap()) // no full pass came meanwhile: a due pass
	rt.fire(false)
	waitGCIdle(t, c)
	if got := segments(); got != 0 {
		t.Fatalf("%d of %d segments left after the grace period", got, n)
	}
	if f, d := gcPassCounts(c); f != full0+1 || d != due0+1 {
		t.Fatalf("%d full and %d due passes after the trim, want 1 and 1", f-full0, d-due0)
	}
}
