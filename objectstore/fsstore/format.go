package fsstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Object file format, version 1. Every object file is written once (to a
// temp file, then renamed into place) and never modified afterwards:
//
//	offset 0   header, headerSize (64) bytes, little-endian:
//	             0  magic      [4]byte "NROB"
//	             4  format     uint16  = 1
//	             6  flags      uint16  = 0 (reserved, must be 0)
//	             8  blockSize  uint32  bytes per checksummed block (16 KiB)
//	            12  reserved   uint32  = 0
//	            16  size       uint64  object data length in bytes
//	            24  generation uint64  store-wide unique write counter (the version)
//	            32  modTime    int64   Unix nanoseconds of the Put
//	            40  tableCRC   uint32  CRC32C of the block table
//	            44  reserved   [16]byte = 0
//	            60  headerCRC  uint32  CRC32C of bytes [0, 60)
//	offset 64  block table: one uint32 CRC32C per data block,
//	           nblocks = ceil(size / blockSize) entries
//	offset 64+4*nblocks  data, size bytes
//
// The file length must be exactly 64 + 4*nblocks + size; anything else is a
// torn or truncated file and reads as corrupt. A whole-object read checks
// every block and the table CRC; a ranged read checks only the blocks that
// cover the range (so it never reads the whole file), and a corrupted table
// entry then shows up as a mismatch with its block.
const (
	headerSize       = 64
	formatVersion    = 1
	defaultBlockSize = 16 << 10
	// maxBlockSize bounds what a reader accepts from a header, so a corrupt
	// (but CRC-colliding) header cannot make it allocate absurd buffers.
	maxBlockSize = 1 << 24
)

var (
	fileMagic  = [4]byte{'N', 'R', 'O', 'B'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// header is the decoded fixed header of an object file.
type header struct {
	blockSize  uint32
	size       uint64
	generation uint64
	modTime    int64
	tableCRC   uint32
}

func (h header) nblocks() uint64 {
	if h.size == 0 {
		return 0
	}
	return (h.size + uint64(h.blockSize) - 1) / uint64(h.blockSize)
}

func (h header) tableLen() int64 { return int64(4 * h.nblocks()) }

// dataOffset is where the object bytes start in the file.
func (h header) dataOffset() int64 { return headerSize + h.tableLen() }

// fileSize is the exact length a well-formed file has.
func (h header) fileSize() int64 { return h.dataOffset() + int64(h.size) }

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// encodePrefix returns header+block table for data, ready to be followed by
// data itself in the file.
func encodePrefix(data []byte, generation uint64, modTime int64) []byte {
	h := header{blockSize: defaultBlockSize, size: uint64(len(data)), generation: generation, modTime: modTime}
	n := h.nblocks()
	buf := make([]byte, headerSize+4*n)
	table := buf[headerSize:]
	for i := uint64(0); i < n; i++ {
		lo := i * uint64(h.blockSize)
		hi := min(lo+uint64(h.blockSize), h.size)
		binary.LittleEndian.PutUint32(table[4*i:], crc(data[lo:hi]))
	}
	h.tableCRC = crc(table)
	copy(buf[0:4], fileMagic[:])
	binary.LittleEndian.PutUint16(buf[4:], formatVersion)
	binary.LittleEndian.PutUint16(buf[6:], 0)
	binary.LittleEndian.PutUint32(buf[8:], h.blockSize)
	binary.LittleEndian.PutUint64(buf[16:], h.size)
	binary.LittleEndian.PutUint64(buf[24:], h.generation)
	binary.LittleEndian.PutUint64(buf[32:], uint64(h.modTime))
	binary.LittleEndian.PutUint32(buf[40:], h.tableCRC)
	binary.LittleEndian.PutUint32(buf[60:], crc(buf[:60]))
	return buf
}

// corruptf builds an error that wraps objectstore.ErrCorrupt and names key.
func corruptf(key, format string, args ...any) error {
	return fmt.Errorf("fsstore: %q: %w: %s", key, objectstore.ErrCorrupt, fmt.Sprintf(format, args...))
}

// decodeHeader parses and verifies the fixed header. fileSize is the file's
// actual length, checked against what the header implies.
func decodeHeader(key string, b []byte, fileSize int64) (header, error) {
	if len(b) < headerSize {
		return header{}, corruptf(key, "file shorter than its header (%d bytes)", len(b))
	}
	b = b[:headerSize]
	if got, want := crc(b[:60]), binary.LittleEndian.Uint32(b[60:]); got != want {
		return header{}, corruptf(key, "header checksum mismatch")
	}
	if [4]byte(b[0:4]) != fileMagic {
		return header{}, corruptf(key, "bad magic %q", b[0:4])
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != formatVersion {
		return header{}, corruptf(key, "unknown format version %d", v)
	}
	h := header{
		blockSize:  binary.LittleEndian.Uint32(b[8:]),
		size:       binary.LittleEndian.Uint64(b[16:]),
		generation: binary.LittleEndian.Uint64(b[24:]),
		modTime:    int64(binary.LittleEndian.Uint64(b[32:])),
		tableCRC:   binary.LittleEndian.Uint32(b[40:]),
	}
	if h.blockSize == 0 || h.blockSize > maxBlockSize {
		return header{}, corruptf(key, "bad block size %d", h.blockSize)
	}
	if h.size > uint64(fileSize) || h.fileSize() != fileSize {
		return header{}, corruptf(key, "file length %d does not match header (object size %d)", fileSize, h.size)
	}
	return h, nil
}

// verifyBlocks checks data (which starts at block firstBlock of the object)
// against the CRCs in table (entries for firstBlock onwards).
func verifyBlocks(key string, h header, firstBlock uint64, table, data []byte) error {
	bs := uint64(h.blockSize)
	for i := uint64(0); uint64(len(data)) > i*bs; i++ {
		lo := i * bs
		hi := min(lo+bs, uint64(len(data)))
		if 4*i+4 > uint64(len(table)) {
			return corruptf(key, "block table too short")
		}
		if crc(data[lo:hi]) != binary.LittleEndian.Uint32(table[4*i:]) {
			return corruptf(key, "block %d checksum mismatch", firstBlock+i)
		}
	}
	return nil
}
