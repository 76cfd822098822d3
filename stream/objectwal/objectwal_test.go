package objectwal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/faultstore"
	mdmem "github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/objectstore"
	osfault "github.com/nereusstream/nereus-go/objectstore/faultstore"
	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
	"github.com/nereusstream/nereus-go/wal"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openCore(t *testing.T, ctx context.Context, os objectstore.ObjectStore, meta metadata.Store, writer string) (*stream.Core, *objectwal.Provider) {
	t.Helper()
	prov, err := objectwal.Open(ctx, objectwal.Config{Store: os, Prefix: "wal/" + writer, FlushInterval: 2 * time.Millisecond, TruncateInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: prov, WriterID: writer})
	if err != nil {
		t.Fatal(err)
	}
	return c, prov
}

func countSegments(t *testing.T, os objectstore.ObjectStore, prefix string) int {
	n := 0
	for info, err := range os.List(context.Background(), prefix) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info.Key, "/seg/") {
			n++
		}
	}
	return n
}

func TestManyStreamsShareSegmentsAndReadBack(t *testing.T) {
	ctx := ctxT(t)
	os, meta := osmem.New(), mdmem.New()
	c, _ := openCore(t, ctx, os, meta, "b1")
	defer c.Close()
	const streams, per = 30, 20
	var wg sync.WaitGroup
	ids := make([]stream.ID, streams)
	for i := 0; i < streams; i++ {
		info, err := c.Create(ctx, fmt.Sprint("s", i), stream.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = info.ID
		s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(i int, s stream.Session) {
			defer wg.Done()
			futs := make([]*stream.AppendFuture, per)
			for j := range futs {
				futs[j] = c.AppendAsync(s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{
					{Payload: []byte(fmt.Sprintf("%d/%d", i, j)), RecordCount: 2, Timestamp: int64(j)}}})
			}
			for j, f := range futs {
				if r, err := f.Wait(ctx); err != nil || r.Start != int64(2*j) {
					t.Errorf("append %d/%d: %+v %v", i, j, r, err)
				}
			}
		}(i, s)
	}
	wg.Wait()
	segs := countSegments(t, os, "wal/b1/seg/")
	if segs >= streams*per {
		t.Fatalf("%d segments for %d appends: flushes are not shared", segs, streams*per)
	}
	t.Logf("%d appends on %d streams -> %d segments", streams*per, streams, segs)
	// A second process has no tail cache: it reads every run by byte range.
	c2, _ := openCore(t, ctx, os, meta, "b2")
	defer c2.Close()
	for i, id := range ids {
		res, err := c2.Read(ctx, id, 5, stream.ReadOptions{MaxEntries: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Entries) != per-2 || res.Entries[0].Offset != 4 {
			t.Fatalf("stream %d: %d entries, first at %d", i, len(res.Entries), res.Entries[0].Offset)
		}
		for k, e := range res.Entries {
			if want := fmt.Sprintf("%d/%d", i, k+2); string(e.Payload) != want {
				t.Fatalf("stream %d entry %d = %q, want %q", i, k, e.Payload, want)
			}
		}
		off, err := c2.OffsetForTimestamp(ctx, id, 7)
		if err != nil || off != 14 {
			t.Fatalf("offset for timestamp 7 = %d, %v", off, err)
		}
	}
	if st := c2.Stats(); st.WALReads == 0 {
		t.Fatalf("second process served reads without the WAL: %+v", st)
	}
}

// TestCrashRecoverySettlesIntents: an incarnation is replaced while it is
// appending under metadata faults (lost responses). The next incarnation
// claims the log, settles every intent, truncates the manifest and deletes
// segments holding only uncommitted runs; every acknowledged append reads
// back at its offset, exactly once.
func TestCrashRecoverySettlesIntents(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			ctx := ctxT(t)
			os := osmem.New()
			meta := faultstore.Wrap(mdmem.New(), faultstore.Config{Seed: seed})
			c1, _ := openCore(t, ctx, os, meta, "b1")
			info, err := c1.Create(ctx, "crash", stream.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s1, err := c1.AcquireSession(ctx, info.ID, stream.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			meta.SetRules(faultstore.Rule{Kinds: faultstore.Batch | faultstore.Put | faultstore.Get, LoseRate: 0.1, FailRate: 0.05})
			acked := map[string]int64{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := 0; w < 3; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for j := 0; j < 60; j++ {
						p := fmt.Sprintf("w%d.%d", w, j)
						r, err := c1.Append(ctx, s1, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte(p), RecordCount: 1}}})
						if err == nil {
							mu.Lock()
							acked[p] = r.Start
							mu.Unlock()
						} else if errors.Is(err, stream.ErrFenced) || errors.Is(err, stream.ErrClosed) {
							return
						}
					}
				}(w)
			}
			time.Sleep(100 * time.Millisecond)
			// The next incarnation takes over while c1 is still running.
			c2, _ := openCore(t, ctx, os, meta, "b1")
			// Every intent of the first incarnation was settled and dropped.
			m, _, ok, err := wal.NewStore(os, "wal/b1/manifest").Load(ctx)
			if err != nil || !ok {
				t.Fatalf("manifest: %v %v", ok, err)
			}
			if m.Count() != 0 {
				t.Fatalf("%d manifest entries survived recovery", m.Count())
			}
			wg.Wait()
			meta.SetRules()
			_ = c1.Close()
			defer c2.Close()
			seen := map[string]int64{}
			from := int64(0)
			for {
				res, err := c2.Read(ctx, info.ID, from, stream.ReadOptions{MaxEntries: 1000})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range res.Entries {
					if _, dup := seen[string(e.Payload)]; dup {
						t.Fatalf("%s committed twice", e.Payload)
					}
					seen[string(e.Payload)] = e.Offset
				}
				if len(res.Entries) == 0 || res.Next >= res.EndOffset {
					break
				}
				from = res.Next
			}
			for p, off := range acked {
				if got, ok := seen[p]; !ok || got != off {
					t.Fatalf("acknowledged %s@%d reads back as %d (present %v)", p, off, got, ok)
				}
			}
			t.Logf("seed %d: %d acked, %d committed, faults %+v", seed, len(acked), len(seen), meta.Stats())
		})
	}
}

// TestResponseLossEverywhere injects "applied but the response was lost"
// and clean failures on every irreversible step of the Object WAL path —
// segment PUTs, manifest CASes (wal), head CASes, index puts and session
// CASes (metadata) — across several process restarts, and checks the
// invariants: recovery converges, no acknowledged append is lost, none is
// committed twice, offsets never move.
func TestResponseLossEverywhere(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			ctx := ctxT(t)
			os := osfault.New(osmem.New(), osfault.Config{Seed: seed, Rules: []osfault.Rule{
				{Ops: []osfault.Op{osfault.OpPut}, KeySubstring: "/seg/", Probability: 0.2, Kind: osfault.LoseResponse},
				{Ops: []osfault.Op{osfault.OpPut}, KeySubstring: "/manifest", Probability: 0.2, Kind: osfault.LoseResponse},
				{Ops: []osfault.Op{osfault.OpPut}, Probability: 0.1, Kind: osfault.FailClean},
				{Ops: []osfault.Op{osfault.OpGetRange, osfault.OpGet}, Probability: 0.02, Kind: osfault.FailClean},
			}})
			meta := faultstore.Wrap(mdmem.New(), faultstore.Config{Seed: seed, Rules: []faultstore.Rule{
				{Kinds: faultstore.Batch | faultstore.Put | faultstore.Get | faultstore.RangeScan, LoseRate: 0.05, FailRate: 0.03},
			}})
			acked := map[string]int64{}
			var id stream.ID
			for gen := 0; gen < 4; gen++ {
				var c *stream.Core
				for attempt := 0; ; attempt++ {
					prov, err := objectwal.Open(ctx, objectwal.Config{Store: os, Prefix: "wal/b1", FlushInterval: time.Millisecond, TruncateInterval: 10 * time.Millisecond})
					if err == nil {
						c, err = stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: prov, WriterID: "b1"})
						if err == nil {
							break
						}
						_ = prov.Close(ctx)
					}
					if attempt > 50 {
						t.Fatalf("generation %d never opened: %v", gen, err)
					}
				}
				var info stream.Info
				var err error
				for {
					if info, err = c.Create(ctx, "loss", stream.CreateOptions{}); err == nil || errors.Is(err, stream.ErrStreamExists) {
						break
					}
					if ctx.Err() != nil {
						t.Fatalf("create: %v", err)
					}
				}
				id = info.ID
				var sess stream.Session
				for {
					if sess, err = c.AcquireSession(ctx, id, stream.SessionOptions{}); err == nil {
						break
					}
					if ctx.Err() != nil {
						t.Fatalf("acquire: %v", err)
					}
				}
				futs := map[string]*stream.AppendFuture{}
				for j := 0; j < 40; j++ {
					p := fmt.Sprintf("g%d.%d", gen, j)
					futs[p] = c.AppendAsync(sess, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte(p), RecordCount: 1}}})
				}
				for p, f := range futs {
					if r, err := f.Wait(ctx); err == nil {
						acked[p] = r.Start
					}
				}
				// No graceful drain: the next generation takes over.
				go c.Close()
			}
			os.SetEnabled(false)
			meta.SetRules()
			prov, err := objectwal.Open(ctx, objectwal.Config{Store: os, Prefix: "wal/b1"})
			if err != nil {
				t.Fatal(err)
			}
			c, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: prov, WriterID: "b1"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			seen := map[string]int64{}
			for from := int64(0); ; {
				res, err := c.Read(ctx, id, from, stream.ReadOptions{MaxEntries: 1000})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range res.Entries {
					if _, dup := seen[string(e.Payload)]; dup {
						t.Fatalf("%s committed twice", e.Payload)
					}
					seen[string(e.Payload)] = e.Offset
				}
				if len(res.Entries) == 0 || res.Next >= res.EndOffset {
					break
				}
				from = res.Next
			}
			for p, off := range acked {
				if got, ok := seen[p]; !ok || got != off {
					t.Fatalf("acknowledged %s@%d reads back as %d (present %v)", p, off, got, ok)
				}
			}
			t.Logf("seed %d: %d acked of 160, %d committed; object faults %+v", seed, len(acked), len(seen), os.Total())
		})
	}
}

// TestRebuildIndexFromSegments deletes every offset-index entry of a stream
// whose history includes failed WAL writes (lost segment and manifest
// responses leave uncommitted runs in segments) and checks that
// RebuildIndex restores exactly the committed history from the segments.
func TestRebuildIndexFromSegments(t *testing.T) {
	ctx := ctxT(t)
	os := osfault.New(osmem.New(), osfault.Config{Seed: 7, Rules: []osfault.Rule{
		{Ops: []osfault.Op{osfault.OpPut}, KeySubstring: "/manifest", Probability: 0.3, Kind: osfault.LoseResponse},
	}})
	meta := mdmem.New()
	c, _ := openCore(t, ctx, os, meta, "b1")
	info, err := c.Create(ctx, "rebuild", stream.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 120; j++ {
		_, _ = c.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte(fmt.Sprint("p", j)), RecordCount: uint32(1 + j%3), Timestamp: int64(j)}}})
	}
	_ = c.Close()
	os.SetEnabled(false)
	readAll := func(c *stream.Core) []stream.ReadEntry {
		var out []stream.ReadEntry
		for from := int64(0); ; {
			res, err := c.Read(ctx, info.ID, from, stream.ReadOptions{MaxEntries: 1000})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.Entries...)
			if len(res.Entries) == 0 || res.Next >= res.EndOffset {
				return out
			}
			from = res.Next
		}
	}
	c2, _ := openCore(t, ctx, os, meta, "b2")
	defer c2.Close()
	want := readAll(c2)
	// Lose the whole index.
	recs, err := meta.RangeScan(ctx, "s/i/", "s/i/\xff", 0)
	if err != nil || len(recs) == 0 {
		t.Fatalf("index: %d entries, %v", len(recs), err)
	}
	for _, r := range recs {
		if err := meta.Delete(ctx, r.Key, metadata.AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	c3, _ := openCore(t, ctx, os, meta, "b3")
	defer c3.Close()
	rep, err := c3.RebuildIndex(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(c3)
	if len(got) != len(want) {
		t.Fatalf("after rebuild: %d entries, want %d (%+v)", len(got), len(want), rep)
	}
	for i := range want {
		if got[i].Offset != want[i].Offset || string(got[i].Payload) != string(want[i].Payload) {
			t.Fatalf("entry %d: got %q@%d, want %q@%d", i, got[i].Payload, got[i].Offset, want[i].Payload, want[i].Offset)
		}
	}
	t.Logf("rebuilt %d entries from %d scanned runs (%d gaps, %d pending republished); %d lost manifest responses",
		rep.Rebuilt, rep.Scanned, rep.Gaps, rep.Republished, os.Total().LostResponses)
}
