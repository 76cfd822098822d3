package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/nereusstream/nereus-go/metadata"
)

// ErrCorrupt means stored bytes failed their checksum or are not a known
// format, somewhere other than the torn tail of the newest log. Nothing is
// served from such a store: Open fails with it. The directory needs repair
// from a backup or another replica.
var ErrCorrupt = errors.New("logstore: corrupt log or snapshot (checksum or format mismatch)")

// Format numbers (see the package doc for the layout they name).
const (
	formatVersion uint32 = 1

	logMagic  = "NRSMLOG1"
	snapMagic = "NRSMSNP1"

	// fileHeaderSize is the header of a log or snapshot file: magic (8),
	// u32 format, u64 generation, u32 crc32c of the previous 20 bytes.
	fileHeaderSize = 8 + 4 + 8 + 4
	// frameHeaderSize: u32 payload length, u64 commit sequence, u32
	// crc32c(payload), u32 crc32c(previous 16 bytes).
	frameHeaderSize = 4 + 8 + 4 + 4
	// maxFramePayload bounds one commit's payload (a Batch is never split,
	// so this bounds the largest Batch's encoded size).
	maxFramePayload = 1 << 30
	// maxKeyBytes bounds one key (the same as boltstore's, so a key space
	// moves between the stores).
	maxKeyBytes = 32768 - 8
)

// Record kinds inside a frame.
const (
	// recPut: key is at version with value.
	recPut byte = 1
	// recDelete: key is absent. version is 0, or the version an ephemeral
	// put issued (ephemerals are logged as deletes: none survives a
	// restart, but its version must never be issued again).
	recDelete byte = 2
	// recEpoch: a store opened with session epoch = version; key and
	// value are empty.
	recEpoch byte = 3
	// recVersion: every version up to version has been issued (a
	// snapshot's counter; key and value are empty).
	recVersion byte = 4
)

// recordHeaderSize: u8 kind, u64 version, u32 key length, u32 value length.
const recordHeaderSize = 1 + 8 + 4 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// logRecord is one decoded record. key and value alias the decoded buffer.
type logRecord struct {
	kind    byte
	version metadata.Version
	key     []byte
	value   []byte
}

// appendRecord appends one record's encoding to b.
func appendRecord(b []byte, kind byte, version metadata.Version, key string, value []byte) []byte {
	b = append(b, kind)
	b = binary.BigEndian.AppendUint64(b, uint64(version))
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	b = append(b, key...)
	return append(b, value...)
}

// decodeRecords splits a frame payload (already checksum-verified) into
// records, rejecting anything malformed with ErrCorrupt. fn sees each record
// in order; its slices alias payload.
func decodeRecords(payload []byte, fn func(logRecord) error) error {
	for off := 0; off < len(payload); {
		if len(payload)-off < recordHeaderSize {
			return fmt.Errorf("%w: record header cut at payload offset %d", ErrCorrupt, off)
		}
		h := payload[off : off+recordHeaderSize]
		r := logRecord{kind: h[0], version: metadata.Version(binary.BigEndian.Uint64(h[1:9]))}
		kl := uint64(binary.BigEndian.Uint32(h[9:13]))
		vl := uint64(binary.BigEndian.Uint32(h[13:17]))
		off += recordHeaderSize
		if uint64(len(payload)-off) < kl+vl {
			return fmt.Errorf("%w: record body cut at payload offset %d", ErrCorrupt, off)
		}
		r.key = payload[off : off+int(kl)]
		r.value = payload[off+int(kl) : off+int(kl+vl)]
		off += int(kl + vl)
		switch r.kind {
		case recPut:
			if kl == 0 || kl > maxKeyBytes || r.version <= 0 {
				return fmt.Errorf("%w: put record key %d bytes, version %d", ErrCorrupt, kl, r.version)
			}
		case recDelete:
			if kl == 0 || kl > maxKeyBytes || vl != 0 || r.version < 0 {
				return fmt.Errorf("%w: delete record key %d bytes, value %d bytes, version %d", ErrCorrupt, kl, vl, r.version)
			}
		case recEpoch, recVersion:
			if kl != 0 || vl != 0 || r.version <= 0 && r.kind == recEpoch || r.version < 0 {
				return fmt.Errorf("%w: counter record kind %d, version %d", ErrCorrupt, r.kind, r.version)
			}
		default:
			return fmt.Errorf("%w: record kind %d", ErrCorrupt, r.kind)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// frameHeader is a decoded frame header.
type frameHeader struct {
	length     uint32
	seq        uint64
	payloadCRC uint32
}

// putFrameHeader writes the header of a frame holding payload into b[:frameHeaderSize].
func putFrameHeader(b []byte, seq uint64, payload []byte) {
	binary.BigEndian.PutUint32(b[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint64(b[4:12], seq)
	binary.BigEndian.PutUint32(b[12:16], crc(payload))
	binary.BigEndian.PutUint32(b[16:20], crc(b[:16]))
}

// decodeFrameHeader checks a frame header's own checksum and bounds.
func decodeFrameHeader(b []byte) (frameHeader, bool) {
	if len(b) < frameHeaderSize || crc(b[:16]) != binary.BigEndian.Uint32(b[16:20]) {
		return frameHeader{}, false
	}
	h := frameHeader{
		length:     binary.BigEndian.Uint32(b[0:4]),
		seq:        binary.BigEndian.Uint64(b[4:12]),
		payloadCRC: binary.BigEndian.Uint32(b[12:16]),
	}
	if h.length == 0 || h.length > maxFramePayload || h.seq == 0 {
		return frameHeader{}, false
	}
	return h, true
}

// decodeFrame decodes the frame at the start of b: its header, payload and
// total size. ok is false for anything that is not one whole, intact frame
// (the caller decides whether that is the torn tail or corruption).
func decodeFrame(b []byte) (h frameHeader, payload []byte, size int, ok bool) {
	h, ok = decodeFrameHeader(b)
	if !ok {
		return frameHeader{}, nil, 0, false
	}
	end := uint64(frameHeaderSize) + uint64(h.length)
	if uint64(len(b)) < end {
		return frameHeader{}, nil, 0, false
	}
	payload = b[frameHeaderSize:end]
	if crc(payload) != h.payloadCRC {
		return frameHeader{}, nil, 0, false
	}
	return h, payload, int(end), true
}

// fileHeader encodes a log or snapshot file header.
func fileHeader(magic string, gen uint64) []byte {
	b := make([]byte, 0, fileHeaderSize)
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint32(b, formatVersion)
	b = binary.BigEndian.AppendUint64(b, gen)
	return binary.BigEndian.AppendUint32(b, crc(b))
}

// checkFileHeader verifies a file header and returns its generation.
func checkFileHeader(name, magic string, b []byte) (uint64, error) {
	if len(b) < fileHeaderSize || string(b[:8]) != magic {
		return 0, fmt.Errorf("%w: %s: bad file header", ErrCorrupt, name)
	}
	if crc(b[:20]) != binary.BigEndian.Uint32(b[20:24]) {
		return 0, fmt.Errorf("%w: %s: file header checksum", ErrCorrupt, name)
	}
	if f := binary.BigEndian.Uint32(b[8:12]); f != formatVersion {
		return 0, fmt.Errorf("logstore: %s: format %d, this build reads %d", name, f, formatVersion)
	}
	return binary.BigEndian.Uint64(b[12:20]), nil
}
