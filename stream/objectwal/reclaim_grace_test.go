package objectwal_test

import (
	"context"
	"testing"
	"time"

	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/objectwal"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// TestReclaimGraceStartsAfterTheJudge: a segment's grace period starts at
// the clock reading taken after the judge call that found it retired, not
// at the pass's opts.Now — a trim that commits while the pass is between
// the two (here: the clock moves on inside the judge) still gets the whole
// grace. A pass at Now + grace keeps the segment; one at the judged
// reading + grace deletes it.
func TestReclaimGraceStartsAfterTheJudge(t *testing.T) {
	ctx := ctxT(t)
	objs := osmem.New()
	p, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/b1", FlushInterval: time.Millisecond, TruncateInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	done := make(chan error, 1)
	var tg provider.Target
	p.Write(provider.Run{Stream: 1, Epoch: 1, Token: 1, Commit: 1, Start: 0,
		Entries: []provider.Entry{{Payload: []byte("x"), RecordCount: 1}}}, func(t provider.Target, err error) { tg = t; done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p.Release(tg, true)

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
	opts := func(now time.Time, dueOnly bool) provider.ReclaimOptions {
		clock = now
		return provider.ReclaimOptions{Grace: grace, Now: now, Clock: func() time.Time { return clock }, DueOnly: dueOnly}
	}
	// The pass that first finds the segment retired (once the truncator,
	// on real time, has moved it out of the manifest).
	var rep provider.ReclaimReport
	for i := 0; ; i++ {
		if rep, err = p.Reclaim(ctx, judge, opts(t0, false)); err != nil {
			t.Fatal(err)
		}
		if rep.Units == 1 {
			break
		}
		if i == 2000 {
			t.Fatal("the segment was never retained")
		}
		time.Sleep(time.Millisecond)
	}
	advanceInJudge = false
	if want := t0.Add(gap + grace); rep.Deleted != 0 || !rep.NextDue.Equal(want) {
		t.Fatalf("first pass: %d deleted, next due %v, want 0 and %v (the grace from the judged reading, not from Now)", rep.Deleted, rep.NextDue, want)
	}
	if len(rep.Pending) != 1 || rep.Pending[0].Reason != "every run retired; grace period ends in 2s" {
		t.Fatalf("first pass pending %+v, want the grace ending 2s after the judge", rep.Pending)
	}
	// Now + grace: only grace − gap after the judge. Kept, by a full pass
	// and by a due pass.
	for _, due := range []bool{false, true} {
		if rep, err = p.Reclaim(ctx, judge, opts(t0.Add(grace), due)); err != nil || rep.Deleted != 0 {
			t.Fatalf("pass at Now + grace (due only %v): err %v, %d deleted, want 0", due, err, rep.Deleted)
		}
	}
	if n := countSegments(t, objs, "wal/b1/seg/"); n != 1 {
		t.Fatalf("%d segments before the grace ended, want 1", n)
	}
	if rep, err = p.Reclaim(ctx, judge, opts(t0.Add(gap+grace), true)); err != nil || rep.Deleted != 1 {
		t.Fatalf("due pass at the grace end: err %v, %d deleted, want 1", err, rep.Deleted)
	}
	if n := countSegments(t, objs, "wal/b1/seg/"); n != 0 {
		t.Fatalf("%d segments after the grace ended, want 0", n)
	}
}
