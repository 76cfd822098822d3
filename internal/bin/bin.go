// Package bin holds the small binary encoding helpers used by Nereus's
// durable metadata records: varints, length-prefixed bytes, and a CRC32C
// trailer so every stored record is checksummed.
//
// It owns no formats of its own; each record type documents its layout. It
// must never panic on hostile input: readers record the first error and
// return zero values after it.
package bin

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// ErrCorrupt reports bytes that are truncated, malformed or fail their CRC.
var ErrCorrupt = errors.New("nereus: corrupt record")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the Castagnoli CRC of b.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Writer appends encoded values to a buffer.
type Writer struct{ B []byte }

func (w *Writer) U8(v uint8)       { w.B = append(w.B, v) }
func (w *Writer) Uvarint(v uint64) { w.B = binary.AppendUvarint(w.B, v) }
func (w *Writer) Varint(v int64)   { w.B = binary.AppendVarint(w.B, v) }
func (w *Writer) U64(v uint64)     { w.B = binary.LittleEndian.AppendUint64(w.B, v) }
func (w *Writer) Bytes(b []byte)   { w.Uvarint(uint64(len(b))); w.B = append(w.B, b...) }
func (w *Writer) String(s string)  { w.Uvarint(uint64(len(s))); w.B = append(w.B, s...) }
func (w *Writer) Raw(b []byte)     { w.B = append(w.B, b...) }
func (w *Writer) Bool(v bool)      { w.U8(map[bool]uint8{false: 0, true: 1}[v]) }

// Seal appends the CRC32C of everything written so far and returns the
// buffer.
func (w *Writer) Seal() []byte {
	return binary.LittleEndian.AppendUint32(w.B, CRC32C(w.B))
}

// Open verifies and strips the CRC32C trailer written by Seal.
func Open(b []byte) ([]byte, error) {
	if len(b) < 4 {
		return nil, ErrCorrupt
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if CRC32C(body) != sum {
		return nil, ErrCorrupt
	}
	return body, nil
}

// Reader decodes values; after the first error every call returns zero and
// Err reports it.
type Reader struct {
	B   []byte
	Off int
	err error
}

func (r *Reader) fail() { r.err = ErrCorrupt }

// Err is the first decoding error.
func (r *Reader) Err() error { return r.err }

// Done reports an error unless every byte was consumed.
func (r *Reader) Done() error {
	if r.err == nil && r.Off != len(r.B) {
		r.fail()
	}
	return r.err
}

func (r *Reader) U8() uint8 {
	if r.err != nil || r.Off >= len(r.B) {
		r.fail()
		return 0
	}
	v := r.B[r.Off]
	r.Off++
	return v
}

func (r *Reader) Bool() bool { return r.U8() != 0 }

func (r *Reader) U64() uint64 {
	if r.err != nil || len(r.B)-r.Off < 8 {
		r.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(r.B[r.Off:])
	r.Off += 8
	return v
}

func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.B[r.Off:])
	if n <= 0 {
		r.fail()
		return 0
	}
	r.Off += n
	return v
}

func (r *Reader) Varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.B[r.Off:])
	if n <= 0 {
		r.fail()
		return 0
	}
	r.Off += n
	return v
}

// Bytes returns a length-prefixed byte slice aliasing the input.
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if r.err != nil || n > uint64(len(r.B)-r.Off) {
		r.fail()
		return nil
	}
	v := r.B[r.Off : r.Off+int(n)]
	r.Off += int(n)
	return v
}

// Len reads a uvarint count and checks it against a sanity bound.
func (r *Reader) Len(limit int) int {
	n := r.Uvarint()
	if n > uint64(limit) {
		r.fail()
		return 0
	}
	return int(n)
}

func (r *Reader) String() string { return string(r.Bytes()) }

// Rest returns the unread bytes.
func (r *Reader) Rest() []byte {
	if r.err != nil {
		return nil
	}
	v := r.B[r.Off:]
	r.Off = len(r.B)
	return v
}
