package objectwal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/stream/provider"
	"github.com/nereusstream/nereus-go/wal"
)

// TestRunEncodingsAllocateOnce: a Write's records and manifest meta are
// built in two allocations (runRecords: one buffer sized up front and the
// record slice), its target in one. Growing bin.Writer buffers from empty
// cost ~10 allocations per Write, once per append when every stream has one
// append per round. The bytes must equal the field-by-field encodings,
// with the largest varints, and the records must not share capacity (an
// append to one must not overwrite the next).
func TestRunEncodingsAllocateOnce(t *testing.T) {
	run := provider.Run{Stream: math.MaxUint64, Epoch: math.MaxUint64, Token: math.MaxUint64, Commit: math.MaxUint64, Start: math.MaxInt64 / 2,
		Entries: []provider.Entry{
			{RecordCount: 1 << 30, Timestamp: math.MinInt64, Payload: bytes.Repeat([]byte{7}, 1000)},
			{RecordCount: 1, Timestamp: -1, Payload: nil},
			{RecordCount: 3, Timestamp: math.MaxInt64, Payload: []byte("abc")},
		}}

	records, meta := runRecords(run)
	if !bytes.Equal(meta, encodeRunMeta(run)) || cap(meta) != len(meta) {
		t.Fatalf("runRecords' meta = %x (cap %d), want %x", meta, cap(meta), encodeRunMeta(run))
	}
	want := [][]byte{func() []byte {
		w := bin.Writer{}
		w.Raw([]byte(runHeaderMagic))
		w.U64(run.Stream)
		w.Uvarint(run.Epoch)
		w.U64(run.Token)
		w.Uvarint(run.Commit)
		w.Varint(run.Start)
		w.Varint(run.End())
		return w.B
	}()}
	for _, e := range run.Entries {
		rec := binary.AppendUvarint(nil, uint64(e.RecordCount))
		rec = binary.AppendVarint(rec, e.Timestamp)
		want = append(want, append(rec, e.Payload...))
	}
	if len(records) != len(want) {
		t.Fatalf("%d records, want %d", len(records), len(want))
	}
	for i := range want {
		if !bytes.Equal(records[i], want[i]) {
			t.Fatalf("record %d = %x, want %x", i, records[i], want[i])
		}
		if cap(records[i]) != len(records[i]) {
			t.Fatalf("record %d has capacity %d past its length %d: an append would write into the next record", i, cap(records[i]), len(records[i]))
		}
	}
	if got, err := decodeRunMeta(encodeRunMeta(run)); err != nil || got.Start != run.Start || got.End() != run.End() || got.Stream != run.Stream || got.Commit != run.Commit {
		t.Fatalf("run meta round trip: %+v, %v", got, err)
	}
	pl := wal.Placement{Location: "wal/w1/segments/00000000000000000001", Offset: math.MaxInt64, Length: math.MaxInt64}
	if got, err := decodeTarget(encodeTarget(pl, math.MaxInt32)); err != nil || got.location != pl.Location || got.offset != pl.Offset || got.length != pl.Length || got.entries != math.MaxInt32 {
		t.Fatalf("target round trip: %+v, %v", got, err)
	}

	for _, c := range []struct {
		name string
		want float64
		f    func()
	}{
		{"runRecords", 2, func() { _, _ = runRecords(run) }},
		{"encodeRunMeta", 1, func() { _ = encodeRunMeta(run) }},
		{"encodeTarget", 1, func() { _ = encodeTarget(pl, math.MaxInt32) }},
	} {
		if got := testing.AllocsPerRun(100, c.f); got != c.want {
			t.Errorf("%s: %v allocations, want %v", c.name, got, c.want)
		}
	}
}

// TestTargetChunkCutsDisjointClippedTargets: the waiter's targets are cut
// from shared chunks (targetChunk): each encodes exactly what encodeTarget
// does, none is overwritten by a later one, each is capacity-clipped, and
// they cost one allocation per several targets.
func TestTargetChunkCutsDisjointClippedTargets(t *testing.T) {
	var c targetChunk
	type cut struct {
		pl      wal.Placement
		entries int
		t       provider.Target
	}
	var cuts []cut
	for i := range 300 {
		pl := wal.Placement{Location: fmt.Sprintf("wal/w1/segments/%020d%s", i, strings.Repeat("x", i%7*40)), Offset: int64(i) * 1000, Length: int64(i + 1)}
		cuts = append(cuts, cut{pl, i % 5, c.encode(pl, i%5)})
	}
	for i, k := range cuts {
		if !bytes.Equal(k.t, encodeTarget(k.pl, k.entries)) || cap(k.t) != len(k.t) {
			t.Fatalf("target %d = %x (cap %d), want %x", i, k.t, cap(k.t), encodeTarget(k.pl, k.entries))
		}
	}
	pl := wal.Placement{Location: "wal/w1/segments/00000000000000000001", Offset: 1 << 40, Length: 1 << 20}
	if got := testing.AllocsPerRun(100, func() {
		for range 5 {
			_ = c.encode(pl, 1)
		}
	}); got > 1 {
		t.Fatalf("5 targets cost %v allocations, want at most 1", got)
	}
}
