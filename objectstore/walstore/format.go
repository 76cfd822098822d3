package walstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

const (
	formatVersion  = 1
	fileMagic      = "NRWSLOG1"
	fileHeaderSize = 8 + 4 + 8 + 8 + 4
	// recordHeaderSize: u32 length, u8 kind, u8 zero, u16 key length,
	// u64 seq, u64 synced, u64 version, i64 modtime, u64 value length,
	// u32 crc32c.
	recordHeaderSize = 4 + 1 + 1 + 2 + 8 + 8 + 8 + 8 + 8 + 4
	// blockSize is the span of one value checksum: a ranged read checks
	// only the blocks it reads.
	blockSize = 16 << 10

	recPut       = 1
	recTombstone = 2
)

// fileHeader encodes a log file's header: which file it is and the
// sequence number its first record must carry.
func fileHeader(num, firstSeq uint64) []byte {
	b := make([]byte, fileHeaderSize)
	copy(b, fileMagic)
	binary.BigEndian.PutUint32(b[8:], formatVersion)
	binary.BigEndian.PutUint64(b[12:], num)
	binary.BigEndian.PutUint64(b[20:], firstSeq)
	binary.BigEndian.PutUint32(b[28:], crc(b[:28]))
	return b
}

// parseFileHeader checks a file header and returns its file number and
// first sequence number.
func parseFileHeader(b []byte) (num, firstSeq uint64, err error) {
	if len(b) < fileHeaderSize {
		return 0, 0, fmt.Errorf("file header of %d bytes", len(b))
	}
	if string(b[:8]) != fileMagic {
		return 0, 0, fmt.Errorf("bad magic %q", b[:8])
	}
	if crc(b[:28]) != binary.BigEndian.Uint32(b[28:]) {
		return 0, 0, fmt.Errorf("file header checksum mismatch")
	}
	if v := binary.BigEndian.Uint32(b[8:]); v != formatVersion {
		return 0, 0, fmt.Errorf("unknown format %d", v)
	}
	return binary.BigEndian.Uint64(b[12:]), binary.BigEndian.Uint64(b[20:]), nil
}

// recordHead is a record's header fields.
type recordHead struct {
	length   uint32 // whole record: header, key, block checksums, value
	kind     uint8
	keyLen   uint16
	seq      uint64
	synced   uint64
	version  uint64
	modTime  int64
	valueLen uint64
}

func numBlocks(valueLen uint64) int { return int((valueLen + blockSize - 1) / blockSize) }

// recordLen is the encoded size of a record with this key and value size.
func recordLen(keyLen int, valueLen uint64) int64 {
	return int64(recordHeaderSize) + int64(keyLen) + 4*int64(numBlocks(valueLen)) + int64(valueLen)
}

// appendRecord encodes a record. The header checksum covers the header,
// the key and the table of block checksums; each block checksum covers
// one blockSize span of the value.
func appendRecord(b []byte, h recordHead, key string, value []byte) []byte {
	return append(appendHead(b, h, key, value), value...)
}

// appendHead encodes a record without its value bytes: the header, the
// key and the value's block checksums.
func appendHead(b []byte, h recordHead, key string, value []byte) []byte {
	h.keyLen = uint16(len(key))
	h.valueLen = uint64(len(value))
	h.length = uint32(recordLen(len(key), h.valueLen))
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, h.length)
	b = append(b, h.kind, 0)
	b = binary.BigEndian.AppendUint16(b, h.keyLen)
	b = binary.BigEndian.AppendUint64(b, h.seq)
	b = binary.BigEndian.AppendUint64(b, h.synced)
	b = binary.BigEndian.AppendUint64(b, h.version)
	b = binary.BigEndian.AppendUint64(b, uint64(h.modTime))
	b = binary.BigEndian.AppendUint64(b, h.valueLen)
	crcAt := len(b)
	b = append(b, 0, 0, 0, 0)
	b = append(b, key...)
	for off := 0; off < len(value); off += blockSize {
		b = binary.BigEndian.AppendUint32(b, crc(value[off:min(off+blockSize, len(value))]))
	}
	sum := crc32.Update(crc(b[start:crcAt]), castagnoli, b[crcAt+4:])
	binary.BigEndian.PutUint32(b[crcAt:], sum)
	return b
}

// decodeHead checks the record header at the start of b, which must hold
// at least the header, key and block checksums (headLen). It returns the fields, the key and the
// block checksums. ok is false when the header is not intact.
func decodeHead(b []byte) (h recordHead, key string, sums []uint32, ok bool) {
	h, ok = peekHead(b)
	if !ok {
		return h, "", nil, false
	}
	n := headLen(h)
	if len(b) < n {
		return h, "", nil, false
	}
	sum := crc32.Update(crc(b[:48]), castagnoli, b[recordHeaderSize:n])
	if sum != binary.BigEndian.Uint32(b[48:]) {
		return h, "", nil, false
	}
	key = string(b[recordHeaderSize : recordHeaderSize+int(h.keyLen)])
	sums = make([]uint32, numBlocks(h.valueLen))
	for i := range sums {
		sums[i] = binary.BigEndian.Uint32(b[recordHeaderSize+int(h.keyLen)+4*i:])
	}
	return h, key, sums, true
}

// peekHead reads a record header's fixed fields without checking its
// checksum, and reports whether they are consistent (known kind, a length
// that matches the key and value lengths). Cheap: a scan for records
// (laterRecord) filters on it before paying for a checksum.
func peekHead(b []byte) (h recordHead, ok bool) {
	if len(b) < recordHeaderSize {
		return h, false
	}
	h.length = binary.BigEndian.Uint32(b)
	h.kind = b[4]
	h.keyLen = binary.BigEndian.Uint16(b[6:])
	h.seq = binary.BigEndian.Uint64(b[8:])
	h.synced = binary.BigEndian.Uint64(b[16:])
	h.version = binary.BigEndian.Uint64(b[24:])
	h.modTime = int64(binary.BigEndian.Uint64(b[32:]))
	h.valueLen = binary.BigEndian.Uint64(b[40:])
	if b[5] != 0 || h.kind != recPut && h.kind != recTombstone || h.valueLen > maxValueBytes ||
		int64(h.length) != recordLen(int(h.keyLen), h.valueLen) {
		return h, false
	}
	return h, true
}

// headLen is the size of a record's header, key and block checksums: what
// decodeHead needs.
func headLen(h recordHead) int {
	return recordHeaderSize + int(h.keyLen) + 4*numBlocks(h.valueLen)
}

// checkBlocks verifies value bytes that start at block first against
// their checksums. value must hold whole blocks, except that the last
// block of the object may be short.
func checkBlocks(value []byte, first int, sums []uint32) bool {
	for i, off := first, 0; off < len(value); i, off = i+1, off+blockSize {
		if i >= len(sums) || crc(value[off:min(off+blockSize, len(value))]) != sums[i] {
			return false
		}
	}
	return true
}
