package wal

import (
	"bytes"
	"reflect"
	"testing"
)

// Fuzz targets for the three parsers of untrusted bytes. Invariants:
//   - the parser never panics and never allocates beyond what the input can
//     justify (counts are checked against the bytes present);
//   - anything accepted re-encodes to an object that parses to the same value
//     (and, for the current formats, to the same bytes);
//   - an accepted manifest's entries tile the sequence space.
//
// CI runs each for a bounded time: go test -run '^$' -fuzz FuzzX -fuzztime 20s ./wal

func manifestSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{
		hexFixture(t, goldenManifestV1),
		hexFixture(t, goldenManifestV2),
		hexFixture(t, goldenManifestV3),
	}
	m := NewManifest()
	m.SetEpoch(3)
	m.Append("seg/a/0000000000000000", []RecordMeta{{StartIndex: 0, IngestionTimeMs: 9, Payload: []byte("m")}, {StartIndex: 2}}, 4)
	m.Append("seg/a/0000000000000001", nil, 1)
	m.SetSnapshot(SnapshotPointer{Location: "snap", ThroughSeq: 2, CreatedUnixMs: 7})
	b, _ := m.Bytes()
	empty, _ := NewManifest().Bytes()
	return append(seeds, b, empty)
}

func FuzzParseManifest(f *testing.F) {
	for _, s := range manifestSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		if err := checkTiling(m); err != nil {
			t.Fatalf("accepted manifest does not tile: %v", err)
		}
		es, _ := m.Entries()
		if len(es) != m.Count() {
			t.Fatalf("%d entries, Count %d", len(es), m.Count())
		}
		b, err := m.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseManifest(b)
		if err != nil {
			t.Fatalf("re-encoded manifest rejected: %v", err)
		}
		es2, _ := m2.Entries()
		if !reflect.DeepEqual(es, es2) || m.NextSequence() != m2.NextSequence() || m.Epoch() != m2.Epoch() || m.Snapshot() != m2.Snapshot() {
			t.Fatal("re-encoded manifest differs")
		}
		b2, _ := m2.Bytes()
		if !bytes.Equal(b, b2) {
			t.Fatal("v4 encoding is not stable")
		}
	})
}

func FuzzDecodeSegment(f *testing.F) {
	f.Add(hexFixture(f, goldenSegmentV1a))
	f.Add(hexFixture(f, goldenSegmentV1b))
	for _, spec := range []segmentSpec{
		{groups: testGroups(), epoch: 4},
		{groups: testGroups(), comp: CompressionZstd, epoch: 4},
		{groups: testGroups(), legacy: true},
		{groups: testGroups(), legacy: true, comp: CompressionZstd},
	} {
		seg, _, _ := encodeSegment(nil, spec)
		f.Add(seg)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, foot, err := decodeSegment(data)
		if err != nil {
			return
		}
		if len(recs) != int(foot.count) {
			t.Fatalf("%d records, footer %d", len(recs), foot.count)
		}
		if foot.comp != CompressionNone || foot.format == formatObjV2 {
			return
		}
		again, _, err := encodeSegment(nil, segmentSpec{groups: [][][]byte{recs}, epoch: foot.epoch, legacy: foot.format == formatV1})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted segment does not re-encode to itself")
		}
	})
}

func FuzzDecodeFrames(f *testing.F) {
	var b []byte
	for _, r := range []string{"a", "", "hello world"} {
		b = appendFrame(b, []byte(r))
	}
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := DecodeFrames(data)
		if err != nil {
			return
		}
		var again []byte
		for _, r := range recs {
			again = appendFrame(again, r)
		}
		if !bytes.Equal(again, data) {
			t.Fatal("accepted frames do not re-encode to themselves")
		}
	})
}
