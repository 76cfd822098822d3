package kcompact

import (
	"encoding/binary"
	"fmt"
	"strings"
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
	// A first pass keeps tombstones whatever their batch timestamp (their
	// delete horizon starts now).
	got, _ = view(t, Options{NowMs: 100, DeleteRetentionMs: 10}, es...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("view %v, want %v", got, want)
	}
	// The partition's last batch is never compacted (Kafka's active
	// segment holds it).
	if _, cut := view(t, Options{NowMs: 100, DeleteRetentionMs: 1000, LogEnd: 9}, es...); cut != 8 {
		t.Fatalf("cut with the log ending at 9 = %d, want 8 (before the last batch)", cut)
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

// pass runs one pass: clean entries (the old view) then dirty ones, and
// returns the new view's entries and the compactor.
func pass(t *testing.T, opt Options, clean, dirty []stream.ReadEntry) ([]stream.ReadEntry, *Compactor) {
	t.Helper()
	c := New(opt)
	for _, e := range dirty {
		if ok, err := c.Scan(e); err != nil || !ok {
			t.Fatalf("scan at %d: %v %v", e.Offset, ok, err)
		}
	}
	var out []stream.ReadEntry
	for i, e := range append(append([]stream.ReadEntry(nil), clean...), dirty...) {
		p, err := c.Rewrite(e, i >= len(clean))
		if err != nil {
			t.Fatal(err)
		}
		if len(p) == 0 {
			continue
		}
		if err := kbatch.CheckCRC(p); err != nil {
			t.Fatalf("rewritten batch at %d: %v", e.Offset, err)
		}
		e.Payload = p
		out = append(out, e)
	}
	return out, c
}

// describe lists entries as offset:what (key=ts for records, "marker"),
// with an "h" when the batch carries a delete horizon.
func describe(t *testing.T, es []stream.ReadEntry) string {
	t.Helper()
	var s []string
	for _, e := range es {
		err := batches(e, func(b []byte, h kbatch.Header) error {
			hz := ""
			if _, ok := deleteHorizon(h); ok {
				hz = "h"
			}
			if h.Attributes&kbatch.AttrControl != 0 {
				s = append(s, fmt.Sprintf("%d:marker%s", h.BaseOffset, hz))
				return nil
			}
			rs, err := records(b, h)
			if err != nil {
				return err
			}
			for _, r := range rs {
				// The record's timestamp: base + its delta (after the
				// length and attributes).
				_, k := binary.Varint(r.raw)
				d, _ := binary.Varint(r.raw[k+1:])
				v := "v"
				if r.tombstone {
					v = "nil"
				}
				s = append(s, fmt.Sprintf("%d:%s=%s@%d%s", r.offset, r.key, v, h.BaseTimestamp+d, hz))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return strings.Join(s, " ")
}

// TestDeleteHorizon: tombstones and markers go delete.retention.ms after
// the pass that first cleaned them (KIP-534), not by batch timestamp:
//   - pass 1 (now 100, retention 50) keeps the tombstone and both markers,
//     gives the tombstone's batch and the aborted transaction's marker
//     (its data are gone) a horizon of 150, keeps record timestamps, and
//     asks for a pass at 150;
//   - a pass over the view alone at 149 changes nothing;
//   - at 150 the tombstone and the aborted marker go; the committed
//     transaction's marker stays while its data do;
//   - once new data supersede that transaction's record, its marker gets
//     a horizon and goes on the pass after.
func TestDeleteHorizon(t *testing.T) {
	dirty := []stream.ReadEntry{
		batch(0, 0, false, 10, rec{"a", "1"}, rec{"b", ""}), // b: tombstone
		batch(2, 7, true, 20, rec{"c", "t"}),                // committed
		batch(3, 8, true, 20, rec{"d", "x"}),                // aborted
		marker(4, 7, true),
		marker(5, 8, false),
	}
	v1, c := pass(t, Options{NowMs: 100, DeleteRetentionMs: 50}, nil, dirty)
	if got, want := describe(t, v1), "0:a=v@10h 1:b=nil@10h 2:c=v@20 4:marker 5:markerh"; got != want {
		t.Fatalf("pass 1: %s, want %s", got, want)
	}
	if c.RecleanAtMs() != 150 {
		t.Fatalf("reclean at %d, want 150", c.RecleanAtMs())
	}
	for _, e := range v1 {
		h, _ := kbatch.ParseHeader(e.Payload)
		if hz, ok := deleteHorizon(h); ok && hz != 150 {
			t.Fatalf("batch at %d: horizon %d", e.Offset, hz)
		}
	}
	v2, c := pass(t, Options{NowMs: 149, DeleteRetentionMs: 50}, v1, nil)
	if describe(t, v2) != describe(t, v1) || c.RecleanAtMs() != 150 {
		t.Fatalf("before the horizon: %s (reclean %d)", describe(t, v2), c.RecleanAtMs())
	}
	v3, c := pass(t, Options{NowMs: 150, DeleteRetentionMs: 50}, v2, nil)
	if got, want := describe(t, v3), "0:a=v@10h 2:c=v@20 4:marker"; got != want {
		t.Fatalf("at the horizon: %s, want %s", got, want)
	}
	if c.RecleanAtMs() != 0 {
		t.Fatalf("nothing left to expire, reclean at %d", c.RecleanAtMs())
	}
	// c is superseded: the committed transaction's data are gone.
	v4, c := pass(t, Options{NowMs: 200, DeleteRetentionMs: 50}, v3, []stream.ReadEntry{batch(6, 0, false, 30, rec{"c", "2"})})
	if got, want := describe(t, v4), "0:a=v@10h 4:markerh 6:c=v@30"; got != want || c.RecleanAtMs() != 250 {
		t.Fatalf("after c is superseded: %s (reclean %d), want %s (250)", got, c.RecleanAtMs(), want)
	}
	v5, _ := pass(t, Options{NowMs: 250, DeleteRetentionMs: 50}, v4, nil)
	if got, want := describe(t, v5), "0:a=v@10h 6:c=v@30"; got != want {
		t.Fatalf("past the marker's horizon: %s, want %s", got, want)
	}
}
