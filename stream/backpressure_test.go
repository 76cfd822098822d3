package stream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	objfault "github.com/nereusstream/nereus-go/objectstore/faultstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// TestMaterializationLagBackpressure: while generation objects cannot be
// written, a stream's unmaterialized payload grows until MaxMaterializeLag;
// then appends are refused with the retriable ErrStorageUnavailable (and
// counted); once the object store takes generations again, materialization
// catches up and appends are accepted again.
func TestMaterializationLagBackpressure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	objs := objfault.New(objmem.New(), objfault.Config{Seed: 1, Rules: []objfault.Rule{
		{Ops: []objfault.Op{objfault.OpPut}, KeySubstring: "gen/", Probability: 1, Kind: objfault.FailClean}}})
	w, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/b1", FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stream.Open(ctx, stream.Config{Metadata: memstore.New(), ObjectWAL: w, ObjectStore: objs, WriterID: "b1", Logger: testLogger(t),
		RetentionInterval: time.Hour, Lifecycle: stream.LifecycleConfig{Interval: 10 * time.Millisecond, GenerationBytes: 4 << 10,
			GenerationMaxAge: 50 * time.Millisecond, GCInterval: time.Hour, MaxMaterializeLag: 8 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, s := createWithSession(ctx, t, c, "lagging", "")
	entry := []stream.Entry{{Payload: make([]byte, 1000), RecordCount: 1}}
	refused := false
	for i := 0; i < 100 && !refused; i++ {
		_, err := c.Append(ctx, s, stream.AppendRequest{Entries: entry, ExpectedStart: -1})
		switch {
		case errors.Is(err, stream.ErrStorageUnavailable):
			refused = true
		case err != nil:
			t.Fatal(err)
		}
	}
	if !refused {
		t.Fatal("appends were never refused although nothing could be materialized")
	}
	in, _ := c.Describe(ctx, info.ID)
	// Nothing is materialized, so the lag is everything committed: at most
	// the bound plus the append that crossed it.
	if in.CommittedBytes > 8<<10+1000 || in.MaterializedThrough != 0 {
		t.Fatalf("lag %d beyond the bound, materialized through %d", in.CommittedBytes, in.MaterializedThrough)
	}
	if c.LifecycleStats().MaterializeBackpressured == 0 {
		t.Fatalf("refusal not counted: %+v", c.LifecycleStats())
	}
	objs.SetEnabled(false)
	waitFor(t, "appends accepted again", func() bool {
		_, err := c.Append(ctx, s, stream.AppendRequest{Entries: entry, ExpectedStart: -1})
		if err != nil && !errors.Is(err, stream.ErrStorageUnavailable) {
			t.Fatal(err)
		}
		return err == nil
	})
	if in, _ := c.Describe(ctx, info.ID); in.MaterializedThrough == 0 {
		t.Fatalf("accepted again without materializing: %+v", in)
	}
}
