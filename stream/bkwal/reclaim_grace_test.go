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

// TestReclaimDuePassDeletesAtTheGraceEnd: a full pass that finds a settled
// ledger retired reports its grace end as NextDue; a due pass (DueOnly)
// before it deletes nothing, one at it judges the ledger again and deletes
// it only while the verdict is still retired — a due pass whose judge
// calls it needed keeps it and forgets its grace clock.
func TestReclaimDuePassDeletesAtTheGraceEnd(t *testing.T) {
	f := newFixture(t, 3, nil)
	c, p, _ := f.lifecycleCore(t, "b1", testLC()) // GC interval 1 h: the test runs the passes
	ctx := ctxT(t)
	_, s := bkStream(t, c, "due")
	appendBatches(t, c, s, 60) // the first ledger rolls over at 50 and settles

	const grace = 2 * time.Second
	t0 := time.Unix(1_700_000_000, 0)
	verdict := provider.RunRetired
	judged := 0
	judge := func(_ context.Context, runs []provider.RunRef) ([]provider.Verdict, error) {
		judged += len(runs)
		out := make([]provider.Verdict, len(runs))
		for i := range out {
			out[i] = verdict
		}
		return out, nil
	}
	full := func(now time.Time) provider.ReclaimOptions {
		return provider.ReclaimOptions{Grace: grace, Now: now, Clock: func() time.Time { return now }}
	}
	due := func(now time.Time) provider.ReclaimOptions {
		o := full(now)
		o.DueOnly = true
		return o
	}
	var rep provider.ReclaimReport
	var err error
	for i := 0; ; i++ { // finalization (SETTLED) is asynchronous
		if rep, err = p.Reclaim(ctx, judge, full(t0)); err != nil {
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
	if !rep.NextDue.Equal(t0.Add(grace)) {
		t.Fatalf("full pass: NextDue %v, want the grace end %v", rep.NextDue, t0.Add(grace))
	}
	judged = 0
	if rep, err = p.Reclaim(ctx, judge, due(t0.Add(grace-time.Millisecond))); err != nil || rep.Deleted != 0 || judged != 0 {
		t.Fatalf("due pass before the grace end: err %v, %d deleted, %d runs judged; want nothing done", err, rep.Deleted, judged)
	}
	// Due, but the judge now needs it (a protection appeared): kept, and
	// its grace restarts from the next retired verdict.
	verdict = provider.RunNeeded
	if rep, err = p.Reclaim(ctx, judge, due(t0.Add(grace))); err != nil || rep.Deleted != 0 || judged != 1 || !rep.NextDue.IsZero() {
		t.Fatalf("due pass, run needed: err %v, %d deleted, %d runs judged, NextDue %v; want it judged and kept, nothing due", err, rep.Deleted, judged, rep.NextDue)
	}
	verdict = provider.RunRetired
	t1 := t0.Add(5 * time.Second)
	if rep, err = p.Reclaim(ctx, judge, full(t1)); err != nil || rep.Deleted != 0 || !rep.NextDue.Equal(t1.Add(grace)) {
		t.Fatalf("full pass after: err %v, %d deleted, NextDue %v; want kept until %v", err, rep.Deleted, rep.NextDue, t1.Add(grace))
	}
	before := ledgerCount(t, p)
	if rep, err = p.Reclaim(ctx, judge, due(t1.Add(grace))); err != nil || rep.Deleted != 1 || !rep.NextDue.IsZero() {
		t.Fatalf("due pass at the grace end: err %v, %d deleted, NextDue %v; want 1 deleted, nothing due", err, rep.Deleted, rep.NextDue)
	}
	if n := ledgerCount(t, p); n != before-1 {
		t.Fatalf("%d ledgers after the due pass, want %d", n, before-1)
	}
}
