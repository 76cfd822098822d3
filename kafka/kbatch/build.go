package kbatch

import (
	"encoding/binary"
	"hash/crc32"
)

// Record is one record for Build.
type Record struct {
	Key, Value     []byte // nil encodes as null
	TimestampDelta int64
}

// BuildOptions are the header fields Build writes.
type BuildOptions struct {
	BaseTimestamp int64
	ProducerID    int64 // -1: none
	ProducerEpoch int16
	BaseSequence  int32 // -1: none
	Attributes    int16 // codec bits must be 0: Build does not compress
}

// Build encodes an uncompressed RecordBatch v2 with baseOffset 0 and a
// valid CRC-32C. It is for tests and tools; brokers never build batches.
func Build(opts BuildOptions, recs []Record) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(recs)*32)
	maxTs := opts.BaseTimestamp
	var body []byte
	for i, r := range recs {
		var rec []byte
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, r.TimestampDelta)
		rec = binary.AppendVarint(rec, int64(i))
		rec = appendVarBytes(rec, r.Key)
		rec = appendVarBytes(rec, r.Value)
		rec = binary.AppendVarint(rec, 0) // headers
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
		maxTs = max(maxTs, opts.BaseTimestamp+r.TimestampDelta)
	}
	b = append(b, body...)
	be := binary.BigEndian
	be.PutUint32(b[posLength:], uint32(len(b)-12))
	be.PutUint32(b[posLeaderEpoch:], 0xffffffff)
	b[posMagic] = 2
	be.PutUint16(b[posAttributes:], uint16(opts.Attributes))
	be.PutUint32(b[posLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint64(b[posBaseTimestamp:], uint64(opts.BaseTimestamp))
	be.PutUint64(b[posMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[posProducerID:], uint64(opts.ProducerID))
	be.PutUint16(b[posProducerEpoch:], uint16(opts.ProducerEpoch))
	be.PutUint32(b[posBaseSequence:], uint32(opts.BaseSequence))
	be.PutUint32(b[posRecordCount:], uint32(len(recs)))
	be.PutUint32(b[posCRC:], crc32.Checksum(b[posAttributes:], castagnoli))
	return b
}

func appendVarBytes(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}
