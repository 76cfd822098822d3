package wal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
)

// hexFixture decodes hex written one field per line; '#' starts a comment.
func hexFixture(t testing.TB, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatalf("bad fixture: %v", err)
	}
	return b
}

// Golden legacy manifests, written field by field from objwal's documented
// layout (README "Wire formats" and the v2/v3 footer description).
const (
	legacyEntries = `
	23000000          # body_len 35
	0000000000000000  # sequence 0
	0300 732f30       # loc "s/0"
	01000000          # md_count 1
	00000000          #   start_index 0
	e803000000000000  #   ingestion_ms 1000
	02000000 6162     #   payload "ab"
	11000000          # body_len 17
	0100000000000000  # sequence 1
	0300 732f31       # loc "s/1"
	00000000          # md_count 0
	`
	goldenManifestV1 = legacyEntries + `
	02000000          # entries_count 2
	0200000000000000  # next_sequence 2
	0300000000000000  # epoch 3
	0100              # version 1
	`
	goldenManifestV2 = legacyEntries + `
	736e61702f31      # snapshot loc "snap/1"
	0600              # loc_len 6
	0000000000000000  # through_seq 0
	8813000000000000  # created_ms 5000
	02000000          # entries_count 2
	0200000000000000  # next_sequence 2
	0400000000000000  # epoch 4
	0200              # version 2
	`
	goldenManifestV3 = `
	27000000          # body_len 39
	0000000000000000  # sequence 0
	00000000          # count 0 (a legacy entry carried forward)
	0300 732f30       # loc "s/0"
	01000000          # md_count 1
	00000000 e803000000000000 02000000 6162
	15000000          # body_len 21
	0100000000000000  # sequence 1
	02000000          # count 2
	0300 732f31       # loc "s/1"
	00000000          # md_count 0
	736e61702f31 0600 0000000000000000 8813000000000000  # snapshot "snap/1" through 0
	02000000          # entries_count 2
	0300000000000000  # next_sequence 3
	0500000000000000  # epoch 5
	0300              # version 3
	`
	// Batch-v1 segments with two records each.
	goldenSegmentV1a = `
	05000000 68656c6c6f   # "hello"
	01000000 77           # "w"
	00                    # compression none
	02000000              # record_count 2
	0100                  # version 1
	`
	goldenSegmentV1b = `
	01000000 78           # "x"
	02000000 797a         # "yz"
	00 02000000 0100
	`
)

func TestParseLegacyManifests(t *testing.T) {
	cases := []struct {
		name     string
		fixture  string
		epoch    uint64
		next     uint64
		entries  []Entry
		snapshot SnapshotPointer
	}{
		{"v1", goldenManifestV1, 3, 2, []Entry{
			{Sequence: 0, Count: 0, Location: "s/0", Metadata: []RecordMeta{{StartIndex: 0, IngestionTimeMs: 1000, Payload: []byte("ab")}}},
			{Sequence: 1, Count: 0, Location: "s/1"},
		}, SnapshotPointer{}},
		{"v2", goldenManifestV2, 4, 2, []Entry{
			{Sequence: 0, Count: 0, Location: "s/0", Metadata: []RecordMeta{{StartIndex: 0, IngestionTimeMs: 1000, Payload: []byte("ab")}}},
			{Sequence: 1, Count: 0, Location: "s/1"},
		}, SnapshotPointer{Location: "snap/1", ThroughSeq: 0, CreatedUnixMs: 5000}},
		{"v3", goldenManifestV3, 5, 3, []Entry{
			{Sequence: 0, Count: 0, Location: "s/0", Metadata: []RecordMeta{{StartIndex: 0, IngestionTimeMs: 1000, Payload: []byte("ab")}}},
			{Sequence: 1, Count: 2, Location: "s/1"},
		}, SnapshotPointer{Location: "snap/1", ThroughSeq: 0, CreatedUnixMs: 5000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseManifest(hexFixture(t, tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			check := func(m *Manifest) {
				t.Helper()
				if m.Epoch() != tc.epoch || m.NextSequence() != tc.next || m.Snapshot() != tc.snapshot {
					t.Fatalf("epoch %d next %d snap %+v", m.Epoch(), m.NextSequence(), m.Snapshot())
				}
				got, _ := m.Entries()
				if !reflect.DeepEqual(got, tc.entries) {
					t.Fatalf("entries\n got %+v\nwant %+v", got, tc.entries)
				}
			}
			check(m)
			// A re-commit upgrades the object to v4 and keeps everything.
			b, err := m.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			if v := binary.LittleEndian.Uint16(b[len(b)-2:]); v != FooterVersion {
				t.Fatalf("re-encoded version %d", v)
			}
			m2, err := ParseManifest(b)
			if err != nil {
				t.Fatal(err)
			}
			check(m2)
			// Legacy entries keep whole-segment semantics.
			e, idx, ok := m2.Locate(0)
			if !ok || e.Location != "s/0" || idx != 0 {
				t.Fatalf("Locate(0) = %+v %d %v", e, idx, ok)
			}
		})
	}
}

// TestManifestV4Golden pins the v4 layout byte for byte.
func TestManifestV4Golden(t *testing.T) {
	m := NewManifest()
	m.SetEpoch(7)
	if _, err := m.Append("s/0", []RecordMeta{{StartIndex: 0, IngestionTimeMs: 1000, Payload: []byte("ab")}}, 2); err != nil {
		t.Fatal(err)
	}
	m.SetSnapshot(SnapshotPointer{Location: "p", ThroughSeq: 1, CreatedUnixMs: 2})
	got, err := m.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	want := hexFixture(t, `
	27000000 0000000000000000 02000000 0300 732f30     # entry: seq 0, count 2, "s/0"
	01000000 00000000 e803000000000000 02000000 6162  # one md range "ab"
	70 0100 0100000000000000 0200000000000000          # snapshot "p" through 1 created 2
	01000000 0200000000000000 0700000000000000         # 1 entry, next 2, epoch 7
	`)
	crc := make([]byte, 4)
	binary.LittleEndian.PutUint32(crc, crc32c(want))
	want = append(append(want, crc...), 0x04, 0x00)
	if !bytes.Equal(got, want) {
		t.Fatalf("v4 bytes\n got %x\nwant %x", got, want)
	}
}

func TestManifestBitFlipsAreCorrupt(t *testing.T) {
	m := NewManifest()
	m.SetEpoch(2)
	for i := range 3 {
		if _, err := m.Append(fmt.Sprintf("seg/run/%016x", i), []RecordMeta{{Payload: []byte("meta")}}, i+1); err != nil {
			t.Fatal(err)
		}
	}
	m.SetSnapshot(SnapshotPointer{Location: "snap", ThroughSeq: 1})
	b, _ := m.Bytes()
	for i := range len(b) * 8 {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		if _, err := ParseManifest(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip of bit %d: err %v, want ErrCorrupt", i, err)
		}
	}
	for n := range len(b) {
		if _, err := ParseManifest(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: err %v", n, err)
		}
	}
}

func TestManifestQueries(t *testing.T) {
	m := NewManifest()
	counts := []int{3, 1, 4}
	for i, c := range counts {
		seq, err := m.Append(fmt.Sprintf("l%d", i), nil, c)
		if err != nil {
			t.Fatal(err)
		}
		if want := []uint64{0, 3, 4}[i]; seq != want {
			t.Fatalf("Append %d returned %d, want %d", i, seq, want)
		}
	}
	if m.NextSequence() != 8 || m.Count() != 3 {
		t.Fatalf("next %d count %d", m.NextSequence(), m.Count())
	}
	for seq, want := range map[uint64]struct {
		loc string
		idx int
	}{0: {"l0", 0}, 2: {"l0", 2}, 3: {"l1", 0}, 4: {"l2", 0}, 7: {"l2", 3}} {
		e, idx, ok := m.Locate(seq)
		if !ok || e.Location != want.loc || idx != want.idx {
			t.Fatalf("Locate(%d) = %s %d %v", seq, e.Location, idx, ok)
		}
	}
	if _, _, ok := m.Locate(8); ok {
		t.Fatal("Locate past the end found something")
	}
	locs := func(es []Entry, err error) string {
		var s []string
		for _, e := range es {
			s = append(s, e.Location)
		}
		return strings.Join(s, ",")
	}
	if got := locs(m.EntriesContaining(2)); got != "l0,l1,l2" {
		t.Fatalf("EntriesContaining(2) = %s", got)
	}
	if got := locs(m.EntriesContaining(3)); got != "l1,l2" {
		t.Fatalf("EntriesContaining(3) = %s", got)
	}
	if got := locs(m.EntriesAfter(3)); got != "l2" {
		t.Fatalf("EntriesAfter(3) = %s", got)
	}
	if got := locs(m.EntriesFrom(3)); got != "l1,l2" {
		t.Fatalf("EntriesFrom(3) = %s", got)
	}
	tail, _ := m.TailLocations(2)
	if len(tail) != 2 || tail["l1"].Sequence != 3 || tail["l2"].Sequence != 4 {
		t.Fatalf("TailLocations(2) = %v", tail)
	}
	// Truncating through 3 removes l0 (0..2) and l1 (3); 2 keeps all.
	if n, _ := m.TruncateThrough(2); n != 1 {
		t.Fatalf("TruncateThrough(2) removed %d", n)
	}
	if n, _ := m.TruncateThrough(4); n != 1 {
		t.Fatalf("TruncateThrough(4) removed %d (l2 covers 4..7 and must stay whole)", n)
	}
	if got := locs(m.Entries()); got != "l2" || m.NextSequence() != 8 {
		t.Fatalf("after truncation: %s next %d", got, m.NextSequence())
	}
	if _, err := m.Append("x", nil, 0); err == nil {
		t.Fatal("Append with count 0 accepted")
	}
	if _, err := m.Append("x", []RecordMeta{{StartIndex: 2}}, 2); err == nil {
		t.Fatal("Append with metadata past the records accepted")
	}
}

// TestEntriesTileProperty checks, over random operation sequences, that the
// entries always tile [firstLive, NextSequence) with no gap or overlap, that
// Locate agrees with the tiling, and that encoding round-trips.
func TestEntriesTileProperty(t *testing.T) {
	prop := func(ops []uint16, legacy uint8) bool {
		var m *Manifest
		if legacy%2 == 0 {
			m = NewManifest()
		} else {
			var err error
			if m, err = ParseManifest(hexFixture(t, goldenManifestV1)); err != nil {
				return false
			}
		}
		for i, op := range ops {
			switch op % 5 {
			case 0:
				if m.NextSequence() > 0 {
					if _, err := m.TruncateThrough(uint64(op) % m.NextSequence()); err != nil {
						return false
					}
				}
			default:
				if _, err := m.Append(fmt.Sprintf("r/%016x", i), nil, int(op%9)+1); err != nil {
					return false
				}
			}
			if err := checkTiling(m); err != nil {
				t.Log(err)
				return false
			}
		}
		b, err := m.Bytes()
		if err != nil {
			return false
		}
		m2, err := ParseManifest(b)
		if err != nil {
			t.Log(err)
			return false
		}
		e1, _ := m.Entries()
		e2, _ := m2.Entries()
		return reflect.DeepEqual(e1, e2) && m2.NextSequence() == m.NextSequence()
	}
	cfg := &quick.Config{MaxCount: 300, Rand: newQuickRand(t)}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatal(err)
	}
}

func checkTiling(m *Manifest) error {
	es, _ := m.Entries()
	for i := 1; i < len(es); i++ {
		if es[i].Sequence != es[i-1].End() {
			return fmt.Errorf("entry %d starts at %d, previous ends at %d", i, es[i].Sequence, es[i-1].End())
		}
	}
	if len(es) > 0 && es[len(es)-1].End() > m.NextSequence() {
		return fmt.Errorf("last entry ends past next sequence")
	}
	for _, e := range es {
		for s := e.Sequence; s < e.End(); s++ {
			got, idx, ok := m.Locate(s)
			if !ok || got.Location != e.Location || (e.Count > 0 && uint64(idx) != s-e.Sequence) {
				return fmt.Errorf("Locate(%d) = %s/%d/%v, want %s", s, got.Location, idx, ok, e.Location)
			}
		}
	}
	if len(es) > 0 {
		if _, _, ok := m.Locate(es[0].Sequence - 1); ok && es[0].Sequence > 0 {
			return fmt.Errorf("Locate below first live entry succeeded")
		}
	}
	return nil
}
