// Package wire is the Pulsar binary protocol framing: reading and writing
// simple and payload command frames, the 0x0e01 magic with its CRC-32C
// checksum, the 0x0e02 broker-entry-metadata prefix, and the batch payload
// layout. It is a pure codec over byte slices and io streams.
//
// It owns frame validation: every byte read from a socket passes through
// DecodeFrame or Reader.ReadFrame, which reject oversized, truncated and
// malformed frames with an error instead of panicking or allocating without
// bound. It must never hold broker state, touch storage, or trust a length
// field before checking it against the bytes actually present.
//
// Frame layout (all integers big-endian):
//
//	simple:  [u32 total][u32 cmdSize][BaseCommand]
//	payload: [u32 total][u32 cmdSize][BaseCommand][payload...]
//	payload = [u16 0x0e01][u32 crc32c][u32 metaSize][MessageMetadata][body]
//	          optionally preceded by [u16 0x0e02][u32 size][BrokerEntryMetadata]
//
// total counts every byte after itself; the CRC-32C (Castagnoli) covers
// [metaSize .. end of frame]. What Pulsar stores as an entry, and what Nereus
// stores as one stream entry, is the payload from its first magic onward.
package wire

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/pulsar/pb"
)

const (
	// MagicCRC32C introduces a checksummed message payload.
	MagicCRC32C uint16 = 0x0e01
	// MagicBrokerEntryMetadata introduces the broker-entry-metadata prefix.
	MagicBrokerEntryMetadata uint16 = 0x0e02
	// DefaultMaxMessageSize is the max_message_size the broker announces
	// (metadata + payload of one entry), as in Pulsar.
	DefaultMaxMessageSize = 5 << 20
	// FramePadding is added to the max message size to bound a whole frame
	// (command and envelope around the message), as clients do.
	FramePadding = 10 << 10
	// maxCommandSize bounds the BaseCommand part of any frame.
	maxCommandSize = 1 << 20
)

// Errors. A connection that produced one of them is not safe to keep
// reading (the stream position is unknown), except ErrChecksum and
// ErrMalformedPayload, which concern only the payload of a complete frame.
var (
	// ErrFrameTooLarge: the frame's size field exceeds the limit. The
	// connection must be closed (its remaining bytes cannot be trusted).
	ErrFrameTooLarge = errors.New("nereus/pulsar/wire: frame too large")
	// ErrTruncated: a size field points past the bytes present.
	ErrTruncated = errors.New("nereus/pulsar/wire: truncated frame")
	// ErrMalformed: the command does not decode.
	ErrMalformed = errors.New("nereus/pulsar/wire: malformed frame")
	// ErrMalformedPayload: the message payload (magic, metadata) is invalid.
	ErrMalformedPayload = errors.New("nereus/pulsar/wire: malformed message payload")
	// ErrChecksum: the payload's CRC-32C does not match its bytes.
	ErrChecksum = errors.New("nereus/pulsar/wire: payload checksum mismatch")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C computes the Castagnoli checksum Pulsar uses.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

var unmarshal = proto.UnmarshalOptions{AllowPartial: true, DiscardUnknown: false}

// Frame is one decoded frame.
type Frame struct {
	Cmd *pb.BaseCommand
	// UnknownType is the raw command type when Cmd.Type is not one this
	// codec knows (Cmd.Type is then nil).
	UnknownType int32
	// Payload is everything after the command (from the first magic on);
	// nil for a simple command. It aliases the frame buffer.
	Payload []byte
}

// DecodeFrame decodes a frame body: the bytes after the total-size field.
func DecodeFrame(body []byte) (Frame, error) {
	if len(body) < 4 {
		return Frame{}, fmt.Errorf("%w: %d bytes, no command size", ErrTruncated, len(body))
	}
	cmdSize := binary.BigEndian.Uint32(body)
	if cmdSize > maxCommandSize || uint64(cmdSize) > uint64(len(body)-4) {
		return Frame{}, fmt.Errorf("%w: command size %d, frame has %d", ErrTruncated, cmdSize, len(body)-4)
	}
	cmd := &pb.BaseCommand{}
	if err := unmarshal.Unmarshal(body[4:4+cmdSize], cmd); err != nil {
		return Frame{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	f := Frame{Cmd: cmd}
	if cmd.Type == nil {
		// A type number this codec does not know: keep the frame so the
		// broker can answer it with an error instead of dropping the
		// connection.
		t, ok := unknownVarint(cmd.ProtoReflect().GetUnknown(), 1)
		if !ok {
			return Frame{}, fmt.Errorf("%w: command without type", ErrMalformed)
		}
		f.UnknownType = int32(t)
	}
	if rest := body[4+cmdSize:]; len(rest) > 0 {
		f.Payload = rest
	}
	return f, nil
}

// Reader reads frames from a byte stream.
type Reader struct {
	r        *bufio.Reader
	maxFrame int
}

// NewReader returns a Reader that refuses frames whose total size exceeds
// maxFrame bytes.
func NewReader(r io.Reader, maxFrame int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), maxFrame: maxFrame}
}

// ReadFrame reads and decodes the next frame. The frame owns its buffer.
// io.EOF means the stream ended cleanly between frames.
func (r *Reader) ReadFrame() (Frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r.r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Frame{}, fmt.Errorf("%w: %v", ErrTruncated, err)
		}
		return Frame{}, err
	}
	total := binary.BigEndian.Uint32(hdr[:])
	if uint64(total) > uint64(r.maxFrame) {
		return Frame{}, fmt.Errorf("%w: %d bytes > %d", ErrFrameTooLarge, total, r.maxFrame)
	}
	body := make([]byte, total)
	if _, err := io.ReadFull(r.r, body); err != nil {
		return Frame{}, fmt.Errorf("%w: %v", ErrTruncated, err)
	}
	return DecodeFrame(body)
}

// AppendCommand appends a simple command frame to dst.
func AppendCommand(dst []byte, cmd *pb.BaseCommand) ([]byte, error) {
	return AppendPayloadCommand(dst, cmd)
}

// AppendPayloadCommand appends a frame made of cmd followed by the
// concatenation of payload parts (already in wire form).
func AppendPayloadCommand(dst []byte, cmd *pb.BaseCommand, payload ...[]byte) ([]byte, error) {
	size := proto.Size(cmd)
	plen := 0
	for _, p := range payload {
		plen += len(p)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+size+plen))
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	var err error
	dst, err = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, cmd)
	if err != nil {
		return nil, fmt.Errorf("nereus/pulsar/wire: marshal %v: %w", cmd.GetType(), err)
	}
	for _, p := range payload {
		dst = append(dst, p...)
	}
	return dst, nil
}

// Payload is a parsed view of a message payload (a stored entry).
type Payload struct {
	// BrokerEntryMetadata is the decoded 0x0e02 prefix, nil if absent.
	BrokerEntryMetadata *pb.BrokerEntryMetadata
	// Message is the payload from the 0x0e01 magic on: what clients
	// without broker-entry-metadata support receive.
	Message []byte
	// Metadata is the decoded MessageMetadata.
	Metadata *pb.MessageMetadata
	// Body is the (possibly compressed) message or batch bytes after the
	// metadata.
	Body []byte
}

// NumMessages is the number of messages in the entry (1 unless batched).
func (p *Payload) NumMessages() int {
	if p.Metadata.NumMessagesInBatch != nil && p.Metadata.GetNumMessagesInBatch() > 0 {
		return int(p.Metadata.GetNumMessagesInBatch())
	}
	return 1
}

// Batched reports whether the entry is a batch container.
func (p *Payload) Batched() bool { return p.Metadata.NumMessagesInBatch != nil }

// SplitBrokerEntryMetadata separates an optional 0x0e02 prefix from the
// message part. The prefix is decoded; its bytes are not checksummed.
func SplitBrokerEntryMetadata(b []byte) (*pb.BrokerEntryMetadata, []byte, error) {
	if len(b) < 2 || binary.BigEndian.Uint16(b) != MagicBrokerEntryMetadata {
		return nil, b, nil
	}
	if len(b) < 6 {
		return nil, nil, fmt.Errorf("%w: short broker entry metadata header", ErrMalformedPayload)
	}
	n := binary.BigEndian.Uint32(b[2:])
	if uint64(n) > uint64(len(b)-6) {
		return nil, nil, fmt.Errorf("%w: broker entry metadata size %d past end", ErrMalformedPayload, n)
	}
	bem := &pb.BrokerEntryMetadata{}
	if err := unmarshal.Unmarshal(b[6:6+n], bem); err != nil {
		return nil, nil, fmt.Errorf("%w: broker entry metadata: %v", ErrMalformedPayload, err)
	}
	return bem, b[6+n:], nil
}

// ParsePayload validates and decodes a message payload: optional
// broker-entry-metadata prefix, magic, checksum, metadata. A checksum
// mismatch is ErrChecksum; any structural problem is ErrMalformedPayload.
func ParsePayload(b []byte) (Payload, error) {
	bem, msg, err := SplitBrokerEntryMetadata(b)
	if err != nil {
		return Payload{}, err
	}
	if len(msg) < 10 {
		return Payload{}, fmt.Errorf("%w: %d bytes, need magic, checksum and metadata size", ErrMalformedPayload, len(msg))
	}
	if m := binary.BigEndian.Uint16(msg); m != MagicCRC32C {
		return Payload{}, fmt.Errorf("%w: magic 0x%04x, want 0x%04x", ErrMalformedPayload, m, MagicCRC32C)
	}
	if want, got := binary.BigEndian.Uint32(msg[2:]), CRC32C(msg[6:]); want != got {
		return Payload{}, fmt.Errorf("%w: frame says 0x%08x, bytes give 0x%08x", ErrChecksum, want, got)
	}
	metaSize := binary.BigEndian.Uint32(msg[6:])
	if uint64(metaSize) > uint64(len(msg)-10) {
		return Payload{}, fmt.Errorf("%w: metadata size %d past end", ErrMalformedPayload, metaSize)
	}
	md := &pb.MessageMetadata{}
	if err := unmarshal.Unmarshal(msg[10:10+metaSize], md); err != nil {
		return Payload{}, fmt.Errorf("%w: metadata: %v", ErrMalformedPayload, err)
	}
	if md.NumMessagesInBatch != nil && md.GetNumMessagesInBatch() < 0 {
		return Payload{}, fmt.Errorf("%w: negative batch size", ErrMalformedPayload)
	}
	return Payload{BrokerEntryMetadata: bem, Message: msg, Metadata: md, Body: msg[10+metaSize:]}, nil
}

// AppendBrokerEntryMetadata appends the 0x0e02 prefix for bem to dst.
func AppendBrokerEntryMetadata(dst []byte, bem *pb.BrokerEntryMetadata) []byte {
	size := proto.Size(bem)
	dst = binary.BigEndian.AppendUint16(dst, MagicBrokerEntryMetadata)
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	dst, _ = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, bem)
	return dst
}

// BuildMessage builds a checksummed message payload (from the 0x0e01 magic
// on) from metadata and body; tests and tools use it to make entries.
func BuildMessage(md *pb.MessageMetadata, body []byte) ([]byte, error) {
	mb, err := proto.Marshal(md)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 10+len(mb)+len(body))
	out = binary.BigEndian.AppendUint16(out, MagicCRC32C)
	out = append(out, 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(len(mb)))
	out = append(out, mb...)
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[2:], CRC32C(out[6:]))
	return out, nil
}

// SingleMessage is one message of an uncompressed batch.
type SingleMessage struct {
	Metadata *pb.SingleMessageMetadata
	Payload  []byte
}

// ParseBatch splits an uncompressed batch body into its n messages.
func ParseBatch(body []byte, n int) ([]SingleMessage, error) {
	if n < 0 || n > len(body) {
		return nil, fmt.Errorf("%w: batch of %d messages in %d bytes", ErrMalformedPayload, n, len(body))
	}
	out := make([]SingleMessage, 0, n)
	for i := 0; i < n; i++ {
		if len(body) < 4 {
			return nil, fmt.Errorf("%w: batch message %d truncated", ErrMalformedPayload, i)
		}
		sz := binary.BigEndian.Uint32(body)
		if uint64(sz) > uint64(len(body)-4) {
			return nil, fmt.Errorf("%w: batch message %d metadata past end", ErrMalformedPayload, i)
		}
		smm := &pb.SingleMessageMetadata{}
		if err := unmarshal.Unmarshal(body[4:4+sz], smm); err != nil {
			return nil, fmt.Errorf("%w: batch message %d: %v", ErrMalformedPayload, i, err)
		}
		body = body[4+sz:]
		ps := smm.GetPayloadSize()
		if ps < 0 || int64(ps) > int64(len(body)) {
			return nil, fmt.Errorf("%w: batch message %d payload past end", ErrMalformedPayload, i)
		}
		out = append(out, SingleMessage{Metadata: smm, Payload: body[:ps]})
		body = body[ps:]
	}
	return out, nil
}

// noneKey is Pulsar's sticky key for an entry without key, producer name
// or sequence id (Commands.NONE_KEY).
var noneKey = []byte("NONE_KEY")

// StickyKey returns the entry's Key_Shared routing key exactly as Pulsar
// 4.x resolves it (Commands.resolveStickyKey, from the entry's metadata
// only): the ordering key, else the partition key (base64-decoded when
// flagged), else "<producer name>-<sequence id>", else "NONE_KEY".
// Producers that batch by key give every message of a batch that key.
func (p *Payload) StickyKey() []byte {
	md := p.Metadata
	switch {
	case md.OrderingKey != nil:
		return md.OrderingKey
	case md.PartitionKey != nil:
		if md.GetPartitionKeyB64Encoded() {
			if k, err := base64.StdEncoding.DecodeString(md.GetPartitionKey()); err == nil {
				return k
			}
		}
		return []byte(md.GetPartitionKey())
	case md.ProducerName != nil && md.SequenceId != nil:
		return []byte(md.GetProducerName() + "-" + strconv.FormatUint(md.GetSequenceId(), 10))
	}
	return noneKey
}
