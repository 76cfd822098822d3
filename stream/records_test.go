package stream

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

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

// TestCachedDescriptorEncoding: a head whose Pending descriptors carry
// their cached encoding (as the commit round builds them) is byte for byte
// the head encoded from scratch, and so are index records.
func TestCachedDescriptorEncoding(t *testing.T) {
	h := sampleHead()
	plain := h.encode()
	plainIndex := h.Pending[0].encodeIndexRecord()
	h.Pending[0] = h.Pending[0].cached()
	if !bytes.Equal(h.encode(), plain) {
		t.Fatal("head with cached descriptor encodings differs")
	}
	if !bytes.Equal(h.Pending[0].encodeIndexRecord(), plainIndex) {
		t.Fatal("index record from a cached descriptor differs")
	}
	// Merging drops the cache: the merged descriptor encodes its own fields.
	d2 := descriptor{Start: 20, End: 25, Entries: 1, Bytes: 50, CumBytes: 1050, Epoch: 3, Token: 99, FirstCommit: 5, Commit: 5,
		Provider: "objectwal", Parts: []part{{Start: 20, Target: []byte("seg-c")}}}.cached()
	m := mergeDescriptors([]*indexItem{{d: h.Pending[0]}, {d: d2}})
	got, err := decodeIndexRecord(m.encodeIndexRecord())
	if err != nil || got.Start != 10 || got.End != 25 || len(got.Parts) != 3 || got.Commit != 5 {
		t.Fatalf("merged cached descriptors: %+v, %v", got, err)
	}
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
