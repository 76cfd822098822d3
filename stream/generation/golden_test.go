package generation

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/v1.gen (only when intentionally changing the v1 writer, which must not happen once v1 is released)")

// The v1 fixture's identity: a changed byte anywhere changes the digest.
const (
	goldenV1        = "testdata/v1.gen"
	goldenDigest    = "3901078b4d0e2018fafcfd2dff61fc97753dd5ea71e668a255aaa51e615e38e8"
	goldenSize      = 946
	goldenFooterLen = 250
)

// goldenEntries are the entries of the v1 fixture: several blocks, record
// counts above one, an empty payload, a negative timestamp, timestamps out
// of order.
func goldenEntries() []Entry {
	var es []Entry
	off := int64(1_000_000)
	for i := range 12 {
		p := []byte(fmt.Sprintf("entry %02d: %s", i, bytes.Repeat([]byte{'a' + byte(i)}, i*5)))
		if i == 4 {
			p = nil
		}
		ts := int64(1_733_000_000_000 + i*1000)
		switch i {
		case 6:
			ts = -1
		case 9:
			ts -= 5000
		}
		es = append(es, Entry{Offset: off, RecordCount: uint32(1 + i%4), Timestamp: ts, Payload: p})
		off += int64(1 + i%4)
	}
	return es
}

// TestGoldenV1 pins format version 1: the committed fixture must keep
// verifying and decoding to exactly the same entries and Info in every
// future version of this package, and while v1 is the written version,
// today's Builder must reproduce it byte for byte.
func TestGoldenV1(t *testing.T) {
	want := goldenEntries()
	fresh, freshInfo := build(t, 7, 3, want, BuilderOptions{BlockBytes: 128})
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(goldenV1), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenV1, fresh, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	obj, err := os.ReadFile(goldenV1)
	if err != nil {
		t.Fatal(err)
	}
	info, err := Verify(obj)
	if err != nil {
		t.Fatalf("v1 fixture no longer verifies: %v", err)
	}
	wantMeta := Meta{Stream: 7, Generation: 3, Start: 1_000_000, End: 1_000_030, Entries: 12, Bytes: 0,
		MinTS: -1, MaxTS: 1_733_000_011_000}
	for _, e := range want {
		wantMeta.Bytes += int64(len(e.Payload))
	}
	if info.Meta != wantMeta {
		t.Fatalf("v1 fixture meta %+v, want %+v", info.Meta, wantMeta)
	}
	t.Logf("v1 fixture: %d bytes, footer at %d (+%d), digest %s", info.Size, info.FooterOffset, info.FooterLength, hex.EncodeToString(info.Digest[:]))
	if got := hex.EncodeToString(info.Digest[:]); got != goldenDigest {
		t.Fatalf("v1 fixture digest %s, want %s", got, goldenDigest)
	}
	if info.Size != goldenSize || info.FooterLength != goldenFooterLen {
		t.Fatalf("v1 fixture size %d footer %d, want %d and %d", info.Size, info.FooterLength, goldenSize, goldenFooterLen)
	}
	f, err := ParseFooter(obj[info.FooterOffset:], info)
	if err != nil {
		t.Fatal(err)
	}
	if f.NumBlocks() < 3 {
		t.Fatalf("fixture has %d blocks; it should exercise several", f.NumBlocks())
	}
	for _, e := range want {
		got, err := readSpan(f, obj, e.Offset+int64(e.RecordCount)-1, math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPrefix(got, want, e.Offset); err != nil {
			t.Fatal(err)
		}
	}
	// While v1 is what the Builder writes, it must write exactly this.
	if Version == 1 && (!bytes.Equal(fresh, obj) || freshInfo != info) {
		t.Fatal("the Builder no longer writes the v1 fixture byte for byte: a format change needs a new version (see the package doc)")
	}
}
