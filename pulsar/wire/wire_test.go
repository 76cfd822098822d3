package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/pulsar/pb"
)

func sendFrame(t testing.TB) []byte {
	md := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(7), PublishTime: proto.Uint64(1000),
		PartitionKey: proto.String("k")}
	msg, err := BuildMessage(md, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(7)}}
	f, err := AppendPayloadCommand(nil, cmd, msg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRoundTrip(t *testing.T) {
	frame := sendFrame(t)
	r := NewReader(bytes.NewReader(frame), DefaultMaxMessageSize+FramePadding)
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if f.Cmd.GetType() != pb.BaseCommand_SEND || f.Cmd.GetSend().GetSequenceId() != 7 {
		t.Fatalf("bad command %v", f.Cmd)
	}
	p, err := ParsePayload(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Body) != "hello" || p.NumMessages() != 1 || string(p.StickyKey()) != "k" {
		t.Fatalf("bad payload %+v", p)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("want EOF, got %v", err)
	}
	// With a broker-entry-metadata prefix the message part is unchanged.
	withBEM := AppendBrokerEntryMetadata(nil, &pb.BrokerEntryMetadata{BrokerTimestamp: proto.Uint64(5), Index: proto.Uint64(9)})
	withBEM = append(withBEM, f.Payload...)
	p2, err := ParsePayload(withBEM)
	if err != nil {
		t.Fatal(err)
	}
	if p2.BrokerEntryMetadata.GetIndex() != 9 || !bytes.Equal(p2.Message, f.Payload) {
		t.Fatalf("bad BEM parse %+v", p2)
	}
}

func TestBadInput(t *testing.T) {
	frame := sendFrame(t)
	// Corrupt the body byte: checksum mismatch, frame still decodes.
	bad := append([]byte(nil), frame...)
	bad[len(bad)-1] ^= 0xff
	f, err := NewReader(bytes.NewReader(bad), 1<<20).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePayload(f.Payload); !errors.Is(err, ErrChecksum) {
		t.Fatalf("want ErrChecksum, got %v", err)
	}
	// Truncated stream.
	if _, err := NewReader(bytes.NewReader(frame[:len(frame)-3]), 1<<20).ReadFrame(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("want ErrTruncated, got %v", err)
	}
	// Oversized frame.
	big := binary.BigEndian.AppendUint32(nil, 1<<30)
	if _, err := NewReader(bytes.NewReader(big), 1<<20).ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("want ErrFrameTooLarge, got %v", err)
	}
	// Command size past the frame.
	lie := binary.BigEndian.AppendUint32(nil, 8)
	lie = binary.BigEndian.AppendUint32(lie, 100)
	lie = append(lie, 0, 0, 0, 0)
	if _, err := NewReader(bytes.NewReader(lie), 1<<20).ReadFrame(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("want ErrTruncated, got %v", err)
	}
}

func TestBatch(t *testing.T) {
	var body []byte
	for i, k := range []string{"a", "a"} {
		smm := &pb.SingleMessageMetadata{PayloadSize: proto.Int32(2), PartitionKey: proto.String(k), SequenceId: proto.Uint64(uint64(i))}
		b, _ := proto.Marshal(smm)
		body = binary.BigEndian.AppendUint32(body, uint32(len(b)))
		body = append(body, b...)
		body = append(body, 'x', byte('0'+i))
	}
	md := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1), NumMessagesInBatch: proto.Int32(2)}
	msg, _ := BuildMessage(md, body)
	p, err := ParsePayload(msg)
	if err != nil {
		t.Fatal(err)
	}
	// A batch without a batch-level key routes by producer name and
	// sequence id, as Pulsar 4.x does (not by the first message's key).
	if p.NumMessages() != 2 || string(p.StickyKey()) != "p-0" {
		t.Fatalf("batch view %d %q", p.NumMessages(), p.StickyKey())
	}
	ms, err := ParseBatch(p.Body, 2)
	if err != nil || len(ms) != 2 || string(ms[1].Payload) != "x1" {
		t.Fatalf("ParseBatch %v %v", ms, err)
	}
}
