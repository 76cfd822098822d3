package stream_test

import (
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/stream"
)

// TestMaterializeAfterMidEntryTrim: a trim that lands inside a
// multi-record entry (Kafka DeleteRecords in the middle of a batch) leaves
// the stream's start offset inside an entry. The materializer must start
// its generation at that entry's own offset — entries are indivisible —
// instead of failing every pass with "entry at N, expected N+k". Both
// sources are exercised: the tail cache (same core) and the WAL provider
// (a fresh core, whose tail cache is empty).
func TestMaterializeAfterMidEntryTrim(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		name := "tail-cache"
		if fresh {
			name = "wal"
		}
		t.Run(name, func(t *testing.T) {
			e := newLCEnv(t)
			e.lc.GenerationBytes = 1 << 20
			e.lc.GenerationMaxAge = 300 * time.Millisecond
			c := e.open(t, "b1")
			ctx := ctxT(t)
			info, s := createWithSession(ctx, t, c, "batches", "b1")
			want := map[int64][]byte{}
			for i := 0; i < 30; i++ { // 30 entries of 10 records: offsets [0, 300)
				p := payloadOf(i)
				r, err := c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{{Payload: p, RecordCount: 10, Timestamp: int64(i)}}, ExpectedStart: -1})
				if err != nil {
					t.Fatal(err)
				}
				want[r.Start] = p
			}
			// Trim into the middle of the entry [150, 160) before the
			// materializer's age bound is reached.
			if err := c.Trim(ctx, info.ID, 155); err != nil {
				t.Fatal(err)
			}
			if fresh {
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				c = e.open(t, "b1")
				// One more entry through the new core plans the stream's
				// materialization (the test's retention pass, which plans
				// idle streams, runs hourly); [150, 300) is not in its tail
				// cache, so it comes from the WAL.
				s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: "b1"})
				if err != nil {
					t.Fatal(err)
				}
				p := payloadOf(30)
				r, err := c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{{Payload: p, RecordCount: 10, Timestamp: 30}}, ExpectedStart: -1})
				if err != nil {
					t.Fatal(err)
				}
				want[r.Start] = p
			}
			end := int64(300)
			if fresh {
				end = 310
			}
			waitFor(t, "materialization to the end", func() bool {
				in, err := c.Describe(ctx, info.ID)
				return err == nil && in.MaterializedThrough == end && c.LifecycleStats().Materialized >= 1
			})
			if gens := e.keys(t, "gen/"); len(gens) == 0 {
				t.Fatal("no generation object")
			}
			res, err := c.Read(ctx, info.ID, 155, stream.ReadOptions{MaxBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Entries) == 0 || res.Entries[0].Offset != 150 {
				t.Fatalf("read at 155 starts with %+v, want the whole entry at 150", res.Entries[:min(1, len(res.Entries))])
			}
			delete(want, 0)
			for o := range want {
				if o < 150 {
					delete(want, o)
				}
			}
			if got := readAll(t, c, info.ID, 155, want); got != end {
				t.Fatalf("read to %d, want %d", got, end)
			}
		})
	}
}
