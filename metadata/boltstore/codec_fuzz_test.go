package boltstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
)

// FuzzDecodeRecord: decoding arbitrary stored bytes never panics, accepts
// only what passes its checksum (never serving corrupt bytes as a value),
// and re-encoding an accepted record reproduces the input exactly.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(1, 0, []byte("value")))
	f.Add(encodeRecord(42, 7<<32|3, nil))
	f.Add([]byte{recordFormat})
	f.Add([]byte{})
	bad := encodeRecord(5, 0, []byte("x"))
	bad[len(bad)-1] ^= 0xff
	f.Add(bad)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeRecord([]byte("k"), b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if h.version <= 0 {
			t.Fatalf("accepted version %d", h.version)
		}
		if again := encodeRecord(h.version, h.session, h.value); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b)
		}
		r := h.record("k")
		if r.Version != h.version || r.Session != metadata.SessionID(h.session) || !bytes.Equal(r.Value, h.value) {
			t.Fatalf("record %+v", r)
		}
	})
}
