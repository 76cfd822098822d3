package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	mdfault "github.com/nereusstream/nereus-go/metadata/faultstore"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/objectstore"
	objfault "github.com/nereusstream/nereus-go/objectstore/faultstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// TestMergeResponseLossCuts loses (or fails) each irreversible step of a
// merge — the generation-number reservation, the merged object's PUT, the
// source's journal entry, the publication (the last source's record
// replaced), the other sources' record deletes, a source object's DELETE —
// while the first broker merges a slow stream's small generations; then
// that broker stops and a second one takes over with the faults gone. The
// lifecycle converges: every entry reads back identical, the generation
// records tile the stream exactly once (nothing published twice, no
// superseded record left), and no generation object is left that neither a
// record nor the retire journal names.
func TestMergeResponseLossCuts(t *testing.T) {
	cases := []struct {
		name string
		md   *mdfault.Rule
		obj  *objfault.Rule
	}{
		{name: "reservation head CAS", md: &mdfault.Rule{Kinds: mdfault.Batch | mdfault.Put, Prefix: "s/h/", LoseRate: 1, Limit: 1}},
		{name: "merged object PUT", obj: &objfault.Rule{Ops: []objfault.Op{objfault.OpPut}, KeySubstring: "gen/", Probability: 1, Kind: objfault.LoseResponse, Limit: 1}},
		{name: "source journal put", md: &mdfault.Rule{Kinds: mdfault.Put, Prefix: "s/r/", LoseRate: 1, Limit: 1}},
		{name: "publication", md: &mdfault.Rule{Kinds: mdfault.Put, Prefix: "s/g/", LoseRate: 1, Limit: 1}},
		{name: "publication fails", md: &mdfault.Rule{Kinds: mdfault.Put, Prefix: "s/g/", FailRate: 1}},
		{name: "source record delete", md: &mdfault.Rule{Kinds: mdfault.Delete, Prefix: "s/g/", LoseRate: 1, Limit: 1}},
		{name: "source record deletes fail (resume on takeover)", md: &mdfault.Rule{Kinds: mdfault.Delete, Prefix: "s/g/", FailRate: 1}},
		{name: "source object DELETE", obj: &objfault.Rule{Ops: []objfault.Op{objfault.OpDelete}, KeySubstring: "gen/", Probability: 1, Kind: objfault.LoseResponse, Limit: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			meta := mdfault.Wrap(memstore.New(), mdfault.Config{Seed: 1})
			inner := objmem.New()
			var objRules []objfault.Rule
			if tc.obj != nil {
				objRules = []objfault.Rule{*tc.obj}
			}
			objs := objfault.New(inner, objfault.Config{Seed: 1, Rules: objRules})
			objs.SetEnabled(false)
			open := func(writer string) *stream.Core {
				w, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/" + writer, FlushInterval: time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				c, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: w, ObjectStore: objs, WriterID: writer, Logger: testLogger(t),
					RetentionInterval: time.Hour, Lifecycle: stream.LifecycleConfig{Interval: 10 * time.Millisecond, GenerationBytes: 4 << 10,
						GenerationMaxAge: 50 * time.Millisecond, GCInterval: time.Hour, GCGrace: 10 * time.Millisecond, OrphanGrace: 10 * time.Millisecond,
						LeaseTTL: 200 * time.Millisecond, LeaseSkew: 10 * time.Millisecond}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			c := open("b1")
			info, s := createWithSession(ctx, t, c, "cut", "")
			want := map[int64][]byte{}
			slowAppends(t, c, s, info.ID, 0, 10, want)
			waitFor(t, "indexed", func() bool {
				rs, err := stream.GenRanges(ctx, meta.Inner(), info.ID)
				return err == nil && len(rs) == 10
			})
			// Arm the cut: the next matching step loses its response.
			if tc.md != nil {
				meta.SetRules(*tc.md)
			}
			objs.SetEnabled(true)
			for i := 0; i < 60 && c.LifecycleStats().Merges+c.LifecycleStats().MergeFailures == 0; i++ {
				_, _ = c.CollectGarbage(ctx)
				time.Sleep(10 * time.Millisecond)
			}
			for i := 0; i < 10; i++ {
				_, _ = c.CollectGarbage(ctx)
				time.Sleep(10 * time.Millisecond)
			}
			fired := objs.Total().LostResponses + objs.Total().FailedClean
			for _, st := range meta.Stats() {
				fired += st.Lost + st.Failed
			}
			if fired == 0 {
				t.Fatalf("the cut never fired: the step it targets did not run (%+v)", c.LifecycleStats())
			}
			t.Logf("first broker: %+v", c.LifecycleStats())
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			meta.SetRules()
			objs.SetEnabled(false)

			// Takeover: the second broker finishes or rolls back.
			c2 := open("b2")
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				_, _ = c2.CollectGarbage(ctx)
				// Merges counts a publication before its sources are
				// retired: wait for the tiling too (the retirement runs in
				// the merge task, after the count).
				rs, err := stream.GenRanges(ctx, meta.Inner(), info.ID)
				if err == nil && isTiling(rs, 0, 50) && c.LifecycleStats().Merges+c2.LifecycleStats().Merges > 0 &&
					leaked(t, ctx, meta.Inner(), inner, info.ID) == 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if c.LifecycleStats().Merges+c2.LifecycleStats().Merges == 0 {
				t.Fatalf("no merge published: %+v / %+v", c.LifecycleStats(), c2.LifecycleStats())
			}
			if end := readAll(t, c2, info.ID, 0, want); end != 50 {
				t.Fatalf("read to %d", end)
			}
			tileCheck(t, meta.Inner(), info.ID, 0, 50)
			if n := leaked(t, ctx, meta.Inner(), inner, info.ID); n != 0 {
				t.Fatalf("%d generation objects neither a record nor the journal names", n)
			}
		})
	}
}

// leaked counts stream id's generation objects that neither a generation
// record nor the retire journal names.
func leaked(t *testing.T, ctx context.Context, meta metadata.Store, objects objectstore.ObjectStore, id stream.ID) int {
	t.Helper()
	named, err := stream.NamedGenObjects(ctx, meta, id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for oi, err := range objects.List(ctx, "gen/") {
		if err != nil {
			t.Fatal(err)
		}
		if !named[oi.Key] {
			n++
		}
	}
	return n
}
