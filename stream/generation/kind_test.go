package generation

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// TestViewKind: a view object carries its kind in the header flags (covered
// by the digest), reads like any object, gap entries (empty payloads) come
// back as they were built, and an unknown flag bit is still refused.
func TestViewKind(t *testing.T) {
	es := []Entry{{Offset: 10, RecordCount: 2, Timestamp: 5, Payload: []byte("ab")},
		{Offset: 12, RecordCount: 1000, Timestamp: 5},
		{Offset: 1012, RecordCount: 1, Timestamp: 7, Payload: []byte("c")}}
	obj, info := build(t, 1, 3, es, BuilderOptions{Kind: KindView})
	got, kind, err := VerifyKind(obj)
	if err != nil || got != info || kind != KindView {
		t.Fatalf("VerifyKind = %+v, %v, %v; want %+v, view", got, kind, err, info)
	}
	lossless, linfo := build(t, 1, 3, es, BuilderOptions{})
	if _, kind, err := VerifyKind(lossless); err != nil || kind != KindLossless {
		t.Fatalf("lossless kind = %v, %v", kind, err)
	}
	if linfo.Digest == info.Digest || bytes.Equal(obj, lossless) {
		t.Fatal("the kind is not covered by the digest")
	}
	f, err := ParseFooter(obj[info.FooterOffset:], info)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := readSpan(f, obj, 13, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPrefix(dec, es, 13); err != nil {
		t.Fatal(err)
	}
	// Flip in an unknown flag bit (header re-checksummed, so only the flag
	// check can refuse it).
	bad := append([]byte(nil), obj...)
	binary.LittleEndian.PutUint16(bad[6:8], 3)
	binary.LittleEndian.PutUint32(bad[32:36], crc32.Checksum(bad[:32], castagnoli))
	if _, err := Verify(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown flag accepted: %v", err)
	}
}
