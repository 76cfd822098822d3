package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/objectstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// Two processes merging one stream (an ownership move with a task still in
// flight, or every broker merging every stream as in the simulation) must
// never publish overlapping merged generations: seed 3184 of the
// simulation published [7,26) and [5,25) of one stream.

// noPartialOverlap fails if two generation records of rs overlap without
// one containing the other (a merge covers the sources it supersedes until
// they are retired; anything else is a range published twice).
func noPartialOverlap(t *testing.T, rs [][2]int64) {
	t.Helper()
	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			a, b := rs[i], rs[j]
			if a[0] >= b[1] || b[0] >= a[1] {
				continue
			}
			nested := a[0] <= b[0] && b[1] <= a[1] || b[0] <= a[0] && a[1] <= b[1]
			if !nested || a == b {
				t.Fatalf("generation records [%d, %d) and [%d, %d) overlap: a range published twice (%v)", a[0], a[1], b[0], b[1], rs)
			}
		}
	}
}

// sixSmallGenerations creates a stream on c and gives it six indexed
// generations [0,5) … [25,30).
func sixSmallGenerations(t *testing.T, c *stream.Core, meta metadata.Store) (stream.ID, map[int64][]byte) {
	t.Helper()
	ctx := ctxT(t)
	info, s := createWithSession(ctx, t, c, "race", "")
	want := map[int64][]byte{}
	slowAppends(t, c, s, info.ID, 0, 6, want)
	waitFor(t, "six indexed generations", func() bool {
		rs, err := stream.GenRanges(ctx, meta, info.ID)
		return err == nil && len(rs) == 6
	})
	rs, _ := stream.GenRanges(ctx, meta, info.ID)
	for i, r := range rs {
		if r != [2]int64{int64(5 * i), int64(5*i + 5)} {
			t.Fatalf("generations %v, want six of five entries", rs)
		}
	}
	return info.ID, want
}

// TestStaleMergePlanRefused: process b plans a merge of [5,20) from the
// generation index; before it runs, process a merges [0,15) (publishing at
// key 15 and retiring [5,10) and [10,15)). b's merge, carried out from its
// stale plan, must not publish: its publication key (20) was never touched
// by a's merge, so only a merge claim taken before the sources are checked
// can refuse it. Before the claim, b published [5,20) over a's [0,15).
func TestStaleMergePlanRefused(t *testing.T) {
	e := newLCEnv(t)
	a, b := e.open(t, "b1"), e.open(t, "b2")
	ctx := ctxT(t)
	id, want := sixSmallGenerations(t, a, e.meta)

	runB, err := b.MergeWindow(ctx, id, 10, 15, 20)
	if err != nil {
		t.Fatal(err)
	}
	runA, err := a.MergeWindow(ctx, id, 5, 10, 15)
	if err != nil {
		t.Fatal(err)
	}
	if err := runA(ctx); err != nil {
		t.Fatal(err)
	}
	if a.LifecycleStats().Merges != 1 {
		t.Fatalf("a's merge did not publish: %+v", a.LifecycleStats())
	}
	objectsBefore := len(e.keys(t, "gen/"))
	_ = runB(ctx) // refused (nil) or failed: either way it must not publish
	rs, err := stream.GenRanges(ctx, e.meta, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generation records after both merges: %v", rs)
	noPartialOverlap(t, rs)
	if n := b.LifecycleStats().Merges; n != 0 {
		t.Fatalf("b's stale merge published (%d merges)", n)
	}
	if n := len(e.keys(t, "gen/")); n != objectsBefore {
		t.Fatalf("b's refused merge left %d generation objects (%d before)", n, objectsBefore)
	}
	settleMerges(t, ctx, a, e.meta, e.objects, id, want)
}

// settleMerges runs GC passes on c until every generation object is named
// by a record and the records tile [0, 30) exactly once, then reads the
// stream back.
func settleMerges(t *testing.T, ctx context.Context, c *stream.Core, meta metadata.Store, objects objectstore.ObjectStore, id stream.ID, want map[int64][]byte) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		rs, err := stream.GenRanges(ctx, meta, id)
		if err != nil {
			t.Fatal(err)
		}
		noPartialOverlap(t, rs)
		if leaked(t, ctx, meta, objects, id) == 0 && len(rs) > 0 && isTiling(rs, 0, 30) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	tileCheck(t, meta, id, 0, 30)
	if n := leaked(t, ctx, meta, objects, id); n != 0 {
		t.Fatalf("%d generation objects neither a record nor the journal names", n)
	}
	if end := readAll(t, c, id, 0, want); end != 30 {
		t.Fatalf("read to %d", end)
	}
}

func isTiling(rs [][2]int64, from, to int64) bool {
	next := from
	for _, r := range rs {
		if r[0] != next {
			return false
		}
		next = r[1]
	}
	return next == to
}

// gatedMeta holds the first conditional Put of one key (a merge's
// publication) until released, then applies it to the store as it is by
// then and records the outcome: a stale publication arriving late.
type gatedMeta struct {
	metadata.Store
	armed    atomic.Pointer[string]
	reached  chan struct{}
	release  chan struct{}
	lateDone chan struct{}
	lateErr  error
}

func (g *gatedMeta) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	if k := g.armed.Load(); k != nil && *k == key && expected > 0 && g.armed.CompareAndSwap(k, nil) {
		close(g.reached)
		<-g.release
		v, err := g.Store.Put(context.WithoutCancel(ctx), key, value, expected)
		g.lateErr = err
		close(g.lateDone)
		return v, err
	}
	return g.Store.Put(ctx, key, value, expected)
}

// TestStaleMergeClaimFenced: process a claims a merge of [5,20) and is held
// at its publication (a conditional write of key 20). While its claim is
// live, process b's merge of [0,15) is refused (claims are exclusive);
// once the claim is older than the orphan grace (b's clock runs two
// minutes ahead), b takes it over — fencing a's publication by rewriting
// key 20 — and publishes [0,15), retiring [5,10) and [10,15). a's
// publication then arrives and must be refused: without the fence it would
// apply (key 20 is not one of b's sources) and [5,20) would overlap
// [0,15).
func TestStaleMergeClaimFenced(t *testing.T) {
	meta, objects := memstore.New(), objmem.New()
	lc := stream.LifecycleConfig{Interval: 20 * time.Millisecond, GenerationBytes: 4 << 10, GenerationMaxAge: 200 * time.Millisecond,
		GCInterval: time.Hour, GCGrace: 50 * time.Millisecond, OrphanGrace: time.Minute, LeaseTTL: 2 * time.Second}
	gate := &gatedMeta{Store: meta, reached: make(chan struct{}), release: make(chan struct{}), lateDone: make(chan struct{})}
	var skew atomic.Int64
	open := func(writer string, md metadata.Store, now func() time.Time) *stream.Core {
		w, err := objectwal.Open(context.Background(), objectwal.Config{Store: objects, Prefix: "wal/" + writer, FlushInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		c, err := stream.Open(context.Background(), stream.Config{Metadata: md, ObjectWAL: w, ObjectStore: objects, WriterID: writer,
			Lifecycle: lc, RetentionInterval: time.Hour, Logger: testLogger(t), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a := open("b1", gate, nil)
	b := open("b2", meta, func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	ctx := ctxT(t)
	id, want := sixSmallGenerations(t, a, meta)

	pubKey := fmt.Sprintf("s/g/%s/%020d", id, 20)
	gate.armed.Store(&pubKey)
	runA, err := a.MergeWindow(ctx, id, 10, 15, 20)
	if err != nil {
		t.Fatal(err)
	}
	errA := make(chan error, 1)
	go func() { errA <- runA(ctx) }()
	select {
	case <-gate.reached:
	case err := <-errA:
		t.Fatalf("a's merge ended before its publication: %v", err)
	case <-ctx.Done():
		t.Fatal("a's merge never reached its publication")
	}

	// a's claim is live: b's merge is refused.
	runB, err := b.MergeWindow(ctx, id, 5, 10, 15)
	if err != nil {
		t.Fatal(err)
	}
	objectsBefore := len(keysOf(t, objects, "gen/"))
	_ = runB(ctx)
	if n := b.LifecycleStats().Merges; n != 0 {
		t.Fatalf("b merged while a held the claim (%d merges)", n)
	}
	if n := len(keysOf(t, objects, "gen/")); n != objectsBefore {
		t.Fatalf("b's refused merge wrote %d generation objects (%d before)", n, objectsBefore)
	}

	// The claim goes stale: b takes it over and merges.
	skew.Store(int64(2 * time.Minute))
	runB, err = b.MergeWindow(ctx, id, 5, 10, 15)
	if err != nil {
		t.Fatal(err)
	}
	if err := runB(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.LifecycleStats().Merges; n != 1 {
		t.Fatalf("b did not merge after taking over the stale claim: %+v", b.LifecycleStats())
	}

	// a's publication arrives late and is refused.
	close(gate.release)
	<-gate.lateDone
	if oc := metadata.Classify(gate.lateErr); oc == metadata.Applied {
		t.Fatal("a's stale publication of [5,20) applied after b's merge of [0,15)")
	}
	if err := <-errA; err != nil && !errors.Is(err, stream.ErrCommitUnknown) {
		t.Fatalf("a's merge: %v", err)
	}
	if n := a.LifecycleStats().Merges; n != 0 {
		t.Fatalf("a's stale merge counted as published (%d)", n)
	}
	rs, err := stream.GenRanges(ctx, meta, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generation records: %v", rs)
	noPartialOverlap(t, rs)
	settleMerges(t, ctx, b, meta, objects, id, want)
	if end := readAll(t, a, id, 0, want); end != 30 {
		t.Fatalf("read through a to %d", end)
	}
}

func keysOf(t *testing.T, objects objectstore.ObjectStore, prefix string) []string {
	t.Helper()
	var out []string
	for info, err := range objects.List(context.Background(), prefix) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, info.Key)
	}
	return out
}

// failGenDeletes lets the first generation-record delete through once
// armed and fails the others (not applied, outcome reported unknown).
type failGenDeletes struct {
	metadata.Store
	armed  atomic.Bool
	passed atomic.Int32
}

func (f *failGenDeletes) Delete(ctx context.Context, key string, expected metadata.Version) error {
	if f.armed.Load() && strings.HasPrefix(key, "s/g/") && f.passed.Add(1) > 1 {
		return fmt.Errorf("%w: injected, not applied", metadata.ErrUnavailable)
	}
	return f.Store.Delete(ctx, key, expected)
}

// TestInterruptedMergeRetirementReadable: a merge published [0,15) over
// three sources and retired only one of the other two before its deletes
// started failing. Until the merge is finished, every offset must still
// read: the sources are retired highest first, so what is left is a prefix
// of the window followed by the merged record. In ascending order the
// state was [5,10) then [0,15), and a read at 0 met [5,10) first and
// failed "index gap" (the TestGCNeverDeletesNeededBytes failures).
func TestInterruptedMergeRetirementReadable(t *testing.T) {
	e := newLCEnv(t)
	fd := &failGenDeletes{Store: e.meta}
	w, err := objectwal.Open(context.Background(), objectwal.Config{Store: e.objects, Prefix: "wal/b1", FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stream.Open(context.Background(), stream.Config{Metadata: fd, ObjectWAL: w, ObjectStore: e.objects, WriterID: "b1",
		Lifecycle: e.lc, RetentionInterval: time.Hour, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t)
	id, want := sixSmallGenerations(t, c, e.meta)
	run, err := c.MergeWindow(ctx, id, 5, 10, 15)
	if err != nil {
		t.Fatal(err)
	}
	fd.armed.Store(true)
	if err := run(ctx); err == nil {
		t.Fatal("the merge finished although its source deletes failed")
	}
	if c.LifecycleStats().Merges != 1 {
		t.Fatalf("the merge did not publish: %+v", c.LifecycleStats())
	}
	rs, err := stream.GenRanges(ctx, e.meta, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generation records while the merge is unfinished: %v", rs)
	if len(rs) != 5 {
		t.Fatalf("want one source left besides the merged record: %v", rs)
	}
	// Through a fresh process (the writer's tail cache would serve it).
	reader := e.open(t, "b2")
	for from := int64(0); from < 30; from += 5 {
		if end := readAll(t, reader, id, from, want); end != 30 {
			t.Fatalf("read from %d to %d", from, end)
		}
	}
	// Finished by the next GC pass (the claim of this process's earlier
	// task is taken over at once, and superseded records are retired).
	fd.armed.Store(false)
	settleMerges(t, ctx, c, e.meta, e.objects, id, want)
}
