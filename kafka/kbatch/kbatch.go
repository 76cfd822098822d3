// Package kbatch validates and patches Kafka RecordBatch v2 (magic 2) bytes:
// the unit the Kafka front end stores as one stream entry.
//
// It owns the byte layout of the 61-byte batch header, the CRC-32C rule and
// the header rewrites a broker is allowed to make. It must never decompress
// on the produce path (compressed batches pass through unchanged), never
// allocate per record, and never touch bytes covered by the CRC without
// recomputing it.
//
// Layout (big-endian):
//
//	 0 baseOffset i64 | 8 batchLength i32 (= total-12) | 12 partitionLeaderEpoch i32
//	16 magic i8 = 2   | 17 crc u32 (CRC-32C of bytes [21, end))
//	21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64
//	35 maxTimestamp i64 | 43 producerId i64 | 51 producerEpoch i16
//	53 baseSequence i32 | 57 recordCount i32 | 61 records...
//
// baseOffset and partitionLeaderEpoch lie outside the CRC coverage, so the
// broker rewrites them when serving a fetch without touching the checksum.
package kbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// HeaderSize is the fixed RecordBatch v2 header length.
const HeaderSize = 61

// Byte positions of header fields.
const (
	posBaseOffset      = 0
	posLength          = 8
	posLeaderEpoch     = 12
	posMagic           = 16
	posCRC             = 17
	posAttributes      = 21
	posLastOffsetDelta = 23
	posBaseTimestamp   = 27
	posMaxTimestamp    = 35
	posProducerID      = 43
	posProducerEpoch   = 51
	posBaseSequence    = 53
	posRecordCount     = 57
)

// Attribute bits.
const (
	AttrCompressionMask = 0x07
	AttrLogAppendTime   = 0x08
	AttrTransactional   = 0x10
	AttrControl         = 0x20
)

// Compression codecs (attribute bits 0-2).
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors. The Kafka front end maps them to protocol codes.
var (
	// ErrCorrupt: the batch's CRC does not match or its framing is broken
	// (CORRUPT_MESSAGE).
	ErrCorrupt = errors.New("kbatch: corrupt record batch")
	// ErrInvalid: the batch is well framed but violates a rule (counts,
	// offsets deltas, control bit from a client) (INVALID_RECORD).
	ErrInvalid = errors.New("kbatch: invalid record batch")
	// ErrMagic: not a v2 batch; v0/v1 message sets are not accepted
	// (UNSUPPORTED_FOR_MESSAGE_FORMAT).
	ErrMagic = errors.New("kbatch: unsupported record batch magic")
)

// Header is the decoded fixed header of one batch.
type Header struct {
	BaseOffset      int64
	Length          int32 // bytes after the Length field: total size - 12
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
}

// Codec returns the compression codec bits.
func (h Header) Codec() int { return int(h.Attributes & AttrCompressionMask) }

// TotalSize is the full byte size of the batch.
func (h Header) TotalSize() int { return int(h.Length) + 12 }

// LastSequence is the sequence number of the batch's last record; Kafka
// sequences wrap from MaxInt32 to 0.
func (h Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return h.BaseSequence
	}
	last := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if last > math.MaxInt32 {
		last -= math.MaxInt32 + 1
	}
	return int32(last)
}

// ParseHeader decodes the header at the start of b without validating it.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorrupt, len(b))
	}
	be := binary.BigEndian
	return Header{
		BaseOffset:      int64(be.Uint64(b[posBaseOffset:])),
		Length:          int32(be.Uint32(b[posLength:])),
		LeaderEpoch:     int32(be.Uint32(b[posLeaderEpoch:])),
		Magic:           int8(b[posMagic]),
		CRC:             be.Uint32(b[posCRC:]),
		Attributes:      int16(be.Uint16(b[posAttributes:])),
		LastOffsetDelta: int32(be.Uint32(b[posLastOffsetDelta:])),
		BaseTimestamp:   int64(be.Uint64(b[posBaseTimestamp:])),
		MaxTimestamp:    int64(be.Uint64(b[posMaxTimestamp:])),
		ProducerID:      int64(be.Uint64(b[posProducerID:])),
		ProducerEpoch:   int16(be.Uint16(b[posProducerEpoch:])),
		BaseSequence:    int32(be.Uint32(b[posBaseSequence:])),
		NumRecords:      int32(be.Uint32(b[posRecordCount:])),
	}, nil
}

// ValidateProduced checks that b is exactly one well-formed RecordBatch v2 as
// a producer may send it: framing, magic, CRC-32C, codec, no control bit,
// recordCount >= 1 and lastOffsetDelta == recordCount-1. For uncompressed
// batches it also walks every record (lengths, sequential offset deltas,
// count). Compressed record sections are not decompressed.
func ValidateProduced(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d", ErrMagic, h.Magic)
	}
	if h.Length < HeaderSize-12 || h.TotalSize() != len(b) {
		return h, fmt.Errorf("%w: batch length %d does not span the %d bytes sent (exactly one batch per partition)", ErrInvalid, h.Length, len(b))
	}
	if got := crc32.Checksum(b[posAttributes:], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorrupt, h.CRC, got)
	}
	if c := h.Codec(); c > CodecZstd {
		return h, fmt.Errorf("%w: compression codec %d", ErrCorrupt, c)
	}
	if h.Attributes&AttrControl != 0 {
		return h, fmt.Errorf("%w: control batches may not be produced by clients", ErrInvalid)
	}
	if h.NumRecords < 1 {
		return h, fmt.Errorf("%w: record count %d", ErrInvalid, h.NumRecords)
	}
	if h.LastOffsetDelta != h.NumRecords-1 {
		return h, fmt.Errorf("%w: lastOffsetDelta %d with %d records", ErrInvalid, h.LastOffsetDelta, h.NumRecords)
	}
	if h.Codec() == CodecNone {
		if err := walkRecords(b[HeaderSize:], h.NumRecords, nil); err != nil {
			return h, err
		}
	}
	return h, nil
}

// RecordInfo is what WalkRecords reports per record of an uncompressed batch.
type RecordInfo struct {
	OffsetDelta    int32
	TimestampDelta int64
}

// WalkRecords calls fn for each record of an uncompressed batch b (whose
// header has been validated). It returns ErrInvalid for a compressed batch.
func WalkRecords(b []byte, fn func(RecordInfo) bool) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if h.Codec() != CodecNone {
		return fmt.Errorf("%w: compressed batch", ErrInvalid)
	}
	if h.TotalSize() > len(b) {
		return fmt.Errorf("%w: truncated batch", ErrCorrupt)
	}
	return walkRecords(b[HeaderSize:h.TotalSize()], h.NumRecords, fn)
}

// walkRecords checks the record framing of an uncompressed records section:
// varint length, attributes, varlong timestampDelta, varint offsetDelta (must
// equal the record's index), key, value and headers, all inside the section.
func walkRecords(recs []byte, n int32, fn func(RecordInfo) bool) error {
	for i := int32(0); i < n; i++ {
		l, k := binary.Varint(recs)
		if k <= 0 || l < 0 || l > int64(len(recs)-k) {
			return fmt.Errorf("%w: record %d length", ErrCorrupt, i)
		}
		rec := recs[k : k+int(l)]
		recs = recs[k+int(l):]
		if len(rec) < 1 {
			return fmt.Errorf("%w: record %d empty", ErrCorrupt, i)
		}
		r := rec[1:] // skip attributes
		tsDelta, k := binary.Varint(r)
		if k <= 0 {
			return fmt.Errorf("%w: record %d timestamp", ErrCorrupt, i)
		}
		r = r[k:]
		offDelta, k := binary.Varint(r)
		if k <= 0 {
			return fmt.Errorf("%w: record %d offset delta", ErrCorrupt, i)
		}
		if offDelta != int64(i) {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrInvalid, i, offDelta)
		}
		r = r[k:]
		var ok bool
		if r, ok = skipVarBytes(r); !ok { // key
			return fmt.Errorf("%w: record %d key", ErrCorrupt, i)
		}
		if r, ok = skipVarBytes(r); !ok { // value
			return fmt.Errorf("%w: record %d value", ErrCorrupt, i)
		}
		nh, k := binary.Varint(r)
		if k <= 0 || nh < 0 || nh > int64(len(r)) {
			return fmt.Errorf("%w: record %d header count", ErrCorrupt, i)
		}
		r = r[k:]
		for j := int64(0); j < nh; j++ {
			if r, ok = skipVarBytes(r); !ok {
				return fmt.Errorf("%w: record %d header key", ErrCorrupt, i)
			}
			if r, ok = skipVarBytes(r); !ok {
				return fmt.Errorf("%w: record %d header value", ErrCorrupt, i)
			}
		}
		if len(r) != 0 {
			return fmt.Errorf("%w: record %d has %d trailing bytes", ErrCorrupt, i, len(r))
		}
		if fn != nil && !fn(RecordInfo{OffsetDelta: int32(offDelta), TimestampDelta: tsDelta}) {
			return nil
		}
	}
	if len(recs) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", ErrCorrupt, len(recs))
	}
	return nil
}

func skipVarBytes(b []byte) ([]byte, bool) {
	l, k := binary.Varint(b)
	if k <= 0 || l < -1 {
		return nil, false
	}
	b = b[k:]
	if l == -1 {
		return b, true
	}
	if l > int64(len(b)) {
		return nil, false
	}
	return b[l:], true
}

// SetBaseOffset rewrites the baseOffset (outside the CRC).
func SetBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[posBaseOffset:], uint64(off))
}

// SetLeaderEpoch rewrites partitionLeaderEpoch (outside the CRC).
func SetLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[posLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime marks the batch as LogAppendTime with maxTimestamp ts and
// recomputes the CRC, as a broker does for topics configured with
// message.timestamp.type=LogAppendTime.
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[posAttributes:])
	binary.BigEndian.PutUint16(b[posAttributes:], attrs|AttrLogAppendTime)
	binary.BigEndian.PutUint64(b[posMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[posCRC:], crc32.Checksum(b[posAttributes:], castagnoli))
}

// CheckCRC verifies the CRC of one batch at the start of b (used on the
// read path in tests and tools).
func CheckCRC(b []byte) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if h.TotalSize() > len(b) || h.Length < HeaderSize-12 {
		return fmt.Errorf("%w: truncated batch", ErrCorrupt)
	}
	if got := crc32.Checksum(b[posAttributes:h.TotalSize()], castagnoli); got != h.CRC {
		return fmt.Errorf("%w: crc %08x, computed %08x", ErrCorrupt, h.CRC, got)
	}
	return nil
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
