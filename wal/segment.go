package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Compression selects the codec applied to a segment's record block.
type Compression uint8

// Compression codecs.
const (
	CompressionNone Compression = 0
	CompressionZstd Compression = 1
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionZstd:
		return "zstd"
	default:
		return fmt.Sprintf("compression(%d)", uint8(c))
	}
}

// Segment formats (byte layouts in the package doc).
const (
	segmentV1 uint16 = 1 // batch-v1: unchecksummed, read and (LegacySegmentFormat) written
	segmentV2 uint16 = 2 // nereus v2 (magic) or objwal v2 (no magic), by footer

	frameHeaderSize   = 4 + 4 // len, crc32c
	legacyFrameHeader = 4     // len
	segFooterV1Size   = 1 + 4 + 2
	segFooterObjV2    = 1 + 4 + 4 + 2
	segFooterV2Size   = 1 + 4 + 8 + 8 + 4 + 4 + 2

	// maxFramesLen bounds a nereus v2 frame block (and so a decompression);
	// maxLegacyDecoded bounds the decompression of a legacy zstd block whose
	// size is not recorded anywhere.
	maxFramesLen     = 1 << 30
	maxLegacyDecoded = 256 << 20
)

// segmentMagic marks a nereus v2 footer ("NWS2"), telling it apart from an
// objwal v2 footer with the same version word.
var segmentMagic = [4]byte{'N', 'W', 'S', '2'}

var (
	zstdOnce      sync.Once
	zstdEnc       *zstd.Encoder
	zstdDec       *zstd.Decoder
	zstdLegacyDec *zstd.Decoder
)

func zstdCodecs() {
	zstdOnce.Do(func() {
		var err error
		// EncodeAll/DecodeAll are safe for concurrent use.
		if zstdEnc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault)); err != nil {
			panic(err)
		}
		if zstdDec, err = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxFramesLen)); err != nil {
			panic(err)
		}
		if zstdLegacyDec, err = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxLegacyDecoded)); err != nil {
			panic(err)
		}
	})
}

// frameCRC is the CRC32C of a frame: its little-endian length word followed by
// its payload, so a flipped length bit is caught as surely as a payload bit.
func frameCRC(lenWord []byte, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, lenWord), castagnoli, payload)
}

// appendFrame appends one checksummed v2 frame.
func appendFrame(dst []byte, rec []byte) []byte {
	var hdr [frameHeaderSize]byte
	binary.LittleEndian.PutUint32(hdr[:4], uint32(len(rec)))
	binary.LittleEndian.PutUint32(hdr[4:], frameCRC(hdr[:4], rec))
	dst = append(dst, hdr[:]...)
	return append(dst, rec...)
}

// DecodeFrames decodes a byte range holding whole, contiguous v2 record frames
// (for example the range [Offset, Offset+Length) of a Placement, fetched with
// a ranged GET) into record payloads, verifying each frame's CRC32C. A
// mismatch, a truncated frame or trailing bytes wrap ErrCorrupt. The returned
// payloads alias b.
func DecodeFrames(b []byte) ([][]byte, error) {
	out := make([][]byte, 0, min(len(b)/frameHeaderSize, 1024))
	for off := 0; off < len(b); {
		if len(b)-off < frameHeaderSize {
			return nil, corruptf("truncated frame header at offset %d", off)
		}
		n := binary.LittleEndian.Uint32(b[off:])
		if uint64(n) > uint64(len(b)-off-frameHeaderSize) {
			return nil, corruptf("frame length %d at offset %d overruns %d bytes", n, off, len(b))
		}
		payload := b[off+frameHeaderSize : off+frameHeaderSize+int(n) : off+frameHeaderSize+int(n)]
		if got, want := frameCRC(b[off:off+4], payload), binary.LittleEndian.Uint32(b[off+4:]); got != want {
			return nil, corruptf("frame crc32c %08x, stored %08x at offset %d", got, want, off)
		}
		out = append(out, payload)
		off += frameHeaderSize + int(n)
	}
	return out, nil
}

// frameSpan is the byte range of one Append group's frames in a segment.
type frameSpan struct {
	off, length int64
}

// segmentSpec is what the producer hands the encoder.
type segmentSpec struct {
	groups [][][]byte // Append groups, each a list of records, in order
	comp   Compression
	legacy bool   // write batch-v1
	epoch  uint64 // producer's claimed epoch (v2 footer)
}

// encodeSegment appends the encoded segment to dst[:0] and returns it along
// with each group's frame span (spans are nil unless the segment is an
// uncompressed v2 segment, the only form whose frames can be range-read).
func encodeSegment(dst []byte, spec segmentSpec) ([]byte, []frameSpan, error) {
	var count, raw uint64
	hdr := uint64(frameHeaderSize)
	if spec.legacy {
		hdr = legacyFrameHeader
	}
	for _, g := range spec.groups {
		for _, r := range g {
			if uint64(len(r)) > math.MaxUint32 {
				return nil, nil, fmt.Errorf("nereus/wal: record of %d bytes exceeds u32", len(r))
			}
			count++
			raw += hdr + uint64(len(r))
		}
	}
	if count == 0 || count > math.MaxUint32 {
		return nil, nil, fmt.Errorf("nereus/wal: segment record count %d out of range", count)
	}
	if !spec.legacy && raw > maxFramesLen {
		return nil, nil, fmt.Errorf("nereus/wal: segment frame block of %d bytes exceeds %d", raw, maxFramesLen)
	}
	var frames []byte
	var spans []frameSpan
	if spec.comp == CompressionNone {
		frames = dst[:0]
		if uint64(cap(frames)) < raw+segFooterV2Size {
			frames = make([]byte, 0, raw+segFooterV2Size)
		}
		if !spec.legacy {
			spans = make([]frameSpan, len(spec.groups))
		}
	} else {
		frames = make([]byte, 0, raw)
	}
	for gi, g := range spec.groups {
		start := len(frames)
		for _, r := range g {
			if spec.legacy {
				frames = binary.LittleEndian.AppendUint32(frames, uint32(len(r)))
				frames = append(frames, r...)
			} else {
				frames = appendFrame(frames, r)
			}
		}
		if spans != nil {
			spans[gi] = frameSpan{off: int64(start), length: int64(len(frames) - start)}
		}
	}
	out := frames
	switch spec.comp {
	case CompressionNone:
	case CompressionZstd:
		zstdCodecs()
		out = zstdEnc.EncodeAll(frames, dst[:0])
	default:
		return nil, nil, fmt.Errorf("nereus/wal: unknown compression %d", spec.comp)
	}
	out = append(out, byte(spec.comp))
	out = binary.LittleEndian.AppendUint32(out, uint32(count))
	if spec.legacy {
		return binary.LittleEndian.AppendUint16(out, segmentV1), nil, nil
	}
	out = binary.LittleEndian.AppendUint64(out, raw)
	out = binary.LittleEndian.AppendUint64(out, spec.epoch)
	out = append(out, segmentMagic[:]...)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
	out = binary.LittleEndian.AppendUint16(out, segmentV2)
	return out, spans, nil
}

// segmentFormat names the three readable layouts.
type segmentFormat uint8

const (
	formatV1      segmentFormat = iota + 1 // batch-v1
	formatObjV2                            // objwal v2: whole-object crc, plain frames
	formatNereus2                          // nereus v2: framed crcs + digest + epoch
)

// segmentFooter is a verified footer plus the stored record block.
type segmentFooter struct {
	format    segmentFormat
	comp      Compression
	count     uint32
	framesLen uint64 // nereus v2 only
	epoch     uint64 // nereus v2 only
	block     []byte // stored record block (compressed or not)
}

// verifySegment checks the footer and, where the format has one, the
// whole-object digest. It never decompresses.
func verifySegment(data []byte) (segmentFooter, error) {
	var f segmentFooter
	n := len(data)
	if n < segFooterV1Size {
		return f, corruptf("segment too short (%d bytes)", n)
	}
	switch binary.LittleEndian.Uint16(data[n-2:]) {
	case segmentV1:
		f.format = formatV1
		f.comp = Compression(data[n-7])
		f.count = binary.LittleEndian.Uint32(data[n-6:])
		f.block = data[:n-segFooterV1Size]
	case segmentV2:
		if n < segFooterObjV2 {
			return f, corruptf("segment too short for a v2 footer (%d bytes)", n)
		}
		want := binary.LittleEndian.Uint32(data[n-6:])
		if n >= segFooterV2Size && [4]byte(data[n-10:n-6]) == segmentMagic {
			if got := crc32.Checksum(data[:n-6], castagnoli); got != want {
				return f, corruptf("segment crc32c %08x, stored %08x", got, want)
			}
			f.format = formatNereus2
			f.comp = Compression(data[n-31])
			f.count = binary.LittleEndian.Uint32(data[n-30:])
			f.framesLen = binary.LittleEndian.Uint64(data[n-26:])
			f.epoch = binary.LittleEndian.Uint64(data[n-18:])
			f.block = data[:n-segFooterV2Size]
			if f.framesLen > maxFramesLen || (f.comp == CompressionNone && f.framesLen != uint64(len(f.block))) {
				return f, corruptf("segment frame block length %d inconsistent", f.framesLen)
			}
		} else {
			if got := crc32.Checksum(data[:n-6], castagnoli); got != want {
				return f, corruptf("segment crc32c %08x, stored %08x", got, want)
			}
			f.format = formatObjV2
			f.comp = Compression(data[n-11])
			f.count = binary.LittleEndian.Uint32(data[n-10:])
			f.block = data[:n-segFooterObjV2]
		}
	default:
		return f, corruptf("unsupported segment version %d", binary.LittleEndian.Uint16(data[n-2:]))
	}
	if f.comp != CompressionNone && f.comp != CompressionZstd {
		return f, corruptf("unsupported segment compression %d", f.comp)
	}
	if f.count == 0 {
		return f, corruptf("segment holds no records")
	}
	return f, nil
}

// decodeSegment verifies a segment object and returns its records (aliasing
// data when uncompressed) and its verified footer. Every failure wraps
// ErrCorrupt.
func decodeSegment(data []byte) ([][]byte, segmentFooter, error) {
	f, err := verifySegment(data)
	if err != nil {
		return nil, f, err
	}
	frames := f.block
	if f.comp == CompressionZstd {
		zstdCodecs()
		if f.format == formatNereus2 {
			frames, err = zstdDec.DecodeAll(f.block, make([]byte, 0, f.framesLen))
		} else {
			frames, err = zstdLegacyDec.DecodeAll(f.block, nil)
		}
		if err != nil {
			return nil, f, corruptf("zstd block: %v", err)
		}
		if f.format == formatNereus2 && uint64(len(frames)) != f.framesLen {
			return nil, f, corruptf("decompressed %d bytes, footer says %d", len(frames), f.framesLen)
		}
	}
	if f.format == formatNereus2 {
		if uint64(f.count) > uint64(len(frames)/frameHeaderSize) {
			return nil, f, corruptf("record count %d cannot fit in %d bytes", f.count, len(frames))
		}
		recs, err := DecodeFrames(frames)
		if err != nil {
			return nil, f, err
		}
		if len(recs) != int(f.count) {
			return nil, f, corruptf("segment holds %d frames, footer says %d", len(recs), f.count)
		}
		return recs, f, nil
	}
	if uint64(f.count) > uint64(len(frames)/legacyFrameHeader) {
		return nil, f, corruptf("record count %d cannot fit in %d bytes", f.count, len(frames))
	}
	recs := make([][]byte, 0, f.count)
	off := 0
	for i := uint32(0); i < f.count; i++ {
		if len(frames)-off < legacyFrameHeader {
			return nil, f, corruptf("truncated record length (record %d)", i)
		}
		n := binary.LittleEndian.Uint32(frames[off:])
		off += legacyFrameHeader
		if uint64(n) > uint64(len(frames)-off) {
			return nil, f, corruptf("record %d of %d bytes overruns the block", i, n)
		}
		recs = append(recs, frames[off:off+int(n):off+int(n)])
		off += int(n)
	}
	if off != len(frames) {
		return nil, f, corruptf("%d trailing bytes after %d records", len(frames)-off, f.count)
	}
	return recs, f, nil
}
