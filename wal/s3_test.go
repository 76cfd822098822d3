package wal

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
)

// TestVersitygwEndToEnd runs the protocol against a real S3 API (versitygw):
// ETag-based CAS for claims and commits, fencing, a concurrent truncation at
// the producer's epoch, replica replay with ranged reads, and the collector.
func TestVersitygwEndToEnd(t *testing.T) {
	store := s3test.Require(t).NewStore(t)
	ctx := testCtx(t)
	old := newTestProducer(t, store, testConfig())
	var ds []*Durability
	for i := range 20 {
		d, err := old.Append(ctx, [][]byte{[]byte(fmt.Sprint("a", i)), []byte(fmt.Sprint("b", i))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	for i, d := range ds {
		if seq := mustWait(t, d); seq != uint64(2*i) {
			t.Fatalf("append %d at %d", i, seq)
		}
		pl, ok := d.Placement()
		raw, err := store.GetRange(ctx, pl.Location, pl.Offset, pl.Length)
		if !ok || err != nil {
			t.Fatalf("placement %+v: %v", pl, err)
		}
		if recs, err := DecodeFrames(raw); err != nil || string(recs[1]) != fmt.Sprint("b", i) {
			t.Fatalf("ranged read of %+v: %q %v", pl, recs, err)
		}
	}
	// A truncator at the same epoch is a re-plan, not fencing.
	st := NewStore(store, testManifest)
	m, ver, _, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.SetSnapshot(SnapshotPointer{Location: "snap", ThroughSeq: 9})
	m.TruncateThrough(9)
	if err := st.Commit(ctx, m, ver); err != nil {
		t.Fatal(err)
	}
	d, _ := old.Append(ctx, [][]byte{[]byte("after-truncation")}, nil)
	if seq := mustWait(t, d); seq != 40 {
		t.Fatalf("append after truncation at %d", seq)
	}
	// A second producer fences the first.
	newer := newTestProducer(t, store, testConfig())
	d, _ = old.Append(ctx, [][]byte{[]byte("stale")}, nil)
	if _, err := d.Wait(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale producer: %v", err)
	}
	d, _ = newer.Append(ctx, [][]byte{[]byte("fresh")}, nil)
	mustWait(t, d)
	var c collector
	r := NewReplica(store, &c, ReplicaConfig{ManifestPath: testManifest, StartAt: 10, ReplicaID: "s3", Logger: quietLogger()})
	if n, err := r.Poll(ctx); err != nil || n != 32 || r.Next() != 42 {
		t.Fatalf("replica: %d records, next %d, %v", n, r.Next(), err)
	}
	g, err := NewCollector(store, GCConfig{ManifestPath: testManifest, Truncate: TruncateApplied, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if stats, err := g.Collect(ctx); err != nil || stats.MinCursor != 42 || stats.TruncatedEntries == 0 {
		t.Fatalf("collector: %+v %v", stats, err)
	}
}
