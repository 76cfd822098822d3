package stream

import (
	"context"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/faultstore"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// TestSettleAfterTakeoverNeverGuessesFromAFailedIndexLookup is the
// regression test for the settle path of a fenced owner: b1's head CAS for
// "x" applies but its response is lost; before b1 can re-read, b2 takes the
// stream over, publishes x's index entry and drops it from the head's
// Pending list. b1's settle read then finds a foreign session and must look
// x up in the offset index — and that lookup fails. A failed lookup is no
// proof either way: x must stay unsettled (neither acknowledged nor fenced,
// its WAL target kept) and be settled by a later re-read, which proves it
// committed.
func TestSettleAfterTakeoverNeverGuessesFromAFailedIndexLookup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inner := memstore.New()
	prov := memprovider.New(1, memprovider.Faults{})
	fs1 := faultstore.Wrap(inner, faultstore.Config{Seed: 1})
	c1, err := Open(ctx, Config{Metadata: fs1, ObjectWAL: prov, WriterID: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	info, err := c1.Create(ctx, "settle", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := c1.AcquireSession(ctx, info.ID, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// b1's first head batch applies and loses its response; every later
	// head batch of b1 (the settle reads) fails until b2 is done.
	fs1.SetRules(
		faultstore.Rule{Kinds: faultstore.Batch, Prefix: headKeyPrefix, LoseRate: 1, Limit: 1},
		faultstore.Rule{Kinds: faultstore.Batch, Prefix: headKeyPrefix, FailRate: 1, Skip: 1},
	)
	fx := c1.AppendAsync(s1, AppendRequest{Entries: []Entry{{Payload: []byte("x"), RecordCount: 1}}, ExpectedStart: -1})
	waitFor(t, ctx, "b1's head CAS to be lost", func() bool { return fs1.Stats()[faultstore.Batch].Lost == 1 })

	// b2 takes over (a higher authority epoch fences a live session) and
	// commits until x has left Pending for the offset index.
	c2, err := Open(ctx, Config{Metadata: inner, ObjectWAL: prov, WriterID: "b2"})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	s2, err := c2.AcquireSession(ctx, info.ID, SessionOptions{AuthorityEpoch: 7})
	if err != nil {
		t.Fatal(err)
	}
	xID := runID{Epoch: s1.Epoch, Token: s1.Token, Commit: 1}
	waitFor(t, ctx, "x to move from Pending to the index", func() bool {
		if _, err := c2.Append(ctx, s2, AppendRequest{Entries: []Entry{{Payload: []byte("y"), RecordCount: 1}}, ExpectedStart: -1}); err != nil {
			t.Fatalf("b2 append: %v", err)
		}
		h, _, err := c2.readHead(ctx, info.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range h.Pending {
			if d.contains(xID) {
				return false
			}
		}
		return h.IndexedThrough >= 1
	})

	// Now b1 can read the head, but not the index.
	fs1.SetRules(faultstore.Rule{Kinds: faultstore.RangeScan, Prefix: indexKeyPrefix, FailRate: 1})
	waitFor(t, ctx, "b1 to retry its failed index lookup", func() bool {
		select {
		case <-fx.Done():
			r, err := fx.Wait(ctx)
			t.Fatalf("x resolved from a failed index lookup: %+v, %v (certainty %v)", r, err, CommitCertainty(err))
		default:
		}
		return fs1.Stats()[faultstore.RangeScan].Failed >= 3
	})
	if n := prov.Released(); n != 0 {
		t.Fatalf("%d WAL targets released as not committed while x was unsettled", n)
	}

	// The index answers again: the re-read proves x committed.
	fs1.SetRules()
	r, err := fx.Wait(ctx)
	if err != nil || r.Start != 0 || r.End != 1 {
		t.Fatalf("x: %+v, %v; want committed at [0, 1)", r, err)
	}
	if n := prov.Released(); n != 0 {
		t.Fatalf("%d WAL targets released as not committed", n)
	}
	res, err := c2.Read(ctx, info.ID, 0, ReadOptions{MaxEntries: 1})
	if err != nil || len(res.Entries) != 1 || string(res.Entries[0].Payload) != "x" {
		t.Fatalf("read offset 0: %+v, %v", res, err)
	}
	// b1 is fenced for anything after x.
	if _, err := c1.Append(ctx, s1, AppendRequest{Entries: []Entry{{Payload: []byte("z"), RecordCount: 1}}, ExpectedStart: -1}); CommitCertainty(err) != NotCommitted {
		t.Fatalf("append on the fenced session: %v", err)
	}
}

// waitFor polls cond until it holds or ctx ends (then the test fails).
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
