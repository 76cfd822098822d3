package kop

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/pulsar/pb"
)

// maxDecompressed bounds what one batch may decompress to, in either
// direction, so a small hostile batch cannot make the broker allocate
// without bound.
const maxDecompressed = 128 << 20

var errTooBig = fmt.Errorf("kop: batch decompresses to more than %d bytes", maxDecompressed)

// Codec pairs. A Kafka batch is stored with the Pulsar codec of the same
// algorithm (gzip has no Pulsar twin; ZLIB is the same deflate stream in a
// different wrapper), so compression survives the projection.
func pulsarCodecFor(kafkaCodec int) pb.CompressionType {
	switch kafkaCodec {
	case kbatch.CodecGzip:
		return pb.CompressionType_ZLIB
	case kbatch.CodecSnappy:
		return pb.CompressionType_SNAPPY
	case kbatch.CodecLZ4:
		return pb.CompressionType_LZ4
	case kbatch.CodecZstd:
		return pb.CompressionType_ZSTD
	}
	return pb.CompressionType_NONE
}

var (
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
	zstdDec     *zstd.Decoder
)

func zstdCodecs() (*zstd.Encoder, *zstd.Decoder) {
	zstdEncOnce.Do(func() {
		zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed))
	})
	return zstdEnc, zstdDec
}

func readBounded(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDecompressed {
		return nil, errTooBig
	}
	return b, nil
}

// compressPulsar compresses a batch body with a Pulsar codec (the formats
// Pulsar clients decode: LZ4 and SNAPPY raw blocks, a ZLIB stream, a ZSTD
// frame).
func compressPulsar(c pb.CompressionType, body []byte) ([]byte, error) {
	switch c {
	case pb.CompressionType_NONE:
		return body, nil
	case pb.CompressionType_LZ4:
		dst := make([]byte, lz4.CompressBlockBound(len(body)))
		var comp lz4.Compressor // a destination of CompressBlockBound always fits
		n, err := comp.CompressBlock(body, dst)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("kop: lz4 could not encode %d bytes: %v", len(body), err)
		}
		return dst[:n], nil
	case pb.CompressionType_ZLIB:
		var buf bytes.Buffer
		w := zlib.NewWriter(&buf)
		if _, err := w.Write(body); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case pb.CompressionType_ZSTD:
		enc, _ := zstdCodecs()
		return enc.EncodeAll(body, nil), nil
	case pb.CompressionType_SNAPPY:
		return snappy.Encode(nil, body), nil
	}
	return nil, fmt.Errorf("kop: unknown Pulsar compression %v", c)
}

// decompressPulsar undoes a Pulsar codec; size is the metadata's
// uncompressed_size.
func decompressPulsar(c pb.CompressionType, body []byte, size int) ([]byte, error) {
	if c == pb.CompressionType_NONE {
		return body, nil
	}
	if size < 0 || size > maxDecompressed {
		return nil, errTooBig
	}
	switch c {
	case pb.CompressionType_LZ4:
		dst := make([]byte, size)
		n, err := lz4.UncompressBlock(body, dst)
		if err != nil {
			return nil, fmt.Errorf("kop: lz4: %w", err)
		}
		return dst[:n], nil
	case pb.CompressionType_ZLIB:
		r, err := zlib.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("kop: zlib: %w", err)
		}
		return readBounded(r)
	case pb.CompressionType_ZSTD:
		_, dec := zstdCodecs()
		return dec.DecodeAll(body, make([]byte, 0, size))
	case pb.CompressionType_SNAPPY:
		n, err := snappy.DecodedLen(body)
		if err != nil || n > maxDecompressed {
			return nil, fmt.Errorf("kop: snappy: bad length (%v)", err)
		}
		return snappy.Decode(nil, body)
	}
	return nil, fmt.Errorf("kop: unknown Pulsar compression %v", c)
}

// xerialMagic starts a snappy stream in the framing the Java Kafka client
// writes (snappy-java's SnappyOutputStream).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompressKafka undoes a Kafka record-batch codec, bounded.
func decompressKafka(codec int, body []byte) ([]byte, error) {
	switch codec {
	case kbatch.CodecNone:
		return body, nil
	case kbatch.CodecGzip:
		r, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("kop: gzip: %w", err)
		}
		return readBounded(r)
	case kbatch.CodecLZ4:
		return readBounded(lz4.NewReader(bytes.NewReader(body)))
	case kbatch.CodecZstd:
		_, dec := zstdCodecs()
		return dec.DecodeAll(body, nil)
	case kbatch.CodecSnappy:
		if !bytes.HasPrefix(body, xerialMagic) {
			return snappyBlock(nil, body)
		}
		if len(body) < 16 {
			return nil, errors.New("kop: snappy: short xerial header")
		}
		var out []byte
		for rest := body[16:]; len(rest) > 0; {
			if len(rest) < 4 {
				return nil, errors.New("kop: snappy: truncated xerial chunk")
			}
			n := binary.BigEndian.Uint32(rest)
			if uint64(n) > uint64(len(rest)-4) {
				return nil, errors.New("kop: snappy: xerial chunk past end")
			}
			var err error
			if out, err = snappyBlock(out, rest[4:4+n]); err != nil {
				return nil, err
			}
			rest = rest[4+n:]
		}
		return out, nil
	}
	return nil, fmt.Errorf("kop: unknown Kafka compression codec %d", codec)
}

func snappyBlock(dst, block []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("kop: snappy: %w", err)
	}
	if len(dst)+n > maxDecompressed {
		return nil, errTooBig
	}
	b, err := snappy.Decode(nil, block)
	if err != nil {
		return nil, fmt.Errorf("kop: snappy: %w", err)
	}
	return append(dst, b...), nil
}
