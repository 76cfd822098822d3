package kop

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

// kafkaBatch encodes records with kmsg (franz-go's own codec) and, for a
// codec, kgo's compressor: an encoding independent of the one under test.
func kafkaBatch(t *testing.T, codec int8, pid int64, seq int32, base int64, recs []kmsg.Record) []byte {
	t.Helper()
	var body []byte
	for i := range recs {
		r := recs[i]
		r.OffsetDelta = int32(i)
		enc := r.AppendTo(nil)
		r.Length = int32(len(enc) - 1) // the zero length took one byte
		body = r.AppendTo(body)
	}
	attrs := int16(0)
	if codec != 0 {
		comp, err := kgo.DefaultCompressor(map[int8]kgo.CompressionCodec{1: kgo.GzipCompression(), 2: kgo.SnappyCompression(),
			3: kgo.Lz4Compression(), 4: kgo.ZstdCompression()}[codec])
		if err != nil {
			t.Fatal(err)
		}
		out, used := comp.Compress(&bytes.Buffer{}, body)
		if int8(used) != codec {
			t.Fatalf("compressor used %d, want %d", used, codec)
		}
		body = append([]byte(nil), out...)
		attrs = int16(codec)
	}
	var maxTs int64
	for _, r := range recs {
		maxTs = max(maxTs, base+r.TimestampDelta64)
	}
	rb := kmsg.RecordBatch{Length: int32(49 + len(body)), PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: base, MaxTimestamp: maxTs, ProducerID: pid,
		ProducerEpoch: 0, FirstSequence: seq, NumRecords: int32(len(recs)), Records: body}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	if _, err := kbatch.ValidateProduced(b); err != nil {
		t.Fatalf("test batch invalid: %v", err)
	}
	return b
}

func TestMappingRoundTrip(t *testing.T) {
	binKey := []byte{0xff, 0x00, 0xfe}
	recs := []kmsg.Record{
		{Key: []byte("k1"), Value: []byte("v1"), TimestampDelta64: 0, Headers: []kmsg.Header{{Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte("2")}}},
		{Key: binKey, Value: nil, TimestampDelta64: 5},
		{Key: nil, Value: []byte("no key"), TimestampDelta64: 9, Headers: []kmsg.Header{{Key: "empty", Value: []byte{}}}},
	}
	for _, codec := range []int8{0, 1, 2, 3, 4} {
		t.Run(fmt.Sprintf("codec%d", codec), func(t *testing.T) {
			b := kafkaBatch(t, codec, 1234, 7, 1_700_000_000_000, recs)
			h, got, err := parseKafkaBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			payload, err := pulsarEntryFromKafka(h, got, 1_800_000_000_000)
			if err != nil {
				t.Fatal(err)
			}
			// The Pulsar view: what a Pulsar consumer decodes.
			pl, err := wire.ParsePayload(payload)
			if err != nil {
				t.Fatal(err)
			}
			if pl.NumMessages() != 3 || pl.Metadata.GetProducerName() != "kafka-1234" || pl.Metadata.GetSequenceId() != 7 {
				t.Fatalf("metadata %v", pl.Metadata)
			}
			if codec != 0 && pl.Metadata.GetCompression() == pb.CompressionType_NONE {
				t.Fatal("compression dropped")
			}
			body, err := decompressPulsar(pl.Metadata.GetCompression(), pl.Body, int(pl.Metadata.GetUncompressedSize()))
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := wire.ParseBatch(body, 3)
			if err != nil {
				t.Fatal(err)
			}
			if m := msgs[0].Metadata; m.GetPartitionKey() != "k1" || string(m.OrderingKey) != "k1" || m.GetEventTime() != 1_700_000_000_000 ||
				len(m.Properties) != 2 || m.Properties[1].GetValue() != "2" || string(msgs[0].Payload) != "v1" {
				t.Fatalf("message 0: %v %q", m, msgs[0].Payload)
			}
			if m := msgs[1].Metadata; !m.GetPartitionKeyB64Encoded() || !bytes.Equal(m.OrderingKey, binKey) || !m.GetNullValue() {
				t.Fatalf("message 1: %v", m)
			}
			// Back to Kafka.
			back, err := kafkaRecordsFromPulsar(payload, 3)
			if err != nil {
				t.Fatal(err)
			}
			kb := buildKafkaBatch(40, 3, back)
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(kb); err != nil {
				t.Fatal(err)
			}
			if kbatch.CheckCRC(kb) != nil || rb.FirstOffset != 40 || rb.NumRecords != 3 || rb.LastOffsetDelta != 2 {
				t.Fatalf("batch header %+v", rb)
			}
			rd := rb.Records
			for i, want := range recs {
				var r kmsg.Record
				if err := r.ReadFrom(rd); err != nil {
					t.Fatal(err)
				}
				rd = rd[int(r.Length)+varintLen(int64(r.Length)):]
				if !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) ||
					rb.FirstTimestamp+r.TimestampDelta64 != 1_700_000_000_000+want.TimestampDelta64 || int(r.OffsetDelta) != i ||
					len(r.Headers) != len(want.Headers) {
					t.Fatalf("record %d: %+v, want %+v", i, r, want)
				}
				for j := range want.Headers {
					if r.Headers[j].Key != want.Headers[j].Key || !bytes.Equal(r.Headers[j].Value, want.Headers[j].Value) {
						t.Fatalf("record %d header %d: %+v", i, j, r.Headers[j])
					}
				}
			}
		})
	}
}

func varintLen(v int64) int { return len(binary.AppendVarint(nil, v)) }

func TestPulsarOnlyEntriesMap(t *testing.T) {
	// A non-batched Pulsar message: one record from the metadata.
	md := &pb.MessageMetadata{ProducerName: strPtr("p"), SequenceId: u64(1), PublishTime: u64(1000), PartitionKey: strPtr("key"),
		EventTime: u64(900), Properties: []*pb.KeyValue{{Key: strPtr("a"), Value: strPtr("b")}}}
	msg, _ := wire.BuildMessage(md, []byte("hello"))
	recs, err := kafkaRecordsFromPulsar(msg, 1)
	if err != nil || len(recs) != 1 || string(recs[0].key) != "key" || string(recs[0].value) != "hello" || recs[0].timestamp != 900 ||
		string(recs[0].headers[0].key) != "a" {
		t.Fatalf("single message: %+v %v", recs, err)
	}
	// Without event time the publish time is the timestamp.
	md.EventTime = nil
	msg, _ = wire.BuildMessage(md, []byte("hello"))
	if recs, _ := kafkaRecordsFromPulsar(msg, 1); recs[0].timestamp != 1000 {
		t.Fatalf("timestamp %d", recs[0].timestamp)
	}
	// A count that disagrees with the stream is refused, never guessed.
	if _, err := kafkaRecordsFromPulsar(msg, 2); err == nil {
		t.Fatal("count mismatch accepted")
	}
	// Corrupt bytes are refused.
	bad := append([]byte(nil), msg...)
	bad[len(bad)-1] ^= 1
	if _, err := kafkaRecordsFromPulsar(bad, 1); err == nil {
		t.Fatal("checksum mismatch accepted")
	}
	// A marker entry: an empty batch still covering its offsets.
	md.MarkerType = i32(1)
	msg, _ = wire.BuildMessage(md, nil)
	recs, err = kafkaRecordsFromPulsar(msg, 1)
	if err != nil || len(recs) != 0 {
		t.Fatalf("marker: %v %v", recs, err)
	}
	kb := buildKafkaBatch(7, 1, recs)
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(kb); err != nil || rb.NumRecords != 0 || rb.LastOffsetDelta != 0 || rb.FirstOffset != 7 {
		t.Fatalf("empty batch %+v %v", rb, err)
	}
}

func TestHostileKafkaBatches(t *testing.T) {
	good := kafkaBatch(t, 0, -1, -1, 1, []kmsg.Record{{Value: []byte("x")}})
	for i := kbatch.HeaderSize; i < len(good); i++ {
		b := append([]byte(nil), good[:i]...)
		_, _, _ = parseKafkaBatch(b) // must not panic
	}
	// A zstd bomb is bounded.
	huge := make([]byte, maxDecompressed+1024)
	comp, _ := kgo.DefaultCompressor(kgo.ZstdCompression())
	z, _ := comp.Compress(&bytes.Buffer{}, huge)
	if _, err := decompressKafka(kbatch.CodecZstd, z); err == nil {
		t.Fatal("zstd bomb decompressed")
	}
}

func strPtr(s string) *string { return &s }
func u64(v uint64) *uint64    { return &v }
func i32(v int32) *int32      { return &v }
