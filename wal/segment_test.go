package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func testGroups() [][][]byte {
	return [][][]byte{
		{[]byte("alpha"), []byte("")},
		{[]byte("beta")},
		{bytes.Repeat([]byte("g"), 300), []byte("delta"), []byte("e")},
	}
}

func flatten(groups [][][]byte) [][]byte {
	var out [][]byte
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func TestSegmentRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		comp   Compression
		legacy bool
		format segmentFormat
	}{
		{CompressionNone, false, formatNereus2},
		{CompressionZstd, false, formatNereus2},
		{CompressionNone, true, formatV1},
		{CompressionZstd, true, formatV1},
	} {
		t.Run(fmt.Sprintf("%v/legacy=%v", tc.comp, tc.legacy), func(t *testing.T) {
			groups := testGroups()
			seg, spans, err := encodeSegment(nil, segmentSpec{groups: groups, comp: tc.comp, legacy: tc.legacy, epoch: 9})
			if err != nil {
				t.Fatal(err)
			}
			recs, f, err := decodeSegment(seg)
			if err != nil {
				t.Fatal(err)
			}
			if f.format != tc.format || f.comp != tc.comp {
				t.Fatalf("footer %+v", f)
			}
			if tc.format == formatNereus2 && f.epoch != 9 {
				t.Fatalf("epoch %d", f.epoch)
			}
			want := flatten(groups)
			if len(recs) != len(want) {
				t.Fatalf("%d records, want %d", len(recs), len(want))
			}
			for i := range want {
				if !bytes.Equal(recs[i], want[i]) {
					t.Fatalf("record %d = %q", i, recs[i])
				}
			}
			if tc.comp != CompressionNone || tc.legacy {
				if spans != nil {
					t.Fatal("spans for a segment without range-readable frames")
				}
				return
			}
			// Each group's span decodes alone to exactly its records.
			for gi, g := range groups {
				sp := spans[gi]
				got, err := DecodeFrames(seg[sp.off : sp.off+sp.length])
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(g) {
					t.Fatalf("group %d: %d frames", gi, len(got))
				}
				for i := range g {
					if !bytes.Equal(got[i], g[i]) {
						t.Fatalf("group %d record %d = %q", gi, i, got[i])
					}
				}
			}
		})
	}
}

func TestSegmentGoldenLegacy(t *testing.T) {
	recs, f, err := decodeSegment(hexFixture(t, goldenSegmentV1a))
	if err != nil {
		t.Fatal(err)
	}
	if f.format != formatV1 || !reflect.DeepEqual(recs, [][]byte{[]byte("hello"), []byte("w")}) {
		t.Fatalf("%v %q", f.format, recs)
	}
	// The legacy writer produces exactly the batch-v1 bytes.
	seg, _, err := encodeSegment(nil, segmentSpec{groups: [][][]byte{{[]byte("hello"), []byte("w")}}, legacy: true})
	if err != nil || !bytes.Equal(seg, hexFixture(t, goldenSegmentV1a)) {
		t.Fatalf("legacy encoding %x, err %v", seg, err)
	}
	// objwal's v2: batch-v1 frames, whole-object crc32c, no magic.
	body := hexFixture(t, `05000000 68656c6c6f 01000000 77 00 02000000`)
	objv2 := binary.LittleEndian.AppendUint32(body, crc32c(body))
	objv2 = append(objv2, 0x02, 0x00)
	recs, f, err = decodeSegment(objv2)
	if err != nil || f.format != formatObjV2 || len(recs) != 2 || string(recs[0]) != "hello" {
		t.Fatalf("objwal v2: %v %v %q", err, f.format, recs)
	}
	objv2[3] ^= 0x10
	if _, _, err := decodeSegment(objv2); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped objwal v2: %v", err)
	}
}

func TestSegmentBitFlipsAreCorrupt(t *testing.T) {
	for _, comp := range []Compression{CompressionNone, CompressionZstd} {
		seg, _, err := encodeSegment(nil, segmentSpec{groups: testGroups(), comp: comp, epoch: 3})
		if err != nil {
			t.Fatal(err)
		}
		for i := range len(seg) * 8 {
			c := bytes.Clone(seg)
			c[i/8] ^= 1 << (i % 8)
			if _, _, err := decodeSegment(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v: flip of bit %d: err %v, want ErrCorrupt", comp, i, err)
			}
		}
		for n := range len(seg) {
			if _, _, err := decodeSegment(seg[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v: truncated to %d: %v", comp, n, err)
			}
		}
	}
}

func TestDecodeFramesRejectsDamage(t *testing.T) {
	var b []byte
	for _, r := range []string{"one", "two", "three"} {
		b = appendFrame(b, []byte(r))
	}
	for i := range len(b) * 8 {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		if _, err := DecodeFrames(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip of bit %d: %v", i, err)
		}
	}
	if _, err := DecodeFrames(b[:len(b)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated range: %v", err)
	}
	if got, err := DecodeFrames(nil); err != nil || len(got) != 0 {
		t.Fatalf("empty range: %v %v", got, err)
	}
}
