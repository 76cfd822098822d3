package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	mdfault "github.com/nereusstream/nereus-go/metadata/faultstore"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// noopPolicy wants no pass: registering it makes the retention pass look
// at the stream's view (finishing a covering view's trim).
type noopPolicy struct{}

func (noopPolicy) PlanCompaction(context.Context, stream.Info, stream.ViewInfo) (int64, stream.Compactor, error) {
	return 0, nil, nil
}

// TestCoveringViewCuts: a covering pass whose view publication loses its
// answer settles it by reading the record back and trims; one whose trim
// (the head CAS after publication) fails still published a view that
// serves everything from 0, and the next retention pass finishes the trim.
// Either way ReadView from 0 is the last record per key, and after GC the
// lossless stream starts at the cleaned point.
func TestCoveringViewCuts(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule mdfault.Rule
	}{
		{"publication answer lost", mdfault.Rule{Kinds: mdfault.Put, Prefix: "s/v/", LoseRate: 1, Limit: 1}},
		{"trim fails", mdfault.Rule{Kinds: mdfault.Batch | mdfault.Put, Prefix: "s/h/", FailRate: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			meta := mdfault.Wrap(memstore.New(), mdfault.Config{Seed: 1})
			objs := objmem.New()
			w, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/b1", FlushInterval: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			c, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: w, ObjectStore: objs, WriterID: "b1", Logger: testLogger(t),
				RetentionInterval: 20 * time.Millisecond, Lifecycle: stream.LifecycleConfig{Interval: 10 * time.Millisecond, GenerationBytes: 2 << 10,
					GenerationMaxAge: 100 * time.Millisecond, GCInterval: time.Hour, GCGrace: 10 * time.Millisecond, OrphanGrace: 10 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			info, s := createWithSession(ctx, t, c, "view-cut", "")
			const kind = "test-compact"
			last := map[string]string{}
			var end int64
			for i := 0; i < 60; i++ {
				v := fmt.Sprint("v", i)
				r := kvRec{K: fmt.Sprint("k", i%5), V: &v}
				p, _ := json.Marshal([]kvRec{r})
				res, err := c.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: p, RecordCount: 1, Timestamp: 1}}})
				if err != nil {
					t.Fatal(err)
				}
				last[r.K], end = v, res.End
			}
			waitFor(t, "materialization", func() bool {
				in, err := c.Describe(ctx, info.ID)
				return err == nil && in.MaterializedThrough == in.EndOffset
			})
			meta.SetRules(tc.rule)
			// A failing head CAS is retried by the owner until the pass's
			// context ends: that is the crash between publication and trim.
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := c.Compact(pctx, info.ID, kind, end, &kvCompactor{latest: map[string]int64{}, maxKeys: 10, replaces: true})
			pcancel()
			if err != nil || !st.Published || !st.View.Covers {
				t.Fatalf("pass: %+v %v", st, err)
			}
			var fired int64
			for _, s := range meta.Stats() {
				fired += s.Lost + s.Failed
			}
			if fired == 0 {
				t.Fatal("the cut never fired")
			}
			check := func() {
				t.Helper()
				got := readKV(t, ctx, func(from int64) (stream.ReadResult, error) {
					return c.ReadView(ctx, info.ID, kind, from, stream.ReadOptions{})
				}, 0, end)
				if len(got) != len(last) {
					t.Fatalf("view holds %d records, want %d", len(got), len(last))
				}
				for _, r := range got {
					if *r.V != last[r.K] {
						t.Fatalf("key %s: %s, want %s", r.K, *r.V, last[r.K])
					}
				}
			}
			check()
			if in, err := c.Describe(ctx, info.ID); err != nil || tc.rule.FailRate > 0 && in.StartOffset != 0 {
				t.Fatalf("after the failed trim the lossless start is %d (%v), want 0", in.StartOffset, err)
			}
			meta.SetRules()
			c.RegisterCompactionPolicy(kind, func(in stream.Info) bool { return in.ID == info.ID }, noopPolicy{})
			waitFor(t, "the trim to the cleaned point", func() bool {
				in, err := c.Describe(ctx, info.ID)
				return err == nil && in.StartOffset == st.View.Through
			})
			time.Sleep(20 * time.Millisecond) // past the GC grace
			for i := 0; i < 3; i++ {
				if _, err := c.CollectGarbage(ctx); err != nil {
					t.Fatal(err)
				}
			}
			check()
		})
	}
}
