package stream_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	mdfault "github.com/nereusstream/nereus-go/metadata/faultstore"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	objfault "github.com/nereusstream/nereus-go/objectstore/faultstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// TestLifecycleResponseLossCuts loses the response of each irreversible
// step of materialization, publication and GC once (the step applied, the
// caller cannot know), then checks that the lifecycle converges: every
// untrimmed offset reads back identical and no generation object is left
// that neither a record nor the retire journal names.
func TestLifecycleResponseLossCuts(t *testing.T) {
	cases := []struct {
		name string
		md   *mdfault.Rule
		obj  *objfault.Rule
	}{
		{name: "generation PUT", obj: &objfault.Rule{Ops: []objfault.Op{objfault.OpPut}, KeySubstring: "gen/", Probability: 1, Kind: objfault.LoseResponse, Limit: 1}},
		{name: "publication head CAS", md: &mdfault.Rule{Kinds: mdfault.Batch | mdfault.Put, Prefix: "s/h/", LoseRate: 1, Limit: 2}},
		{name: "generation index put", md: &mdfault.Rule{Kinds: mdfault.Batch | mdfault.Put, Prefix: "s/g/", LoseRate: 1, Limit: 1}},
		{name: "WAL index unpublish", md: &mdfault.Rule{Kinds: mdfault.Batch | mdfault.Delete, Prefix: "s/i/", LoseRate: 1, Limit: 1}},
		{name: "retire journal put", md: &mdfault.Rule{Kinds: mdfault.Put, Prefix: "s/r/", LoseRate: 1, Limit: 1}},
		{name: "generation DELETE", obj: &objfault.Rule{Ops: []objfault.Op{objfault.OpDelete}, KeySubstring: "gen/", Probability: 1, Kind: objfault.LoseResponse, Limit: 1}},
		{name: "segment DELETE", obj: &objfault.Rule{Ops: []objfault.Op{objfault.OpDelete}, KeySubstring: "/seg/", Probability: 1, Kind: objfault.LoseResponse, Limit: 1}},
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
			w, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/b1", FlushInterval: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			c, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: w, ObjectStore: objs, WriterID: "b1", Logger: testLogger(t),
				RetentionInterval: time.Hour, Lifecycle: stream.LifecycleConfig{Interval: 10 * time.Millisecond, GenerationBytes: 2 << 10,
					GenerationMaxAge: 300 * time.Millisecond, GCInterval: time.Hour, GCGrace: 10 * time.Millisecond, OrphanGrace: 10 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			info, s := createWithSession(ctx, t, c, "cut", "")
			want := appendN(t, c, s, 0, 400)
			// Arm the cut now: the next matching step loses its response.
			if tc.md != nil {
				meta.SetRules(*tc.md)
			}
			objs.SetEnabled(true)
			waitFor(t, "materialization", func() bool {
				in, err := c.Describe(ctx, info.ID)
				return err == nil && in.MaterializedThrough == in.EndOffset
			})
			if err := c.Trim(ctx, info.ID, 200); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 40; i++ {
				_, _ = c.CollectGarbage(ctx)
				time.Sleep(15 * time.Millisecond)
			}
			fired := objs.Total().LostResponses
			for _, st := range meta.Stats() {
				fired += st.Lost
			}
			if fired == 0 {
				t.Fatalf("the cut never fired: the step it targets did not run")
			}
			meta.SetRules()
			objs.SetEnabled(false)
			for i := 0; i < 20; i++ {
				_, _ = c.CollectGarbage(ctx)
				time.Sleep(15 * time.Millisecond)
			}
			if end := readAll(t, c, info.ID, 200, want); end != 400 {
				t.Fatalf("read to %d", end)
			}
			recs, err := meta.Inner().RangeScan(ctx, "s/g/", "s/g/\xff", 0)
			if err != nil {
				t.Fatal(err)
			}
			// Every object under gen/ is named by a record or still on its
			// way out (journaled): nothing leaks.
			journal, err := meta.Inner().RangeScan(ctx, "s/r/", "s/r/\xff", 0)
			if err != nil {
				t.Fatal(err)
			}
			var objects []string
			for oi, err := range inner.List(ctx, "gen/") {
				if err != nil {
					t.Fatal(err)
				}
				objects = append(objects, oi.Key)
			}
			if len(objects) > len(recs)+len(journal)+1 {
				t.Fatalf("%d generation objects for %d records and %d journaled: leaked %v", len(objects), len(recs), len(journal), objects)
			}
			// Content check of what is left: the WAL and generations agree.
			res, err := c.Read(ctx, info.ID, 390, stream.ReadOptions{})
			if err != nil || len(res.Entries) == 0 || !bytes.Equal(res.Entries[0].Payload, want[390]) {
				t.Fatalf("tail read: %v", err)
			}
		})
	}
}
