package stream_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// scanCountingMeta counts the range scans of the offset and generation
// indexes (keys "s/i/…" and "s/g/…", stream/records.go) and the records
// they returned; the listing's scans of stream names are not counted.
type scanCountingMeta struct {
	metadata.Store
	scans, records atomic.Int64
}

func (m *scanCountingMeta) RangeScan(ctx context.Context, min, max string, limit int) ([]metadata.Record, error) {
	recs, err := m.Store.RangeScan(ctx, min, max, limit)
	if strings.HasPrefix(min, "s/i/") || strings.HasPrefix(min, "s/g/") {
		m.scans.Add(1)
		m.records.Add(int64(len(recs)))
	}
	return recs, err
}

// openQuietCore opens writer "a"'s core on meta and the real Object WAL
// over an in-memory object store, with no background lifecycle work
// (no materialization, hourly GC and retention: the tests drive them).
func openQuietCore(t *testing.T, meta metadata.Store) *stream.Core {
	t.Helper()
	ctx := ctxT(t)
	objs := objmem.New()
	w, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/a", FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: w, ObjectStore: objs, WriterID: "a",
		RetentionInterval: time.Hour, Logger: testLogger(t),
		Lifecycle: stream.LifecycleConfig{DisableMaterialization: true, GCInterval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRetentionPassReadsOnlyWhatItJudges: a retention pass over a stream
// whose oldest source is still inside its window reads a handful of index
// records, not a page of them (it runs every second for every owned stream:
// at 256 per stream a pass over 10,000 partitions decoded 2.5 million
// descriptors to trim nothing). A pass that does trim by size still cuts
// exactly as far as the rule says, reading the index in widening pages.
func TestRetentionPassReadsOnlyWhatItJudges(t *testing.T) {
	ctx := ctxT(t)
	meta := &scanCountingMeta{Store: memstore.New()}
	c := openQuietCore(t, meta)

	const runs, entry = 400, 100
	write := func(name string, r stream.Retention) stream.ID {
		info, err := c.Create(ctx, name, stream.CreateOptions{Retention: r})
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: "a"})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < runs; i++ { // one Append, one run
			_, err := c.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1,
				Entries: []stream.Entry{{Payload: make([]byte, entry), RecordCount: 1, Timestamp: time.Now().UnixMilli()}}})
			if err != nil {
				t.Fatal(err)
			}
		}
		return info.ID
	}
	timed := write("timed", stream.Retention{Time: time.Hour})

	// The pass judges the first source and stops: a few records read.
	scans, records := meta.scans.Load(), meta.records.Load()
	if err := c.EnforceRetention(ctx); err != nil {
		t.Fatal(err)
	}
	if n := meta.records.Load() - records; n > 4 {
		t.Fatalf("a pass that trims nothing read %d index records (%d scans), want <= 4", n, meta.scans.Load()-scans)
	}
	if in, err := c.Describe(ctx, timed); err != nil || in.StartOffset != 0 {
		t.Fatalf("trimmed to %d inside the window (%v)", in.StartOffset, err)
	}

	// Size retention: whole sources go from the front while the retained
	// size exceeds the bound — exactly as far as that rule says, computed
	// here over every indexed source (the unindexed tail is newest).
	const bound = 2000
	sized := write("sized", stream.Retention{Bytes: bound})
	sources, err := stream.IndexSources(ctx, meta.Store, sized)
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.Describe(ctx, sized)
	if err != nil {
		t.Fatal(err)
	}
	want, retained := int64(0), before.RetainedBytes
	for _, src := range sources {
		if retained <= bound {
			break
		}
		want, retained = src[1], retained-src[2]
	}
	if want == 0 || len(sources) < 16 {
		t.Fatalf("test setup: %d indexed sources, expected cut %d", len(sources), want)
	}
	scans = meta.scans.Load()
	if err := c.EnforceRetention(ctx); err != nil {
		t.Fatal(err)
	}
	in, err := c.Describe(ctx, sized)
	if err != nil {
		t.Fatal(err)
	}
	if in.StartOffset != want || in.RetainedBytes != retained {
		t.Fatalf("size retention of %d trimmed to %d leaving %d bytes, want %d leaving %d", bound, in.StartOffset, in.RetainedBytes, want, retained)
	}
	if n := meta.scans.Load() - scans; n > 12 {
		t.Fatalf("trimming %d of %d indexed sources took %d index scans", in.StartOffset, len(sources), n)
	}
}

// TestDescribeSharesItsAttributes: Describe runs on every Kafka fetch, so an
// owned stream's Info costs no allocation — its Attributes map is the
// head's, shared — and Create copied the caller's map, so changing that map
// afterwards changes nothing the core reports.
func TestDescribeSharesItsAttributes(t *testing.T) {
	ctx := ctxT(t)
	c := openQuietCore(t, memstore.New())
	attrs := map[string]string{"topic": "orders", "partition": "3"}
	info, err := c.Create(ctx, "orders-3", stream.CreateOptions{Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	attrs["topic"], attrs["extra"] = "changed", "x"
	if len(info.Attributes) != 2 || info.Attributes["topic"] != "orders" {
		t.Fatalf("Create's Info has attributes %v after the caller changed its map: it is the caller's map", info.Attributes)
	}
	s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte("p"), RecordCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	in, err := c.Describe(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Attributes) != 2 || in.Attributes["topic"] != "orders" || in.Attributes["partition"] != "3" {
		t.Fatalf("attributes %v after the caller changed its map, want the ones given to Create", in.Attributes)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = c.Describe(ctx, info.ID) }); n != 0 {
		t.Fatalf("Describe of an owned stream: %.0f allocations, want 0", n)
	}
}
