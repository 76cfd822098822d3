package objectwal_test

import (
	"context"
	"testing"
	"time"

	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/objectwal"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// TestReclaimDueOnly: a full pass that finds a segment retired reports
// when its grace period ends (NextDue); a DueOnly pass before then judges
// nothing and deletes nothing, one at that moment judges that segment
// again — and only it — and deletes it if it is still retired; a segment
// whose verdict turned "needed" in between is kept and its grace restarts.
func TestReclaimDueOnly(t *testing.T) {
	ctx := ctxT(t)
	objs := osmem.New()
	p, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/b1", FlushInterval: time.Millisecond, TruncateInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	// Three runs of three streams, each in its own segment (written one
	// after another), released as committed.
	for s := uint64(1); s <= 3; s++ {
		done := make(chan error, 1)
		var tg provider.Target
		p.Write(provider.Run{Stream: s, Epoch: 1, Token: 1, Commit: 1, Start: 0,
			Entries: []provider.Entry{{Payload: []byte("x"), RecordCount: 1}}}, func(t provider.Target, err error) { tg = t; done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		p.Release(tg, true)
	}
	retired := map[uint64]bool{1: true, 2: true} // stream 3's run is still needed
	var judged []uint64
	judge := func(_ context.Context, runs []provider.RunRef) ([]provider.Verdict, error) {
		out := make([]provider.Verdict, len(runs))
		for i, r := range runs {
			judged = append(judged, r.Stream)
			out[i] = provider.RunNeeded
			if retired[r.Stream] {
				out[i] = provider.RunRetired
			}
		}
		return out, nil
	}
	const grace = 2 * time.Second
	t0 := time.Unix(1_700_000_000, 0)
	// A full pass once the truncator has moved all three out of the
	// manifest (it runs on real time).
	var rep provider.ReclaimReport
	for i := 0; ; i++ {
		if rep, err = p.Reclaim(ctx, judge, provider.ReclaimOptions{Grace: grace, Now: t0}); err != nil {
			t.Fatal(err)
		}
		if rep.Units == 3 {
			break
		}
		if i == 2000 {
			t.Fatalf("%d of 3 segments retained", rep.Units)
		}
		time.Sleep(time.Millisecond)
	}
	if !rep.NextDue.Equal(t0.Add(grace)) || rep.Deleted != 0 {
		t.Fatalf("full pass: next due %v (want %v), %d deleted", rep.NextDue, t0.Add(grace), rep.Deleted)
	}
	segs := countSegments(t, objs, "wal/b1/")
	if segs != 3 {
		t.Fatalf("%d segments, want 3", segs)
	}

	judged = nil
	rep, err = p.Reclaim(ctx, judge, provider.ReclaimOptions{Grace: grace, Now: t0.Add(grace - time.Millisecond), DueOnly: true})
	if err != nil || len(judged) != 0 || rep.Deleted != 0 || !rep.NextDue.Equal(t0.Add(grace)) {
		t.Fatalf("due pass before the grace end: err %v, judged %v, %d deleted, next due %v", err, judged, rep.Deleted, rep.NextDue)
	}

	// Stream 2's run is needed again (say a protection appeared): the due
	// pass keeps it and restarts its grace; stream 1's segment goes.
	retired[2] = false
	judged = nil
	rep, err = p.Reclaim(ctx, judge, provider.ReclaimOptions{Grace: grace, Now: t0.Add(grace), DueOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(judged) != 2 || rep.Deleted != 1 || !rep.NextDue.IsZero() {
		t.Fatalf("due pass at the grace end: judged streams %v (want 1 and 2), %d deleted (want 1), next due %v (want none)", judged, rep.Deleted, rep.NextDue)
	}
	if n := countSegments(t, objs, "wal/b1/"); n != 2 {
		t.Fatalf("%d segments after the due pass, want 2", n)
	}

	// Retired again later: a full pass starts a new grace period for it.
	retired[2] = true
	t1 := t0.Add(10 * time.Second)
	if rep, err = p.Reclaim(ctx, judge, provider.ReclaimOptions{Grace: grace, Now: t1}); err != nil || rep.Deleted != 0 || !rep.NextDue.Equal(t1.Add(grace)) {
		t.Fatalf("full pass: err %v, %d deleted, next due %v (want %v)", err, rep.Deleted, rep.NextDue, t1.Add(grace))
	}
	if rep, err = p.Reclaim(ctx, judge, provider.ReclaimOptions{Grace: grace, Now: t1.Add(grace), DueOnly: true}); err != nil || rep.Deleted != 1 {
		t.Fatalf("due pass: err %v, %d deleted, want 1", err, rep.Deleted)
	}
	if n := countSegments(t, objs, "wal/b1/"); n != 1 {
		t.Fatalf("%d segments left, want 1 (stream 3's)", n)
	}
}
