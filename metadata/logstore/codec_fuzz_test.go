package logstore

import (
	"bytes"
	"errors"
	"testing"
)

func fuzzFrame(records ...logRecord) []byte {
	b := make([]byte, frameHeaderSize)
	for _, r := range records {
		b = appendRecord(b, r.kind, r.version, string(r.key), r.value)
	}
	putFrameHeader(b, 7, b[frameHeaderSize:])
	return b
}

// FuzzDecodeFrame: decoding arbitrary log bytes (as a frame, and as a bare
// record payload) never panics, accepts a
// frame only when both its checksums hold (so corrupt bytes are never
// replayed), and re-encoding what it accepted reproduces the bytes exactly.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(fuzzFrame(logRecord{kind: recPut, version: 1, key: []byte("k"), value: []byte("v")}))
	f.Add(fuzzFrame(logRecord{kind: recDelete, version: 9, key: []byte("eph")}, logRecord{kind: recDelete, key: []byte("gone")}))
	f.Add(fuzzFrame(logRecord{kind: recEpoch, version: 3}, logRecord{kind: recVersion, version: 40}))
	f.Add(make([]byte, frameHeaderSize))
	f.Add([]byte{})
	bad := fuzzFrame(logRecord{kind: recPut, version: 5, key: []byte("x"), value: []byte("y")})
	bad[len(bad)-1] ^= 0xff
	f.Add(bad)
	f.Fuzz(func(t *testing.T, b []byte) {
		// The record parser on its own (as if the checksum had held):
		// never a panic, only ErrCorrupt.
		if err := decodeRecords(b, func(logRecord) error { return nil }); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("raw decode error %v does not wrap ErrCorrupt", err)
		}
		h, payload, size, ok := decodeFrame(b)
		if !ok {
			return
		}
		if size != frameHeaderSize+len(payload) || size > len(b) || h.seq == 0 || int(h.length) != len(payload) {
			t.Fatalf("frame header %+v, size %d of %d bytes", h, size, len(b))
		}
		again := make([]byte, frameHeaderSize)
		err := decodeRecords(payload, func(r logRecord) error {
			if (r.kind == recPut || r.kind == recDelete) && len(r.key) == 0 {
				t.Fatalf("accepted an empty key: %+v", r)
			}
			if r.kind == recPut && r.version <= 0 {
				t.Fatalf("accepted put version %d", r.version)
			}
			again = appendRecord(again, r.kind, r.version, string(r.key), r.value)
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		putFrameHeader(again, h.seq, again[frameHeaderSize:])
		if !bytes.Equal(again, b[:size]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b[:size])
		}
	})
}
