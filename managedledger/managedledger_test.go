package managedledger

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

func newFactory(t *testing.T) (*Factory, *memstore.Store, *streammem.Storage) {
	return newFactoryCfg(t, Config{WriterID: "b1", AuthorityEpoch: 1})
}

func newFactoryCfg(t *testing.T, cfg Config) (*Factory, *memstore.Store, *streammem.Storage) {
	t.Helper()
	meta, st := memstore.New(), streammem.New()
	f := NewFactory(st, meta, cfg)
	if err := f.EnsureDefaults(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f, meta, st
}

func TestTopicNames(t *testing.T) {
	for in, want := range map[string]string{
		"t":                             "persistent://public/default/t",
		"a/b/t-partition-3":             "persistent://a/b/t-partition-3",
		"non-persistent://a/b/c":        "non-persistent://a/b/c",
		"persistent://public/default/x": "persistent://public/default/x",
	} {
		n, err := ParseTopicName(in)
		if err != nil || n.String() != want {
			t.Fatalf("%q -> %v %v", in, n, err)
		}
	}
	n, _ := ParseTopicName("a/b/t-partition-3")
	if n.PartitionIndex() != 3 || n.Base().Local != "t" || n.Base().Partition(3) != n {
		t.Fatalf("partition parse %v", n)
	}
	for _, bad := range []string{"", "a/b", "kafka://a/b/c", "a b/c/d"} {
		if _, err := ParseTopicName(bad); !errors.Is(err, ErrInvalidName) {
			t.Fatalf("%q accepted", bad)
		}
	}
}

func TestLedgerPositionsAndAppend(t *testing.T) {
	ctx := context.Background()
	f, _, _ := newFactory(t)
	name, _ := ParseTopicName("t1")
	if _, err := f.Open(ctx, name, false); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("open missing: %v", err)
	}
	l, err := f.Open(ctx, name, true)
	if err != nil {
		t.Fatal(err)
	}
	if r := l.AppendAsync(stream.Entry{Payload: []byte("x")}, nil); r == nil {
		t.Fatal("nil future")
	} else if _, err := r.Wait(ctx); !errors.Is(err, ErrNoWriter) {
		t.Fatalf("append without writer: %v", err)
	}
	if err := l.AcquireWriter(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		res, err := l.AppendAsync(stream.Entry{Payload: []byte{byte(i)}, Timestamp: int64(100 + i)}, nil).Wait(ctx)
		if err != nil || res.Start != int64(i) {
			t.Fatalf("append %d: %v %v", i, res, err)
		}
	}
	p := l.PositionOf(2)
	if p.LedgerID != l.LedgerID() || l.OffsetOf(p) != 2 || l.OffsetOf(Earliest) != math.MinInt64 || l.OffsetOf(Latest) != math.MaxInt64 {
		t.Fatalf("position mapping %v", p)
	}
	es, next, err := l.Read(ctx, 1, 10, 1<<20)
	if err != nil || len(es) != 2 || next != 3 || es[0].Payload[0] != 1 {
		t.Fatalf("read %v %d %v", es, next, err)
	}
	if off, _ := l.OffsetForTimestamp(ctx, 101); off != 1 {
		t.Fatalf("offset for ts %d", off)
	}
	// Re-open sees the same incarnation; delete + recreate gets a larger ledger id.
	l2, err := f.Open(ctx, name, false)
	if err != nil || l2.LedgerID() != l.LedgerID() {
		t.Fatalf("reopen %v", err)
	}
	_ = l.Close(ctx)
	if err := f.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	l3, err := f.Open(ctx, name, true)
	if err != nil || l3.LedgerID() <= l.LedgerID() {
		t.Fatalf("recreate %v", err)
	}
	if l3.OffsetOf(p) != math.MinInt64 {
		t.Fatal("old incarnation position must sort before the new one")
	}
}

func TestFencing(t *testing.T) {
	ctx := context.Background()
	meta, st := memstore.New(), streammem.New()
	old := NewFactory(st, meta, Config{WriterID: "old", AuthorityEpoch: 1})
	_ = old.EnsureDefaults(ctx)
	name, _ := ParseTopicName("fenced")
	lo, _ := old.Open(ctx, name, true)
	if err := lo.AcquireWriter(ctx); err != nil {
		t.Fatal(err)
	}
	newer := NewFactory(st, meta, Config{WriterID: "new", AuthorityEpoch: 2})
	ln, _ := newer.Open(ctx, name, false)
	if err := ln.AcquireWriter(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lo.AppendAsync(stream.Entry{Payload: []byte("x")}, nil).Wait(ctx); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("stale owner not fenced: %v", err)
	}
	if _, err := ln.AppendAsync(stream.Entry{Payload: []byte("y")}, nil).Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCursorAcksAndPersistence runs on an entry-counted topic (the old
// offset model, whose batch acknowledgements are ack sets per entry).
func TestCursorAcksAndPersistence(t *testing.T) {
	ctx := context.Background()
	f, meta, _ := newFactoryCfg(t, Config{WriterID: "b1", AuthorityEpoch: 1, EntryCountedTopics: true})
	name, _ := ParseTopicName("c1")
	l, _ := f.Open(ctx, name, true)
	c, created, err := l.OpenCursor(ctx, "sub", func() (int64, error) { return 0, nil })
	if err != nil || !created {
		t.Fatal(err)
	}
	c.AckEntry(1, 1)
	c.AckEntry(3, 1)
	if c.AckedBelow() != 0 || !c.IsAcked(1, 1) || c.IsAcked(2, 1) {
		t.Fatal("individual acks")
	}
	c.AckEntry(0, 1)
	if c.AckedBelow() != 2 {
		t.Fatalf("ackedBelow %d", c.AckedBelow())
	}
	c.AckBatch(2, 3, []uint64{0b110}) // index 0 acked of 3
	c.AckBatch(2, 3, []uint64{0b100}) // index 1 acked
	if c.IsAcked(2, 1) || c.BatchAckSet(2, 3)[0] != 0b100 {
		t.Fatal("batch partial")
	}
	if c.Backlog(10) != 10-2-1 {
		t.Fatalf("backlog %d", c.Backlog(10))
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Reopen from metadata.
	c2, created, err := l.OpenCursor(ctx, "sub", nil)
	if err != nil || created || c2.AckedBelow() != 2 || !c2.IsAcked(3, 1) || c2.BatchAckSet(2, 3)[0] != 0b100 {
		t.Fatalf("reload %+v %v", c2.Snapshot(), err)
	}
	// A competing write (conflict) merges instead of losing acks.
	c2.AckEntry(5, 1)
	if err := c2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.AckBatch(2, 3, []uint64{0})
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c3, _, _ := l.OpenCursor(ctx, "sub", nil)
	if c3.AckedBelow() != 4 || !c3.IsAcked(5, 1) {
		t.Fatalf("merged %+v", c3.Snapshot())
	}
	// Cumulative and reset.
	c3.AckCumulative(7, 1)
	if c3.AckedBelow() != 8 {
		t.Fatal("cumulative")
	}
	c3.Reset(3)
	if c3.AckedBelow() != 3 || c3.IsAcked(5, 1) {
		t.Fatal("reset")
	}
	if err := c3.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// An older-epoch writer must not resurrect acks after the reset.
	c.AckEntry(9, 1)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c4, _, _ := l.OpenCursor(ctx, "sub", nil)
	if c4.AckedBelow() != 3 || c4.IsAcked(5, 1) {
		t.Fatalf("reset overridden %+v", c4.Snapshot())
	}
	names, _ := l.ListCursors(ctx)
	if len(names) != 1 || names[0] != "sub" {
		t.Fatalf("cursors %v", names)
	}
	// Corrupt record is detected.
	rec, _ := meta.Get(ctx, l.cursorKey("sub"))
	rec.Value[len(rec.Value)-2] ^= 1
	_, _ = meta.Put(ctx, rec.Key, rec.Value, metadata.AnyVersion)
	if _, _, err := l.OpenCursor(ctx, "sub", nil); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("corrupt record: %v", err)
	}
}

func TestCatalog(t *testing.T) {
	ctx := context.Background()
	f, _, _ := newFactory(t)
	if err := f.CreateTenant(ctx, "acme", TenantInfo{}); err != nil {
		t.Fatal(err)
	}
	if err := f.CreateTenant(ctx, "acme", TenantInfo{}); !errors.Is(err, ErrExists) {
		t.Fatal(err)
	}
	name, _ := ParseTopicName("acme/ns/t")
	if _, err := f.Open(ctx, name, true); !errors.Is(err, ErrNamespaceNotFound) {
		t.Fatalf("topic in missing namespace: %v", err)
	}
	if err := f.CreateNamespace(ctx, "acme/ns", NamespacePolicies{}); err != nil {
		t.Fatal(err)
	}
	if err := f.CreatePartitioned(ctx, name, 3); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.PartitionCount(ctx, name); n != 3 {
		t.Fatalf("partitions %d", n)
	}
	if _, err := f.Open(ctx, name, true); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("partitioned base opened as topic: %v", err)
	}
	if _, err := f.Open(ctx, name.Partition(1), true); err != nil {
		t.Fatal(err)
	}
	ts, _ := f.ListTopics(ctx, "persistent", "acme/ns")
	ps, _ := f.ListPartitioned(ctx, "persistent", "acme/ns")
	if len(ts) != 1 || ts[0] != "persistent://acme/ns/t-partition-1" || len(ps) != 1 {
		t.Fatalf("list %v %v", ts, ps)
	}
	if err := f.DeleteNamespace(ctx, "acme/ns"); !errors.Is(err, ErrNotEmpty) {
		t.Fatal(err)
	}
	ns, _ := f.ListNamespaces(ctx, "acme")
	tn, _ := f.ListTenants(ctx)
	if len(ns) != 1 || len(tn) != 2 {
		t.Fatalf("ns %v tenants %v", ns, tn)
	}
}
