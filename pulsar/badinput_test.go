package pulsar

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

// rawConn is a hand-driven Pulsar connection for bad-input tests.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *wire.Reader
}

func dialRaw(t *testing.T, b *broker) *rawConn {
	t.Helper()
	addr := strings.TrimPrefix(b.URL, "pulsar://")
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	rc := &rawConn{t: t, nc: nc, r: wire.NewReader(nc, 16<<20)}
	rc.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(20)}})
	if f := rc.read(); f.Cmd.GetType() != pb.BaseCommand_CONNECTED {
		t.Fatalf("want CONNECTED, got %v", f.Cmd.GetType())
	}
	return rc
}

func (rc *rawConn) send(cmd *pb.BaseCommand, payload ...[]byte) {
	rc.t.Helper()
	b, err := wire.AppendPayloadCommand(nil, cmd, payload...)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.write(b)
}

func (rc *rawConn) write(b []byte) {
	rc.t.Helper()
	if _, err := rc.nc.Write(b); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) read() wire.Frame {
	rc.t.Helper()
	for {
		f, err := rc.r.ReadFrame()
		if err != nil {
			rc.t.Fatal(err)
		}
		if f.Cmd.GetType() == pb.BaseCommand_PING {
			continue
		}
		return f
	}
}

// expectClosed asserts that the broker closed the connection.
func (rc *rawConn) expectClosed() {
	rc.t.Helper()
	for {
		_, err := rc.r.ReadFrame()
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) || errors.Is(err, wire.ErrTruncated) || strings.Contains(err.Error(), "reset") {
			return
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			rc.t.Fatal("broker kept a connection open after bad input")
		}
		return
	}
}

func (rc *rawConn) ping() {
	rc.t.Helper()
	rc.send(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
	for {
		f, err := rc.r.ReadFrame()
		if err != nil {
			rc.t.Fatal(err)
		}
		if f.Cmd.GetType() == pb.BaseCommand_PONG {
			return
		}
	}
}

func TestBadInputKeepsBrokerServing(t *testing.T) {
	b := startBroker(t, Config{})
	topic := newTopic("bad")

	// A healthy client works before, during and after the abuse.
	c := b.client(t)
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	sendOne := func(s string) {
		if _, err := p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: []byte(s)}); err != nil {
			t.Fatal(err)
		}
		m, err := cons.Receive(ctxT(t, 10*time.Second))
		if err != nil || string(m.Payload()) != s {
			t.Fatalf("healthy client: %v %v", m, err)
		}
		_ = cons.Ack(m)
	}
	sendOne("before")

	t.Run("bad checksum gets SEND_ERROR", func(t *testing.T) {
		rc := dialRaw(t, b)
		rc.send(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
			Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)}})
		if f := rc.read(); f.Cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
			t.Fatalf("want PRODUCER_SUCCESS, got %v %v", f.Cmd.GetType(), f.Cmd.GetError())
		}
		msg, _ := wire.BuildMessage(&pb.MessageMetadata{ProducerName: proto.String("raw"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1)}, []byte("x"))
		msg[len(msg)-1] ^= 0xff
		rc.send(&pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(0)}}, msg)
		f := rc.read()
		if f.Cmd.GetType() != pb.BaseCommand_SEND_ERROR || f.Cmd.GetSendError().GetError() != pb.ServerError_ChecksumError {
			t.Fatalf("want SEND_ERROR ChecksumError, got %v", f.Cmd)
		}
		rc.ping() // still usable
	})

	t.Run("unknown commands get an error and keep the connection", func(t *testing.T) {
		rc := dialRaw(t, b)
		// NEW_TXN (not served) with request_id 7 inside its sub-message.
		sub := protowire.AppendTag(nil, 1, protowire.VarintType)
		sub = protowire.AppendVarint(sub, 7)
		raw := protowire.AppendTag(nil, 1, protowire.VarintType)
		raw = protowire.AppendVarint(raw, uint64(pb.BaseCommand_NEW_TXN))
		raw = protowire.AppendTag(raw, 50, protowire.BytesType)
		raw = protowire.AppendBytes(raw, sub)
		frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(raw)))
		frame = binary.BigEndian.AppendUint32(frame, uint32(len(raw)))
		rc.write(append(frame, raw...))
		f := rc.read()
		if f.Cmd.GetType() != pb.BaseCommand_ERROR || f.Cmd.GetError().GetRequestId() != 7 {
			t.Fatalf("want ERROR for request 7, got %v", f.Cmd)
		}
		// A command type no Pulsar version defines.
		raw = protowire.AppendTag(nil, 1, protowire.VarintType)
		raw = protowire.AppendVarint(raw, 99)
		frame = binary.BigEndian.AppendUint32(nil, uint32(4+len(raw)))
		frame = binary.BigEndian.AppendUint32(frame, uint32(len(raw)))
		rc.write(append(frame, raw...))
		if f := rc.read(); f.Cmd.GetType() != pb.BaseCommand_ERROR {
			t.Fatalf("want ERROR for type 99, got %v", f.Cmd)
		}
		rc.ping()
	})

	t.Run("oversized frame closes the connection", func(t *testing.T) {
		rc := dialRaw(t, b)
		rc.write(binary.BigEndian.AppendUint32(nil, 1<<30))
		rc.expectClosed()
	})

	t.Run("truncated frame closes the connection", func(t *testing.T) {
		rc := dialRaw(t, b)
		frame := binary.BigEndian.AppendUint32(nil, 100)
		frame = append(frame, 0, 0, 0, 5, 8, 18)
		rc.write(frame)
		_ = rc.nc.(*net.TCPConn).CloseWrite()
		rc.expectClosed()
	})

	t.Run("garbage closes the connection", func(t *testing.T) {
		rc := dialRaw(t, b)
		rc.write([]byte{0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
		rc.expectClosed()
	})

	t.Run("command before CONNECT closes the connection", func(t *testing.T) {
		addr := strings.TrimPrefix(b.URL, "pulsar://")
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		rc := &rawConn{t: t, nc: nc, r: wire.NewReader(nc, 1<<20)}
		rc.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP.Enum(), LookupTopic: &pb.CommandLookupTopic{Topic: proto.String(topic), RequestId: proto.Uint64(1)}})
		rc.expectClosed()
	})

	sendOne("after")
}
