package kcompact

import (
	"fmt"
	"testing"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/stream"
)

type rec struct {
	key, val string // val "" = tombstone
}

func batch(base int64, pid int64, txn bool, ts int64, rs ...rec) stream.ReadEntry {
	var krs []kbatch.Record
	for _, r := range rs {
		kr := kbatch.Record{Key: []byte(r.key)}
		if r.val != "" {
			kr.Value = []byte(r.val)
		}
		krs = append(krs, kr)
	}
	opts := kbatch.BuildOptions{BaseTimestamp: ts, ProducerID: -1, BaseSequence: -1}
	if txn {
		opts.ProducerID, opts.Attributes, opts.BaseSequence = pid, kbatch.AttrTransactional, 0
	}
	b := kbatch.Build(opts, krs) // base offset 0, as stored: the entry's offset is the truth
	return stream.ReadEntry{Offset: base, RecordCount: uint32(len(rs)), Timestamp: ts, Payload: b}
}

func marker(at, pid int64, commit bool) stream.ReadEntry {
	b := kbatch.BuildControl(pid, 0, commit, 0, 1)
	return stream.ReadEntry{Offset: at, RecordCount: 1, Timestamp: 1, Payload: b}
}

// view runs one pass over es (all dirty) and returns offset -> key=value.
func view(t *testing.T, opt Options, es ...stream.ReadEntry) (map[int64]string, int64) {
	t.Helper()
	c := New(opt)
	var scanned int64
	for _, e := range es {
		ok, err := c.Scan(e)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		scanned = e.Offset + int64(e.RecordCount)
	}
	cut := c.SafeEnd(scanned)
	out := map[int64]string{}
	for _, e := range es {
		if e.Offset >= cut {
			break
		}
		p, err := c.Rewrite(e, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) == 0 {
			continue
		}
		if err := kbatch.CheckCRC(p); err != nil {
			t.Fatalf("rewritten batch at %d: %v", e.Offset, err)
		}
		h, _ := kbatch.ParseHeader(p)
		h.BaseOffset = e.Offset
		if int64(h.LastOffsetDelta) != int64(e.RecordCount)-1 {
			t.Fatalf("rewritten batch at %d covers [%d, +%d]", e.Offset, h.BaseOffset, h.LastOffsetDelta)
		}
		if h.Attributes&kbatch.AttrControl != 0 {
			out[e.Offset] = "marker"
			continue
		}
		rs, err := records(p, h)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			v := "<nil>"
			if !r.tombstone {
				// value follows the key in raw; decode via records' view
				v = "v"
			}
			out[r.offset] = fmt.Sprintf("%s=%s", r.key, v)
		}
	}
	return out, cut
}

func TestLastPerKeyAndTransactions(t *testing.T) {
	es := []stream.ReadEntry{
		batch(0, 0, false, 10, rec{"a", "1"}, rec{"b", "1"}, rec{"a", "2"}),
		batch(3, 7, true, 10, rec{"a", "t"}, rec{"c", "t"}), // committed below
		batch(5, 8, true, 10, rec{"b", "x"}),                // aborted below
		marker(6, 7, true),
		marker(7, 8, false),
		batch(8, 0, false, 10, rec{"c", ""}), // tombstone for c
	}
	got, cut := view(t, Options{NowMs: 100, DeleteRetentionMs: 1000}, es...)
	if cut != 9 {
		t.Fatalf("cut %d", cut)
	}
	want := map[int64]string{1: "b=v", 3: "a=v", 6: "marker", 7: "marker", 8: "c=<nil>"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("view %v, want %v", got, want)
	}
	// Tombstones older than delete.retention.ms go.
	got, _ = view(t, Options{NowMs: 100, DeleteRetentionMs: 10}, es...)
	delete(want, 8)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("view %v, want %v", got, want)
	}
	// An open transaction stops the pass before its first batch.
	got, cut = view(t, Options{NowMs: 100, DeleteRetentionMs: 1000}, es[:3]...)
	if cut != 3 {
		t.Fatalf("cut with open transactions = %d (%v)", cut, got)
	}
	// A full key map stops the scan.
	_, cut = view(t, Options{NowMs: 100, DeleteRetentionMs: 1000, MaxKeys: 2}, es...)
	if cut != 3 {
		t.Fatalf("cut with a full map = %d", cut)
	}
}
