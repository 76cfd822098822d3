package kstore

import (
	"context"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

func txnBatch(pid int64, seq int32, n int) []byte {
	recs := make([]kbatch.Record, n)
	for i := range recs {
		recs[i].Value = []byte("v")
	}
	return kbatch.Build(kbatch.BuildOptions{ProducerID: pid, BaseSequence: seq, Attributes: kbatch.AttrTransactional}, recs)
}

func plainBatch(n int) []byte {
	recs := make([]kbatch.Record, n)
	return kbatch.Build(kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1}, recs)
}

func appendBatch(t *testing.T, s *Store, p *Partition, b []byte, txn bool, pid int64) int64 {
	t.Helper()
	ctx := context.Background()
	h, _ := kbatch.ParseHeader(b)
	build := func(int32) stream.AppendRequest {
		return stream.AppendRequest{Entries: []stream.Entry{{Payload: b, RecordCount: uint32(h.NumRecords)}}, ExpectedStart: -1}
	}
	var app *Appending
	var err error
	if txn {
		app, err = s.AppendTransactional(ctx, p, pid, 0, func() error { return nil }, build)
	} else {
		app, err = s.AppendAsync(ctx, p, build)
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := app.Settle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res.Start
}

// TestTxnIndexLSOAndAborted: open transactions hold the last stable offset
// at their first offset; markers close them; aborted ranges are listed for
// the fetch ranges they overlap; a second store over the same storage (a
// restart, with and without a checkpoint written) rebuilds the same state.
func TestTxnIndexLSOAndAborted(t *testing.T) {
	for _, flush := range []bool{false, true} {
		ctx := context.Background()
		streams, meta := streammem.New(), memstore.New()
		s := newStore(t, streams, meta, "b1", nil)
		if _, err := s.CreateTopic(ctx, "tx", 1, nil, false); err != nil {
			t.Fatal(err)
		}
		_, p, _ := s.Partition(ctx, "tx", 0)
		lso := func(s *Store) int64 {
			_, end, _ := s.Bounds(ctx, p)
			l, err := s.StableOffset(ctx, p, end)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		appendBatch(t, s, p, plainBatch(2), false, -1)             // 0-1
		a0 := appendBatch(t, s, p, txnBatch(100, 0, 3), true, 100) // 2-4, pid 100
		if a0 != 2 || lso(s) != 2 {
			t.Fatalf("first txn at %d, lso %d", a0, lso(s))
		}
		appendBatch(t, s, p, txnBatch(200, 0, 2), true, 200) // 5-6, pid 200
		appendBatch(t, s, p, plainBatch(1), false, -1)       // 7
		if m, err := s.AppendMarker(ctx, p, 100, 0, false, 0); err != nil || m != 8 {
			t.Fatalf("abort marker at %d: %v", m, err) // 8
		}
		if lso(s) != 5 {
			t.Fatalf("lso after abort of 100: %d, want 5", lso(s))
		}
		if _, err := s.AppendMarker(ctx, p, 200, 0, true, 0); err != nil { // 9
			t.Fatal(err)
		}
		if _, err := s.AppendMarker(ctx, p, 200, 0, true, 0); err != nil { // 10: repeated marker, no-op
			t.Fatal(err)
		}
		appendBatch(t, s, p, txnBatch(100, 3, 1), true, 100) // 11: pid 100 again, open
		if lso(s) != 11 {
			t.Fatalf("lso %d, want 11", lso(s))
		}
		check := func(s *Store, what string) {
			t.Helper()
			if l := lso(s); l != 11 {
				t.Fatalf("%s: lso %d, want 11", what, l)
			}
			ab, err := s.AbortedTxns(ctx, p, 0, 12)
			if err != nil || len(ab) != 1 || ab[0] != (AbortedTxn{ProducerID: 100, First: 2, Last: 8}) {
				t.Fatalf("%s: aborted %+v %v", what, ab, err)
			}
			if ab, _ := s.AbortedTxns(ctx, p, 9, 12); len(ab) != 0 {
				t.Fatalf("%s: aborted after its marker: %+v", what, ab)
			}
			if ab, _ := s.AbortedTxns(ctx, p, 0, 2); len(ab) != 0 {
				t.Fatalf("%s: aborted before its first offset: %+v", what, ab)
			}
			open, _ := s.OpenTxns(ctx, p)
			if len(open) != 1 || open[0].ProducerID != 100 || open[0].First != 11 {
				t.Fatalf("%s: open %+v", what, open)
			}
		}
		check(s, "live")
		if flush {
			if err := s.flushTxnIndex(ctx, s.txnIndexFor(p.StreamID)); err != nil {
				t.Fatal(err)
			}
		}
		// Restart: a new store over the same streams and metadata.
		_ = s.Close(ctx)
		s2 := newStore(t, streams, meta, "b1", nil)
		_, p2, _ := s2.Partition(ctx, "tx", 0)
		p = p2
		check(s2, map[bool]string{false: "rescan from the first checkpoint", true: "from a flushed checkpoint"}[flush])
		if _, err := s2.AppendMarker(ctx, p, 100, 0, true, 0); err != nil {
			t.Fatal(err)
		}
		if l := lso(s2); l != 13 {
			t.Fatalf("lso after the last commit: %d, want 13", l)
		}
	}
}

// TestTxnIndexUntouchedPartition: a partition that never had a
// transactional batch has no checkpoint record and LSO = HWM.
func TestTxnIndexUntouchedPartition(t *testing.T) {
	ctx := context.Background()
	streams, meta := streammem.New(), memstore.New()
	s := newStore(t, streams, meta, "b1", func() time.Time { return time.Unix(1000, 0) })
	if _, err := s.CreateTopic(ctx, "plain", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	_, p, _ := s.Partition(ctx, "plain", 0)
	appendBatch(t, s, p, plainBatch(4), false, -1)
	if l, err := s.StableOffset(ctx, p, 4); err != nil || l != 4 {
		t.Fatalf("lso %d %v", l, err)
	}
	if _, err := meta.Get(ctx, txnCheckpointKey(p.StreamID)); err == nil {
		t.Fatal("checkpoint record written for a partition without transactions")
	}
}
