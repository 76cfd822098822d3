package kcompact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
)

// record is one record of a batch as compaction sees it: its offset, key,
// whether its value is null (a tombstone), and its encoded bytes (length
// prefix included), kept verbatim so a rewritten batch carries the record
// exactly as the producer wrote it (offset delta, timestamp delta, headers).
type record struct {
	offset    int64
	key       []byte
	keyNull   bool
	tombstone bool
	raw       []byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// decompressor is franz-go's (gzip, snappy incl. xerial framing, lz4, zstd).
var decompressor = kgo.DefaultDecompressor()

// records decodes the records of batch b (header h), decompressing them.
func records(b []byte, h kbatch.Header) ([]record, error) {
	if h.TotalSize() > len(b) || h.TotalSize() < kbatch.HeaderSize {
		return nil, fmt.Errorf("%w: truncated batch", kbatch.ErrCorrupt)
	}
	body := b[kbatch.HeaderSize:h.TotalSize()]
	if c := h.Codec(); c != kbatch.CodecNone {
		var err error
		body, err = decompressor.Decompress(body, kgo.CompressionCodecType(c))
		if err != nil {
			return nil, fmt.Errorf("%w: decompressing a batch: %w", kbatch.ErrCorrupt, err)
		}
	}
	out := make([]record, 0, h.NumRecords)
	for i := int32(0); i < h.NumRecords; i++ {
		l, k := binary.Varint(body)
		if k <= 0 || l < 1 || l > int64(len(body)-k) {
			return nil, fmt.Errorf("%w: record %d length", kbatch.ErrCorrupt, i)
		}
		raw := body[:k+int(l)]
		r := body[k+1 : k+int(l)] // after attributes
		body = body[k+int(l):]
		_, n := binary.Varint(r) // timestamp delta
		if n <= 0 {
			return nil, fmt.Errorf("%w: record %d timestamp", kbatch.ErrCorrupt, i)
		}
		r = r[n:]
		od, n := binary.Varint(r)
		if n <= 0 {
			return nil, fmt.Errorf("%w: record %d offset delta", kbatch.ErrCorrupt, i)
		}
		r = r[n:]
		key, null, r, ok := varBytes(r)
		if !ok {
			return nil, fmt.Errorf("%w: record %d key", kbatch.ErrCorrupt, i)
		}
		_, vnull, _, ok := varBytes(r)
		if !ok {
			return nil, fmt.Errorf("%w: record %d value", kbatch.ErrCorrupt, i)
		}
		out = append(out, record{offset: h.BaseOffset + od, key: key, keyNull: null, tombstone: vnull, raw: raw})
	}
	return out, nil
}

func varBytes(b []byte) (v []byte, null bool, rest []byte, ok bool) {
	l, k := binary.Varint(b)
	if k <= 0 || l < -1 {
		return nil, false, nil, false
	}
	b = b[k:]
	if l == -1 {
		return nil, true, b, true
	}
	if l > int64(len(b)) {
		return nil, false, nil, false
	}
	return b[:l], false, b[l:], true
}

// compressors by codec, built once (franz-go's default client compressor).
var compressors = func() map[int]kgo.Compressor {
	m := map[int]kgo.Compressor{}
	for codec, c := range map[int]kgo.CompressionCodec{kbatch.CodecGzip: kgo.GzipCompression(),
		kbatch.CodecSnappy: kgo.SnappyCompression(), kbatch.CodecLZ4: kgo.Lz4Compression(), kbatch.CodecZstd: kgo.ZstdCompression()} {
		if cmp, err := kgo.DefaultCompressor(c); err == nil && cmp != nil {
			m[codec] = cmp
		}
	}
	return m
}()

// rebuild writes batch b (header h) with only the records kept. Everything
// Kafka clients check stays as it was: base offset, lastOffsetDelta (so
// the batch still covers its offsets and the consumer's position moves past
// them), max timestamp, producer id/epoch/base sequence, attributes (the
// same codec; uncompressed if it cannot be recompressed as it was). Length,
// record count and CRC are recomputed. Kafka's log cleaner does the same
// (MemoryRecords.filterTo keeps the base and last offsets of a v2 batch).
//
// horizon >= 0 sets the batch's delete horizon (KIP-534): attribute bit 6,
// the base timestamp field holds the horizon, and each record's timestamp
// delta is rebased on it so record timestamps are unchanged.
func rebuild(b []byte, h kbatch.Header, kept []record, horizon int64) ([]byte, error) {
	var body []byte
	for _, r := range kept {
		if horizon < 0 {
			body = append(body, r.raw...)
			continue
		}
		nr, err := rebase(r.raw, h.BaseTimestamp, horizon)
		if err != nil {
			return nil, err
		}
		body = append(body, nr...)
	}
	attrs := uint16(h.Attributes)
	if horizon >= 0 {
		attrs |= attrDeleteHorizon
	}
	if c := h.Codec(); c != kbatch.CodecNone {
		cmp := compressors[c]
		var buf bytes.Buffer
		var got kgo.CompressionCodecType = -1
		var z []byte
		if cmp != nil {
			z, got = cmp.Compress(&buf, body)
		}
		if cmp != nil && int(got) == c {
			body = append([]byte(nil), z...)
		} else {
			attrs &^= kbatch.AttrCompressionMask
		}
	}
	out := make([]byte, kbatch.HeaderSize, kbatch.HeaderSize+len(body))
	copy(out, b[:kbatch.HeaderSize])
	out = append(out, body...)
	be := binary.BigEndian
	be.PutUint32(out[8:], uint32(len(out)-12))
	be.PutUint16(out[21:], attrs)
	if horizon >= 0 {
		be.PutUint64(out[27:], uint64(horizon))
	}
	be.PutUint32(out[57:], uint32(len(kept)))
	be.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out, nil
}

// rebase re-encodes record raw (length prefix included) with its
// timestamp delta relative to newBase instead of oldBase.
func rebase(raw []byte, oldBase, newBase int64) ([]byte, error) {
	_, k := binary.Varint(raw)
	if k <= 0 || len(raw) < k+1 {
		return nil, fmt.Errorf("%w: record length", kbatch.ErrCorrupt)
	}
	body := raw[k:]
	delta, n := binary.Varint(body[1:])
	if n <= 0 {
		return nil, fmt.Errorf("%w: record timestamp", kbatch.ErrCorrupt)
	}
	nb := append([]byte{body[0]}, binary.AppendVarint(nil, oldBase+delta-newBase)...)
	nb = append(nb, body[1+n:]...)
	return append(binary.AppendVarint(nil, int64(len(nb))), nb...), nil
}

// NullKeyRecord is the index of the first record of batch b (header h)
// without a key, -1 when every record has one. A compacted topic refuses
// such a batch at produce time, as Kafka's LogValidator does ("Compacted
// topic cannot accept message without key"): compaction keeps the last
// record per key, and a keyless record has none.
func NullKeyRecord(b []byte, h kbatch.Header) (int, error) {
	recs, err := records(b, h)
	if err != nil {
		return -1, err
	}
	for i, r := range recs {
		if r.keyNull {
			return i, nil
		}
	}
	return -1, nil
}
