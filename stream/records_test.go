package stream

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/stream/internal/dedup"
)

func sampleHead() *head {
	h := newHead(nameRecord{ID: 42, Name: "orders", Profile: ObjectWALSyncObject, CreatedMs: 1700000000000,
		Attributes: map[string]string{"kafka.topic": "orders"}, Retention: Retention{Time: time.Hour, Bytes: 1 << 30}})
	h.Start, h.End, h.CommittedBytes, h.StartBytes = 5, 20, 1000, 100
	h.Session = sessionRecord{Epoch: 3, Token: 99, Writer: "b1\x00abc", Authority: 7, ExpiresMs: 1700000030000}
	h.Commits, h.IndexedThrough = 4, 10
	h.Pending = []descriptor{{Start: 10, End: 20, Entries: 3, Bytes: 900, CumBytes: 1000, MinTS: 1, MaxTS: 9,
		Epoch: 3, Token: 99, FirstCommit: 3, Commit: 4, Provider: "objectwal",
		Parts: []part{{Start: 10, Target: []byte("seg-a")}, {Start: 15, Target: []byte("seg-b")}}}}
	h.Producers = dedup.New()
	h.Producers.Record("p", 1, dedup.Batch{FirstSeq: 0, LastSeq: 4, Start: 10, End: 15})
	return h
}

func TestHeadRoundTrip(t *testing.T) {
	h := sampleHead()
	b := h.encode()
	got, err := decodeHead(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.encode(), b) {
		t.Fatal("head does not round-trip")
	}
	if got.Session.Writer != "b1\x00abc" || len(got.Pending) != 1 || len(got.Pending[0].Parts) != 2 || got.Producers.Len() != 1 {
		t.Fatalf("decoded head %+v", got)
	}
	if info := got.info(); info.Session.WriterID != "b1" || info.Retention.Time != time.Hour {
		t.Fatalf("info %+v", info)
	}
}

func TestCorruptRecordsAreErrors(t *testing.T) {
	b := sampleHead().encode()
	for i := 0; i < len(b); i += 7 {
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		if _, err := decodeHead(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit flip at %d not detected: %v", i, err)
		}
	}
	d := sampleHead().Pending[0]
	rec := d.encodeIndexRecord()
	rec[3] ^= 1
	if _, err := decodeIndexRecord(rec); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt index record: %v", err)
	}
	if _, err := decodeHead(b[:len(b)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated head: %v", err)
	}
}

// FuzzDecodeRecords: metadata values are untrusted input. Decoders must
// never panic, and whatever they accept must re-encode to something they
// accept again with the same meaning.
func FuzzDecodeRecords(f *testing.F) {
	f.Add(sampleHead().encode())
	f.Add(objectWALHead().encode())
	f.Add(encodeHeadV2(objectWALHead()))
	f.Add(sampleHead().Pending[0].encodeIndexRecord())
	f.Add(nameRecord{ID: 1, Name: "x"}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := decodeHead(b); err == nil {
			again, err := decodeHead(h.encode())
			if err != nil || again.End != h.End || again.Start != h.Start || len(again.Pending) != len(h.Pending) {
				t.Fatalf("head re-decode: %v", err)
			}
		}
		if d, err := decodeIndexRecord(b); err == nil {
			again, err := decodeIndexRecord(d.encodeIndexRecord())
			if err != nil || again.End != d.End || len(again.Parts) != len(d.Parts) {
				t.Fatalf("index re-decode: %v", err)
			}
		}
		if n, err := decodeNameRecord(b); err == nil {
			if _, err := decodeNameRecord(n.encode()); err != nil {
				t.Fatalf("name re-decode: %v", err)
			}
		}
	})
}

// objectWALHead is a head as an Object WAL stream's commits leave it: a
// chain of single-run descriptors whose targets differ in the segment key's
// last digits and the offsets, then one from another session.
func objectWALHead() *head {
	h := sampleHead()
	h.Pending = nil
	end, cum := int64(20), int64(1000)
	for i := range 7 {
		seg := fmt.Sprintf("wal/b1/seg/01M8S2GP5YHZB6CJVEN7P1J7Z4/%016x", 6+i/3)
		t := append([]byte{1, byte(len(seg))}, seg...)
		t = append(t, byte(i*40), 40, 1)
		d := descriptor{Start: end, End: end + 1, Entries: 1, Bytes: 1024, CumBytes: cum + 1024, MinTS: 1700000000000 + int64(i), MaxTS: 1700000000000 + int64(i),
			Epoch: 3, Token: 99, FirstCommit: uint64(5 + i), Commit: uint64(5 + i), Provider: "objectwal", Parts: []part{{Start: end, Target: t}}}
		end, cum = d.End, d.CumBytes
		h.Pending = append(h.Pending, d)
	}
	h.Pending = append(h.Pending, descriptor{Start: end, End: end + 5, Entries: 2, Bytes: 10, CumBytes: cum + 10, MinTS: 5, MaxTS: -3,
		Epoch: 4, Token: 7, FirstCommit: 1, Commit: 2, Generation: 2, Provider: "bookkeeper",
		Parts:   []part{{Start: end, Target: []byte("ledger-1")}, {Start: end + 3, Target: []byte("ledger-12")}},
		Lineage: []lineage{{Epoch: 1, Token: 2, FirstCommit: 3, Commit: 4}}})
	h.End, h.CommittedBytes = end+5, cum+10
	return h
}

func withoutCaches(ds []descriptor) []descriptor {
	out := make([]descriptor, len(ds))
	for i, d := range ds {
		d.encV3, d.encV3Prev = nil, pendingKey{}
		out[i] = d
	}
	return out
}

// TestPendingV3: a v3 head's Pending descriptors, encoded against each
// other, decode to exactly the descriptors written; the cached encodings
// the commit round keeps are byte for byte the fresh ones, also after the
// first descriptors were dropped (the cache names its predecessor); and
// the head is much smaller than its v2 encoding, which still decodes.
func TestPendingV3(t *testing.T) {
	h := objectWALHead()
	fresh := h.encode()
	got, err := decodeHead(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(withoutCaches(got.Pending), withoutCaches(h.Pending)) {
		t.Fatalf("v3 Pending does not round-trip:\n got %+v\nwant %+v", got.Pending, h.Pending)
	}
	if !bytes.Equal(got.encode(), fresh) {
		t.Fatal("v3 head does not re-encode to the same bytes")
	}

	cache := func(h *head) {
		for i := range h.Pending {
			var prev *descriptor
			if i > 0 {
				prev = &h.Pending[i-1]
			}
			h.Pending[i].cachePendingV3(prev, nil)
		}
	}
	cache(h)
	if !bytes.Equal(h.encode(), fresh) {
		t.Fatal("head with cached descriptor encodings differs from the fresh encoding")
	}
	// Confirmed runs leave Pending: the new first descriptor's cache was
	// made against a predecessor that is gone and must not be used.
	h2 := h.clone()
	h2.Pending = h2.Pending[2:]
	plain := h2.clone()
	plain.Pending = withoutCaches(plain.Pending)
	if !bytes.Equal(h2.encode(), plain.encode()) {
		t.Fatal("a cache made against a dropped predecessor was used")
	}
	if d, err := decodeHead(h2.encode()); err != nil || !reflect.DeepEqual(withoutCaches(d.Pending), withoutCaches(h2.Pending)) {
		t.Fatalf("after dropping: %v", err)
	}

	v2 := encodeHeadV2(h)
	old, err := decodeHead(v2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(withoutCaches(old.Pending), withoutCaches(h.Pending)) || old.End != h.End {
		t.Fatal("v2 head no longer decodes to the same head")
	}
	if !bytes.Equal(old.encode(), fresh) {
		t.Fatal("a v2 head re-encodes differently from the v3 head it equals")
	}
	t.Logf("head with %d pending descriptors: v2 %d bytes, v3 %d bytes", len(h.Pending), len(v2), len(fresh))
	if len(fresh) >= len(v2)*2/3 {
		t.Fatalf("v3 head is %d bytes, v2 %d: the delta encoding saves less than a third", len(fresh), len(v2))
	}

	// Merging drops the cache: the merged index record encodes its own fields.
	m := mergeDescriptors([]*indexItem{{d: h.Pending[0]}, {d: h.Pending[1]}})
	if m.encV3 != nil {
		t.Fatal("merged descriptor kept a cached encoding")
	}
	if d, err := decodeIndexRecord(m.encodeIndexRecord()); err != nil || d.Start != h.Pending[0].Start || d.End != h.Pending[1].End || len(d.Parts) != 2 {
		t.Fatalf("merged descriptors: %+v, %v", d, err)
	}
}

// encodeHeadV2 is the v2 head encoder as it was, so v2 records stay tested.
func encodeHeadV2(h *head) []byte {
	w := bin.Writer{}
	w.U8(headRecordV2)
	w.U64(uint64(h.ID))
	w.String(h.Name)
	w.U8(uint8(h.Profile))
	w.U8(uint8(h.State))
	w.Varint(h.CreatedMs)
	encodeAttrs(&w, h.Attributes)
	w.Varint(int64(h.Retention.Time / time.Millisecond))
	w.Varint(h.Retention.Bytes)
	w.Varint(h.Start)
	w.Varint(h.End)
	w.Varint(h.CommittedBytes)
	w.Varint(h.StartBytes)
	w.Uvarint(h.Session.Epoch)
	w.U64(h.Session.Token)
	w.String(h.Session.Writer)
	w.Varint(h.Session.Authority)
	w.Varint(h.Session.ExpiresMs)
	w.Uvarint(h.Commits)
	w.Varint(h.IndexedThrough)
	w.Uvarint(uint64(len(h.Pending)))
	for _, d := range h.Pending {
		d.encodeTo(&w, headRecordV2)
	}
	w.Varint(h.GenThrough)
	w.Varint(h.GenIndexedThrough)
	w.Varint(h.GenCumBytes)
	w.Uvarint(h.NextGen)
	w.Uvarint(uint64(len(h.GenPending)))
	for _, d := range h.GenPending {
		d.encodeTo(&w, headRecordV2)
	}
	w.B = h.Producers.AppendEncode(w.B)
	return w.Seal()
}

func TestKeysMatchTheirFormat(t *testing.T) {
	for _, id := range []ID{0, 1, 0xabcdef, 1<<64 - 1} {
		if got, want := headKey(id), headKeyPrefix+fmt.Sprintf("%016x", uint64(id)); got != want {
			t.Fatalf("headKey(%d) = %q, want %q", id, got, want)
		}
		for _, end := range []int64{0, 7, 1234567890123, 1<<63 - 1} {
			if got, want := indexKey(id, end), indexKeyPrefix+fmt.Sprintf("%016x/%020d", uint64(id), end); got != want {
				t.Fatalf("indexKey(%d, %d) = %q, want %q", id, end, got, want)
			}
		}
	}
}
