package wal

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

const testSegPrefix = testManifest + ".segments"

func newTestCollector(t testing.TB, store objectstore.ObjectStore, cfg GCConfig, clock *time.Time) *Collector {
	t.Helper()
	cfg.ManifestPath = testManifest
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = time.Minute
	}
	cfg.Logger = quietLogger()
	g, err := NewCollector(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.now = func() time.Time { return *clock }
	return g
}

func putSegment(t testing.TB, store objectstore.ObjectStore, key string, epoch uint64, legacy bool) {
	t.Helper()
	seg, _, err := encodeSegment(nil, segmentSpec{groups: [][][]byte{{[]byte("orphan")}}, epoch: epoch, legacy: legacy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(testCtx(t), key, seg, objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func exists(t testing.TB, store objectstore.ObjectStore, key string) bool {
	t.Helper()
	_, err := store.Head(testCtx(t), key)
	if err != nil && !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func appendOne(t testing.TB, p *Producer, data string) {
	t.Helper()
	d, err := p.Append(testCtx(t), [][]byte{[]byte(data)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustWait(t, d)
}

func TestCollectorDeletesOnlyProvablyDeadSegments(t *testing.T) {
	store := memstore.New()
	ctx := testCtx(t)
	pA := newTestProducer(t, store, testConfig())
	appendOne(t, pA, "a0")
	appendOne(t, pA, "a1")
	runA := pA.runID
	fencedOrphan := fmt.Sprintf("%s/%s/%016x", testSegPrefix, runA, 0xff)
	putSegment(t, store, fencedOrphan, pA.Epoch(), false)

	pB := newTestProducer(t, store, testConfig()) // fences A
	for i := range 3 {
		appendOne(t, pB, fmt.Sprint("b", i))
	}
	inFlight := fmt.Sprintf("%s/%s/%016x", testSegPrefix, pB.runID, 0xff)
	putSegment(t, store, inFlight, pB.Epoch(), false)
	legacyOrphan := testSegPrefix + "/RUNL/0000000000000000"
	putSegment(t, store, legacyOrphan, 0, true)
	foreign := testSegPrefix + "/not-a-segment"
	putSegment(t, store, foreign, 0, false)

	m, _, _, _ := NewStore(store, testManifest).Load(ctx)
	referenced := m.locations()

	clock := time.Now()
	g := newTestCollector(t, store, GCConfig{}, &clock)
	st, err := g.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.DeletedSegments != 0 {
		t.Fatalf("deleted %d inside the grace period", st.DeletedSegments)
	}
	clock = clock.Add(2 * time.Minute)
	if st, err = g.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(t, store, fencedOrphan) || st.DeletedSegments != 1 {
		t.Fatalf("fenced producer's orphan: deleted %d", st.DeletedSegments)
	}
	for _, k := range []string{inFlight, legacyOrphan, foreign} {
		if !exists(t, store, k) {
			t.Fatalf("%s deleted without proof", k)
		}
	}
	for _, k := range referenced {
		if !exists(t, store, k) {
			t.Fatalf("referenced segment %s deleted", k)
		}
	}

	// Someone else truncates A's two segments and B's first; a fresh
	// collector (no memory of them) must still prove them dead.
	st2 := NewStore(store, testManifest)
	m, ver, _, _ := st2.Load(ctx)
	m.TruncateThrough(2)
	if err := st2.Commit(ctx, m, ver); err != nil {
		t.Fatal(err)
	}
	g2 := newTestCollector(t, store, GCConfig{}, &clock)
	if _, err := g2.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * time.Minute)
	if st, err = g2.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if st.DeletedSegments != 3 {
		t.Fatalf("deleted %d truncated segments, want 3", st.DeletedSegments)
	}
	for i, k := range referenced {
		if exists(t, store, k) != (i >= 3) {
			t.Fatalf("segment %d (%s) existence wrong after truncation GC", i, k)
		}
	}
	if !exists(t, store, inFlight) {
		t.Fatal("live producer's in-flight upload deleted")
	}
	// The log is still readable from the first live record.
	r := NewReplica(store, &collector{}, ReplicaConfig{ManifestPath: testManifest, StartAt: 3, Logger: quietLogger()})
	if n, err := r.Poll(ctx); err != nil || n != 2 {
		t.Fatalf("poll after GC: %d %v", n, err)
	}
}

func TestCollectorTruncationRespectsReplicaCursors(t *testing.T) {
	store := memstore.New()
	ctx := testCtx(t)
	es := produceSegments(t, store, 6, 2) // sequences 0..11
	slow := NewReplica(store, &collector{}, ReplicaConfig{ManifestPath: testManifest, ReplicaID: "slow", MaxRecordsPerPoll: 4, CursorPublishInterval: time.Nanosecond, Logger: quietLogger()})
	fast := NewReplica(store, &collector{}, ReplicaConfig{ManifestPath: testManifest, ReplicaID: "fast", CursorPublishInterval: time.Nanosecond, Logger: quietLogger()})
	for _, r := range []*Replica{slow, fast} {
		if _, err := r.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if slow.Next() != 4 || fast.Next() != 12 {
		t.Fatalf("slow %d fast %d", slow.Next(), fast.Next())
	}
	st := NewStore(store, testManifest)
	m, ver, _, _ := st.Load(ctx)
	m.SetSnapshot(SnapshotPointer{Location: "snap/9", ThroughSeq: 9})
	if err := st.Commit(ctx, m, ver); err != nil {
		t.Fatal(err)
	}

	clock := time.Now()
	g := newTestCollector(t, store, GCConfig{Truncate: TruncateToSnapshot}, &clock)
	stats, err := g.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.TruncatedEntries != 2 || stats.LiveCursors != 2 || stats.MinCursor != 4 {
		t.Fatalf("stats %+v: truncation must stop at the slow replica's cursor", stats)
	}
	// The slow replica still gets everything it needs.
	for slow.Next() < 12 {
		if _, err := slow.Poll(ctx); err != nil {
			t.Fatalf("slow replica after truncation: %v", err)
		}
	}
	clock = clock.Add(2 * time.Minute)
	if stats, err = g.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	// Now both replicas are at 12: truncate through the snapshot (9), i.e.
	// entries [4,6) [6,8) [8,10); the two truncated earlier become deletable.
	if stats.TruncatedEntries != 3 || stats.DeletedSegments != 2 {
		t.Fatalf("second pass %+v", stats)
	}
	clock = clock.Add(2 * time.Minute)
	if stats, err = g.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if stats.DeletedSegments != 3 || !exists(t, store, es[5].Location) {
		t.Fatalf("third pass %+v", stats)
	}

	// TruncateApplied truncates what every live replica applied.
	store2 := memstore.New()
	produceSegments(t, store2, 3, 1)
	r := NewReplica(store2, &collector{}, ReplicaConfig{ManifestPath: testManifest, ReplicaID: "only", MaxRecordsPerPoll: 2, Logger: quietLogger()})
	if _, err := r.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	ga := newTestCollector(t, store2, GCConfig{Truncate: TruncateApplied}, &clock)
	if stats, err = ga.Collect(ctx); err != nil || stats.TruncatedEntries != 0 {
		// The replica's first publish recorded cursor 0 (before applying);
		// it republishes only after CursorPublishInterval.
		t.Fatalf("applied policy with stale cursor: %+v %v", stats, err)
	}
	r.publishedAt = time.Time{}
	if _, err := r.Poll(ctx); err != nil { // applies seq 2, republishes 3
		t.Fatal(err)
	}
	if stats, err = ga.Collect(ctx); err != nil || stats.TruncatedEntries != 3 || stats.MinCursor != 3 {
		t.Fatalf("applied policy: %+v %v", stats, err)
	}
}

// TestManifestSizeBoundedWithTruncation drives a producer while a snapshotter
// advances the snapshot pointer and a collector truncates: the manifest must
// stay small no matter how many segments were written.
func TestManifestSizeBoundedWithTruncation(t *testing.T) {
	store := memstore.New()
	ctx := testCtx(t)
	p := newTestProducer(t, store, testConfig())
	clock := time.Now()
	g := newTestCollector(t, store, GCConfig{Truncate: TruncateToSnapshot, GracePeriod: time.Second}, &clock)
	st := NewStore(store, testManifest)
	maxSize, deleted := 0, 0
	for i := range 400 {
		appendOne(t, p, fmt.Sprintf("record-%d", i))
		if i%10 != 9 {
			continue
		}
		// Snapshotter: everything so far is in the snapshot.
		for {
			m, ver, _, err := st.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m.SetSnapshot(SnapshotPointer{Location: fmt.Sprintf("snap/%d", i), ThroughSeq: m.NextSequence() - 1})
			err = st.Commit(ctx, m, ver)
			if err == nil {
				break
			}
			if !errors.Is(err, objectstore.ErrPreconditionFailed) {
				t.Fatal(err)
			}
		}
		if raw, _, err := store.Get(ctx, testManifest); err == nil {
			maxSize = max(maxSize, len(raw)) // before truncation: the peak
		}
		clock = clock.Add(2 * time.Second)
		stats, err := g.Collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		maxSize = max(maxSize, stats.ManifestBytes)
		deleted += stats.DeletedSegments
	}
	if maxSize > 2048 {
		t.Fatalf("manifest grew to %d bytes despite truncation", maxSize)
	}
	if deleted < 350 {
		t.Fatalf("only %d of 400 segments reclaimed", deleted)
	}
	t.Logf("400 segments written, manifest peaked at %d bytes, %d segments reclaimed", maxSize, deleted)
}

func TestCollectorUnderLiveProducer(t *testing.T) {
	// A collector truncating continuously next to a live producer and a
	// replica: no Append fails, the replica never hits ErrTruncated.
	store := memstore.New()
	ctx := testCtx(t)
	p := newTestProducer(t, store, testConfig())
	var c collector
	r := NewReplica(store, &c, ReplicaConfig{ManifestPath: testManifest, ReplicaID: "r", CursorPublishInterval: time.Nanosecond, Logger: quietLogger()})
	clock := time.Now()
	g := newTestCollector(t, store, GCConfig{Truncate: TruncateApplied, GracePeriod: time.Millisecond}, &clock)
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		for gctx.Err() == nil {
			if _, err := g.Collect(gctx); err != nil && gctx.Err() == nil {
				done <- err
				return
			}
			if _, err := r.Poll(gctx); err != nil && gctx.Err() == nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var ds []*Durability
	for i := range 200 {
		d, err := p.Append(ctx, [][]byte{[]byte(fmt.Sprint(i))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
		if i%20 == 19 {
			mustWait(t, d)
		}
	}
	for i, d := range ds {
		if seq := mustWait(t, d); seq != uint64(i) {
			t.Fatalf("append %d at %d", i, seq)
		}
	}
	eventually(t, "replica to catch up", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.seqs) >= 200
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, s := range c.seqs[:200] {
		if s != uint64(i) {
			t.Fatalf("replica applied %d at position %d", s, i)
		}
	}
}
