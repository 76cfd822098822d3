package pulsar

import (
	"encoding/binary"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
	"github.com/nereusstream/nereus-go/stream"
)

type tmsg struct {
	key     *string
	payload string
}

func k(s string) *string { return &s }

// entry builds a stored entry: one message, or an uncompressed batch.
func entry(t *testing.T, off int64, batch bool, ms ...tmsg) stream.ReadEntry {
	t.Helper()
	md := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(1)}
	var body []byte
	if !batch {
		md.PartitionKey = ms[0].key
		body = []byte(ms[0].payload)
	} else {
		md.NumMessagesInBatch = proto.Int32(int32(len(ms)))
		for _, m := range ms {
			smm, _ := proto.Marshal(&pb.SingleMessageMetadata{PartitionKey: m.key, PayloadSize: proto.Int32(int32(len(m.payload)))})
			body = binary.BigEndian.AppendUint32(body, uint32(len(smm)))
			body = append(body, smm...)
			body = append(body, m.payload...)
		}
	}
	msg, err := wire.BuildMessage(md, body)
	if err != nil {
		t.Fatal(err)
	}
	// Stored entries may carry broker entry metadata in front.
	p := append(wire.AppendBrokerEntryMetadata(nil, &pb.BrokerEntryMetadata{Index: proto.Uint64(uint64(off))}), msg...)
	return stream.ReadEntry{Offset: off, RecordCount: uint32(len(ms)), Payload: p}
}

// TestPulsarCompactor: latest per key, empty payload deletes, keyless
// dropped, batch slots compacted out in place (ids keep), the broker entry
// metadata prefix and checksums intact.
func TestPulsarCompactor(t *testing.T) {
	es := []stream.ReadEntry{
		entry(t, 0, false, tmsg{k("a"), "a1"}),
		entry(t, 1, true, tmsg{k("b"), "b1"}, tmsg{k("a"), "a2"}, tmsg{nil, "nokey"}, tmsg{k("c"), "c1"}),
		entry(t, 5, false, tmsg{k("b"), ""}), // deletes b
		entry(t, 6, false, tmsg{nil, "nokey"}),
	}
	c := newPulsarCompactor(0)
	for _, e := range es {
		if ok, err := c.Scan(e); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	var out [][]byte
	for _, e := range es {
		p, err := c.Rewrite(e, true)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if out[0] != nil || out[2] != nil || out[3] != nil {
		t.Fatalf("superseded, deleting and keyless single messages kept: %v", out)
	}
	pl, err := wire.ParsePayload(out[1]) // checks the checksum
	if err != nil {
		t.Fatal(err)
	}
	if pl.BrokerEntryMetadata.GetIndex() != 1 {
		t.Fatalf("broker entry metadata lost: %v", pl.BrokerEntryMetadata)
	}
	sms, err := wire.ParseBatch(pl.Body, pl.NumMessages())
	if err != nil || len(sms) != 4 {
		t.Fatalf("batch: %d messages, %v", len(sms), err)
	}
	want := []string{"", "a2", "", "c1"} // "" = compacted out
	for i, sm := range sms {
		out := sm.Metadata.GetCompactedOut()
		if out != (want[i] == "") || string(sm.Payload) != want[i] {
			t.Fatalf("slot %d: compacted out %v, payload %q; want %q", i, out, sm.Payload, want[i])
		}
	}
	// A full key map stops the scan before the entry that would overflow it.
	c = newPulsarCompactor(2)
	if ok, _ := c.Scan(es[0]); !ok {
		t.Fatal("first entry refused")
	}
	if ok, _ := c.Scan(es[1]); ok {
		t.Fatal("overflowing entry accepted")
	}
}
