package stream_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
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

// The orphan sweep honours merge claims. A merge whose publication
// response was lost keeps its claim (merge.go): the conditional write may
// still apply, so its object — unnamed, numbered below NextGen, older than
// the orphan grace — is not an orphan while the claim stands. Before, the
// sweep journaled it and GC deleted it; a late publication then named a
// deleted object and every read of the window failed.

// lostPublication answers the first conditional Put of one key (a merge's
// publication) as unknown without applying it, and keeps the write so the
// test can deliver it later: a request stuck in the network.
type lostPublication struct {
	metadata.Store
	armed atomic.Pointer[string]
	mu    sync.Mutex
	held  func() error
}

func (l *lostPublication) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	if k := l.armed.Load(); k != nil && *k == key && expected > 0 && l.armed.CompareAndSwap(k, nil) {
		l.mu.Lock()
		l.held = func() error {
			_, err := l.Store.Put(context.Background(), key, value, expected)
			return err
		}
		l.mu.Unlock()
		return 0, fmt.Errorf("%w: injected: response lost, request still in flight", metadata.ErrUnavailable)
	}
	return l.Store.Put(ctx, key, value, expected)
}

// deliver applies the held write now.
func (l *lostPublication) deliver() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held()
}

type claimSweepEnv struct {
	meta    *memstore.Store
	objects *objmem.Store
	gate    *lostPublication
	a, b    *stream.Core
	skew    atomic.Int64 // b's clock runs this far ahead
	id      stream.ID
	want    map[int64][]byte
	merged  string // the object of a's merge of [5,20)
}

// newClaimSweepEnv: process a merges [5,20) of a stream of six small
// generations and loses its publication's response (the write is held);
// process b, whose clock the test moves, runs GC. The orphan grace is 1 s
// and the claim TTL 31 s (LeaseSkew 30 s), so b can see the merged object
// past the grace while a's claim still stands.
func newClaimSweepEnv(t *testing.T) *claimSweepEnv {
	e := &claimSweepEnv{meta: memstore.New(), objects: objmem.New()}
	e.gate = &lostPublication{Store: e.meta}
	lc := stream.LifecycleConfig{Interval: 20 * time.Millisecond, GenerationBytes: 4 << 10, GenerationMaxAge: 200 * time.Millisecond,
		GCInterval: time.Hour, GCGrace: time.Millisecond, OrphanGrace: time.Second, LeaseTTL: 2 * time.Second, LeaseSkew: 30 * time.Second}
	open := func(writer string, md metadata.Store, now func() time.Time) *stream.Core {
		w, err := objectwal.Open(context.Background(), objectwal.Config{Store: e.objects, Prefix: "wal/" + writer, FlushInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		c, err := stream.Open(context.Background(), stream.Config{Metadata: md, ObjectWAL: w, ObjectStore: e.objects, WriterID: writer,
			Lifecycle: lc, RetentionInterval: time.Hour, Logger: testLogger(t), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	e.a = open("b1", e.gate, nil)
	e.b = open("b2", e.meta, func() time.Time { return time.Now().Add(time.Duration(e.skew.Load())) })
	ctx := ctxT(t)
	e.id, e.want = sixSmallGenerations(t, e.a, e.meta)

	before := map[string]bool{}
	for _, k := range keysOf(t, e.objects, "gen/") {
		before[k] = true
	}
	pubKey := fmt.Sprintf("s/g/%s/%020d", e.id, 20)
	e.gate.armed.Store(&pubKey)
	run, err := e.a.MergeWindow(ctx, e.id, 10, 15, 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(ctx); err == nil {
		t.Fatal("a's merge reported success although its publication's response was lost")
	}
	for _, k := range keysOf(t, e.objects, "gen/") {
		if !before[k] {
			e.merged = k
		}
	}
	if !strings.Contains(e.merged, fmt.Sprintf("%020d-%020d-g", 5, 20)) {
		t.Fatalf("no merged object of [5,20): %q", e.merged)
	}
	if !strings.Contains(stream.DebugIndexState(ctx, e.meta, nil, e.id), "merge claim") {
		t.Fatal("a's merge released its claim although its publication is unsettled")
	}
	// a's merge lease goes with its task (the next renew deletes it).
	waitFor(t, "a's merge lease released", func() bool {
		recs, err := e.meta.RangeScan(ctx, "s/p/"+e.id.String()+"/", "s/p/"+e.id.String()+"/\xff", 0)
		return err == nil && len(recs) == 0
	})
	return e
}

// gcPasses runs n GC passes on b.
func (e *claimSweepEnv) gcPasses(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := e.b.CollectGarbage(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *claimSweepEnv) mergedState(t *testing.T) (exists, journaled bool) {
	t.Helper()
	for _, k := range keysOf(t, e.objects, "gen/") {
		if k == e.merged {
			exists = true
		}
	}
	named, err := stream.NamedGenObjects(ctxT(t), e.meta, e.id)
	if err != nil {
		t.Fatal(err)
	}
	return exists, named[e.merged]
}

// liveClaimKeepsObject: with b's clock 2 s ahead the merged object is past
// the orphan grace but a's claim (written just before it) is not past its
// TTL. b's passes must neither journal nor delete it, and say why.
func (e *claimSweepEnv) liveClaimKeepsObject(t *testing.T) {
	t.Helper()
	e.skew.Store(int64(2 * time.Second))
	e.gcPasses(t, 4)
	exists, journaled := e.mergedState(t)
	if !exists || journaled {
		t.Fatalf("the sweep took the object of a merge whose claim stands: exists %v, journaled %v\n%s",
			exists, journaled, stream.DebugIndexState(ctxT(t), e.meta, nil, e.id))
	}
	found := false
	for _, p := range e.b.GCStatus().Pending {
		if p.Unit == e.merged && strings.Contains(p.Reason, "merge claim") {
			found = true
		}
	}
	if !found {
		t.Fatalf("gc status does not say why %s is kept: %+v", e.merged, e.b.GCStatus().Pending)
	}
}

// TestOrphanSweepKeepsClaimedMergeObject: the late publication applies
// after b's sweeps; the stream reads back through a fresh process (no
// tail cache), and once the claim is stale b finishes the merge (retires
// [5,10) and [10,15)) and removes the claim.
func TestOrphanSweepKeepsClaimedMergeObject(t *testing.T) {
	e := newClaimSweepEnv(t)
	e.liveClaimKeepsObject(t)

	if err := e.gate.deliver(); err != nil {
		t.Fatalf("a's late publication: %v", err)
	}
	ctx := ctxT(t)
	rs, err := stream.GenRanges(ctx, e.meta, e.id)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generation records after the late publication: %v", rs)
	reader := open2(t, e.meta, e.objects, "b3")
	if end := readAll(t, reader, e.id, 0, e.want); end != 30 {
		t.Fatalf("read to %d", end)
	}

	// Stale now: b settles the claim (the holder published: its sources
	// are retired) and deletes it; the merged object stays, named.
	e.skew.Store(int64(2 * time.Minute))
	settleMerges(t, ctx, e.b, e.meta, e.objects, e.id, e.want)
	if exists, _ := e.mergedState(t); !exists {
		t.Fatal("the published merged object was deleted")
	}
	if s := stream.DebugIndexState(ctx, e.meta, nil, e.id); strings.Contains(s, "merge claim") {
		t.Fatalf("the settled claim was not removed:\n%s", s)
	}
	if end := readAll(t, open2(t, e.meta, e.objects, "b4"), e.id, 0, e.want); end != 30 {
		t.Fatalf("read to %d", end)
	}
}

// TestOrphanSweepReclaimsAfterStaleClaim: the publication never arrives in
// time. Once a's claim is past its TTL, b's sweep fences the publication
// (a version bump of key 20), deletes the claim, and the object becomes an
// orphan that GC deletes; the write arriving after that is refused.
func TestOrphanSweepReclaimsAfterStaleClaim(t *testing.T) {
	e := newClaimSweepEnv(t)
	e.liveClaimKeepsObject(t)

	e.skew.Store(int64(2 * time.Minute))
	for i := 0; i < 50; i++ {
		if exists, _ := e.mergedState(t); !exists {
			break
		}
		e.gcPasses(t, 1)
		time.Sleep(5 * time.Millisecond) // GCGrace (1 ms) is measured on b's clock
	}
	if exists, _ := e.mergedState(t); exists {
		t.Fatalf("the object of a fenced merge was never reclaimed: pending %+v\n%s", e.b.GCStatus().Pending,
			stream.DebugIndexState(ctxT(t), e.meta, nil, e.id))
	}
	if err := e.gate.deliver(); metadata.Classify(err) == metadata.Applied {
		t.Fatal("a's publication applied after GC fenced its claim and deleted its object")
	}
	settleMerges(t, ctxT(t), e.b, e.meta, e.objects, e.id, e.want)
	if end := readAll(t, open2(t, e.meta, e.objects, "b3"), e.id, 0, e.want); end != 30 {
		t.Fatalf("read to %d", end)
	}
}

// open2 opens a plain process on meta and objects.
func open2(t *testing.T, meta metadata.Store, objects *objmem.Store, writer string) *stream.Core {
	t.Helper()
	w, err := objectwal.Open(context.Background(), objectwal.Config{Store: objects, Prefix: "wal/" + writer, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stream.Open(context.Background(), stream.Config{Metadata: meta, ObjectWAL: w, ObjectStore: objects, WriterID: writer,
		Lifecycle: stream.LifecycleConfig{GCDisabled: true, DisableMaterialization: true}, RetentionInterval: time.Hour, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestJournalDrainKeepsClaimedOrphan: the journal drain's last proof
// consults the claim too. An older binary's sweep journaled the object of
// a merge whose claim stands; b's passes must keep it (and say why) until
// the late publication names it, which then drops the journal entry.
func TestJournalDrainKeepsClaimedOrphan(t *testing.T) {
	e := newClaimSweepEnv(t)
	ctx := ctxT(t)
	e.skew.Store(int64(2 * time.Second))
	if err := stream.JournalOrphan(ctx, e.meta, e.id, e.merged, time.Now().Add(-time.Minute).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	e.gcPasses(t, 4)
	if exists, _ := e.mergedState(t); !exists {
		t.Fatalf("the journal drain deleted the object of a merge whose claim stands\n%s", stream.DebugIndexState(ctx, e.meta, nil, e.id))
	}
	found := false
	for _, p := range e.b.GCStatus().Pending {
		if p.Unit == e.merged && strings.Contains(p.Reason, "merge claim") {
			found = true
		}
	}
	if !found {
		t.Fatalf("gc status does not say why %s is kept: %+v", e.merged, e.b.GCStatus().Pending)
	}
	if err := e.gate.deliver(); err != nil {
		t.Fatalf("a's late publication: %v", err)
	}
	e.skew.Store(int64(2 * time.Minute))
	settleMerges(t, ctx, e.b, e.meta, e.objects, e.id, e.want)
	if exists, _ := e.mergedState(t); !exists {
		t.Fatal("the published merged object was deleted")
	}
	if end := readAll(t, open2(t, e.meta, e.objects, "b3"), e.id, 0, e.want); end != 30 {
		t.Fatalf("read to %d", end)
	}
}

// TestUnreadableClaimKeepsOrphans: with the stream's claim record corrupt
// its window is unknown, so the sweep keeps every unnamed object (and says
// why); once the record is gone the orphan is swept.
func TestUnreadableClaimKeepsOrphans(t *testing.T) {
	e := newLCEnv(t)
	c := e.open(t, "b1")
	ctx := ctxT(t)
	info, s := createWithSession(ctx, t, c, "badclaim", "")
	want := appendN(t, c, s, 0, 300)
	waitFor(t, "a published generation", func() bool { return c.LifecycleStats().Materialized > 0 })
	claimKey := "s/m/" + info.ID.String()
	if _, err := e.meta.Put(ctx, claimKey, []byte("not a claim"), metadata.NotExists); err != nil {
		t.Fatal(err)
	}
	orphan := fmt.Sprintf("gen/%s/%020d-%020d-g0-%016x", info.ID, 0, 10, uint64(0xdeadbeef))
	if _, err := e.objects.Put(ctx, orphan, []byte("orphan"), objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	present := func() bool {
		for _, k := range e.keys(t, "gen/"+info.ID.String()+"/") {
			if k == orphan {
				return true
			}
		}
		return false
	}
	waitFor(t, "the orphan past its grace", func() bool {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		for _, p := range c.GCStatus().Pending {
			if p.Unit == orphan && strings.Contains(p.Reason, "merge claim record is unreadable") {
				return true
			}
		}
		return false
	})
	for i := 0; i < 3; i++ {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !present() {
		t.Fatal("an unnamed object was deleted although the claim that may name it is unreadable")
	}
	if err := e.meta.Delete(ctx, claimKey, metadata.AnyVersion); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the orphan swept", func() bool {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		return !present()
	})
	readAll(t, c, info.ID, 0, want)
}
