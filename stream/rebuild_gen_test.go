package stream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

// genRecords returns stream id's generation-index records.
func (e *lcEnv) genRecords(t *testing.T, id stream.ID) []metadata.Record {
	t.Helper()
	p := "s/g/" + id.String() + "/"
	recs, err := e.meta.RangeScan(context.Background(), p, p+"\xff", 0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestRebuildRestoresGenerationRecords loses generation-index records of a
// materialized stream whose WAL entries GC already retired, checks that a
// fresh process's GC does not take the now-unnamed objects for orphans, and
// that RebuildIndex restores the records from the objects: reads come back
// from generations with identical bytes, a second repair finds nothing to
// do, and GC still collects the restored generations after a trim.
func TestRebuildRestoresGenerationRecords(t *testing.T) {
	e := newLCEnv(t)
	c := e.open(t, "b1")
	ctx := ctxT(t)
	info, s := createWithSession(ctx, t, c, "regen", "b1")
	want := appendN(t, c, s, 0, 600)
	waitFor(t, "materialized and indexed", func() bool {
		in, err := c.Describe(ctx, info.ID)
		return err == nil && in.MaterializedThrough == 600 && len(e.genRecords(t, info.ID)) >= 3
	})
	// GC retires the WAL runs the generations serve. A pass may also start
	// a merge in the background, whose sources keep their records until
	// their grace has passed: settled means every generation object is
	// named by a record, nothing is journaled for retirement, and the
	// record count held over three passes in a row. (Snapshotting the
	// records mid-merge counted a retiring source's record as lost: 1 in
	// 17 runs under -race.)
	deadline := time.Now().Add(20 * time.Second)
	retirePrefix := "s/r/" + info.ID.String() + "/"
	for stable, lastRecs := 0, -1; stable < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("generations did not settle: %d objects, %d records", len(e.keys(t, "gen/")), len(e.genRecords(t, info.ID)))
		}
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		recs := len(e.genRecords(t, info.ID))
		journal, err := e.meta.RangeScan(ctx, retirePrefix, retirePrefix+"\xff", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.keys(t, "gen/")) == recs && recs == lastRecs && len(journal) == 0 {
			stable++
		} else {
			stable = 0
		}
		lastRecs = recs
		time.Sleep(2 * e.lc.GCGrace)
	}
	walPrefix := "s/i/" + info.ID.String() + "/"
	if wal, err := e.meta.RangeScan(ctx, walPrefix, walPrefix+"\xff", 0); err != nil || len(wal) != 0 {
		t.Fatalf("WAL index entries left below the materialized frontier: %d (%v)", len(wal), err)
	}
	readAll(t, c, info.ID, 0, want)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// Lose every generation record, then the middle one of the restored set.
	lost := e.genRecords(t, info.ID)
	for _, r := range lost {
		if err := e.meta.Delete(ctx, r.Key, r.Version); err != nil {
			t.Fatal(err)
		}
	}
	objects := len(e.keys(t, "gen/"))
	c2 := e.open(t, "b2")
	if _, err := c2.Read(ctx, info.ID, 0, stream.ReadOptions{}); err == nil {
		t.Fatal("read without generation records succeeded: the test does not exercise them")
	}
	// A new process sweeps orphans once; with the grace period long past,
	// the unnamed objects must still be kept (they hold live offsets).
	for i := 0; i < 3; i++ {
		time.Sleep(2 * e.lc.GCGrace)
		st, err := c2.CollectGarbage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			held := 0
			for _, p := range st.Pending {
				if strings.Contains(p.Reason, "rebuild-index") {
					held++
				}
			}
			if held == 0 {
				t.Fatalf("GC pending does not name the lost records: %+v", st.Pending)
			}
		}
	}
	if n := len(e.keys(t, "gen/")); n != objects {
		t.Fatalf("GC deleted generation objects whose records were lost: %d -> %d", objects, n)
	}
	rep, err := c2.RebuildIndex(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("repair: %+v", rep)
	if rep.GenRebuilt != len(lost) || rep.GenGaps != 1 {
		t.Fatalf("rebuilt %d generation records in %d gaps, lost %d", rep.GenRebuilt, rep.GenGaps, len(lost))
	}
	before := c2.Stats().GenerationReads
	if end := readAll(t, c2, info.ID, 0, want); end != 600 {
		t.Fatalf("read after repair to %d", end)
	}
	if c2.Stats().GenerationReads == before {
		t.Fatal("reads after repair did not come from generations")
	}
	if rep, err := c2.RebuildIndex(ctx, info.ID); err != nil || rep.GenRebuilt != 0 || rep.GenGaps != 0 {
		t.Fatalf("second repair: %+v %v", rep, err)
	}

	// One record in the middle.
	recs := e.genRecords(t, info.ID)
	mid := recs[len(recs)/2]
	if err := e.meta.Delete(ctx, mid.Key, mid.Version); err != nil {
		t.Fatal(err)
	}
	if rep, err := c2.RebuildIndex(ctx, info.ID); err != nil || rep.GenRebuilt != 1 {
		t.Fatalf("repair of one record: %+v %v", rep, err)
	}
	readAll(t, c2, info.ID, 0, want)

	// Restored records retire like any: trim, and GC deletes what lies below.
	if err := c2.Trim(ctx, info.ID, 590); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for len(e.keys(t, "gen/")) > 1 && time.Now().Before(deadline) {
		if _, err := c2.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * e.lc.GCGrace)
	}
	if left := e.keys(t, "gen/"); len(left) > 1 {
		t.Fatalf("generations left after trim: %v (pending %+v)", left, c2.GCStatus().Pending)
	}
	if end := readAll(t, c2, info.ID, 590, want); end != 600 {
		t.Fatalf("read after trim to %d", end)
	}
}
