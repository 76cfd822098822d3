package bkwal_test

import (
	"context"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// TestReclaimGraceStartsAfterTheJudge: a settled ledger's grace period
// starts at the clock reading taken after the judge call that found it
// retired, not at the pass's opts.Now — a trim that commits while the pass
// is between the two (here: the clock moves on inside the judge) still
// gets the whole grace. A pass at Now + grace keeps the ledger; one at the
// judged reading + grace deletes it.
func TestReclaimGraceStartsAfterTheJudge(t *testing.T) {
	f := newFixture(t, 3, nil)
	c, p, _ := f.lifecycleCore(t, "b1", testLC()) // GC interval 1 h: the test runs the passes
	ctx := ctxT(t)
	_, s := bkStream(t, c, "grace")
	// 60 entries: the first ledger rolls over at 50 and settles; the
	// second stays open (idle seal: 30 s). No trim: the core would kick a
	// GC pass of its own (on its own clock); the test's judge plays the
	// core and calls the runs retired.
	appendBatches(t, c, s, 60)

	const grace, gap = 2 * time.Second, 500 * time.Millisecond
	t0 := time.Unix(1_700_000_000, 0)
	clock := t0
	advanceInJudge := true
	judge := func(_ context.Context, runs []provider.RunRef) ([]provider.Verdict, error) {
		if advanceInJudge {
			clock = t0.Add(gap) // the judge's reads take a while
		}
		out := make([]provider.Verdict, len(runs))
		for i := range out {
			out[i] = provider.RunRetired
		}
		return out, nil
	}
	opts := func(now time.Time) provider.ReclaimOptions {
		clock = now
		return provider.ReclaimOptions{Grace: grace, Now: now, Clock: func() time.Time { return clock }}
	}
	var rep provider.ReclaimReport
	var err error
	for i := 0; ; i++ { // finalization (SETTLED) is asynchronous
		if rep, err = p.Reclaim(ctx, judge, opts(t0)); err != nil {
			t.Fatal(err)
		}
		if rep.Units == 1 {
			break
		}
		if i == 2000 {
			t.Fatalf("%d settled ledgers, want 1", rep.Units)
		}
		time.Sleep(time.Millisecond)
	}
	advanceInJudge = false
	if rep.Deleted != 0 || len(rep.Pending) != 1 || rep.Pending[0].Reason != "retired; grace period ends in 2s" {
		t.Fatalf("first pass: %d deleted, pending %+v; want the grace ending 2s after the judge", rep.Deleted, rep.Pending)
	}
	// Now + grace is only grace − gap after the judge: kept.
	if rep, err = p.Reclaim(ctx, judge, opts(t0.Add(grace))); err != nil || rep.Deleted != 0 {
		t.Fatalf("pass at Now + grace: err %v, %d deleted, want 0", err, rep.Deleted)
	}
	before := ledgerCount(t, p)
	if rep, err = p.Reclaim(ctx, judge, opts(t0.Add(gap+grace))); err != nil || rep.Deleted != 1 {
		t.Fatalf("pass at the grace end: err %v, %d deleted, want 1; pending %+v", err, rep.Deleted, rep.Pending)
	}
	if n := ledgerCount(t, p); n != before-1 {
		t.Fatalf("%d ledgers after the grace ended, want %d", n, before-1)
	}
}
