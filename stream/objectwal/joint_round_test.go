package objectwal_test

import (
	"fmt"
	"testing"
	"time"

	mdmem "github.com/nereusstream/nereus-go/metadata/memstore"
	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// TestOneGroupCommitOneRound: appends of many streams, spread over every
// commit shard, that one WAL group commit makes durable are committed in
// one joint metadata round (a Batch, i.e. one flush of the store), not one
// round per shard plus more for the streams delivered while the first ones
// were in flight. The waiter may split the completions in two groups if it
// wakes before the producer has resolved them all, hence the bound of 3;
// one round per shard would be at least 8.
func TestOneGroupCommitOneRound(t *testing.T) {
	ctx := ctxT(t)
	prov, err := objectwal.Open(ctx, objectwal.Config{Store: osmem.New(), Prefix: "wal/j",
		FlushMode: objectwal.FlushOnInterval, FlushInterval: 100 * time.Millisecond, TruncateInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stream.Open(ctx, stream.Config{Metadata: mdmem.New(), ObjectWAL: prov, WriterID: "j", CommitShards: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const streams = 32
	sessions := make([]stream.Session, streams)
	for i := range sessions {
		info, err := c.Create(ctx, fmt.Sprint("j", i), stream.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sessions[i], err = c.AcquireSession(ctx, info.ID, stream.SessionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := c.Stats()
	futs := make([]*stream.AppendFuture, streams)
	for i, s := range sessions {
		futs[i] = c.AppendAsync(s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte{byte(i)}, RecordCount: 1}}})
	}
	for i, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	after := c.Stats()
	trips, ops := after.MetadataRoundTrips-before.MetadataRoundTrips, after.MetadataOps-before.MetadataOps
	if ops < streams {
		t.Fatalf("%d metadata ops for %d appends", ops, streams)
	}
	if trips > 3 {
		t.Fatalf("%d appends durable in one WAL commit took %d metadata rounds (%d ops), want at most 3", streams, trips, ops)
	}
	t.Logf("%d appends: %d rounds, %d ops", streams, trips, ops)
}
