package kop

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

// The payload mapping. A stream can be projected only when its entry
// format (the stream attribute managedledger.AttrEntryFormat, fixed at
// creation) is one this table maps; any other stream is refused with
// kstore.ErrUnknownPayloadFormat, never converted by guessing.
//
// Mapping 1, for managedledger.EntryFormatV2 (one Pulsar entry per stream
// entry, one offset per message):
//
//	Kafka RecordBatch           Pulsar entry (batch container)
//	one batch of n records  <-> one entry, num_messages_in_batch = n, offsets [o, o+n)
//	record i (offset o+i)   <-> batch message i
//	key (bytes)              -> partition_key (UTF-8 as is, else base64 with
//	                            partition_key_b64_encoded) and ordering_key (raw)
//	key                     <-  partition_key (base64-decoded when flagged),
//	                            else ordering_key, else null
//	value / null value      <-> payload / null_value
//	headers (in order)      <-> properties (in order; a null header value
//	                            becomes "")
//	timestamp                -> event_time; publish_time = append time
//	timestamp               <-  event_time, else the entry's publish_time
//	compression codec        -> the same algorithm (gzip -> ZLIB); Kafka
//	                            batches are served uncompressed
//	producer id, sequence    -> producer_name "kafka-<id>", sequence_id
//
// A non-batched Pulsar entry is a batch of one record (its metadata-level
// key, properties and event time). Chunks and encrypted messages are served
// as records carrying the raw chunk / ciphertext with headers
// pulsar.chunk.uuid, pulsar.chunk.id, pulsar.chunk.total and
// pulsar.encrypted=true; broker markers become an empty batch (the offsets
// are skipped, as Pulsar consumers never see markers).
var mappings = map[string]int{managedledger.EntryFormatV2: 1}

type kafkaHeader struct{ key, value []byte }

type kafkaRecord struct {
	key, value []byte // nil = null
	headers    []kafkaHeader
	timestamp  int64
}

var errMapping = errors.New("kop: entry does not map")

// parseKafkaBatch decodes the records of one validated RecordBatch v2.
func parseKafkaBatch(b []byte) (kbatch.Header, []kafkaRecord, error) {
	h, err := kbatch.ParseHeader(b)
	if err != nil {
		return h, nil, err
	}
	if h.TotalSize() > len(b) || h.NumRecords < 0 {
		return h, nil, fmt.Errorf("%w: truncated batch", kbatch.ErrCorrupt)
	}
	body, err := decompressKafka(h.Codec(), b[kbatch.HeaderSize:h.TotalSize()])
	if err != nil {
		return h, nil, fmt.Errorf("%w: %v", kbatch.ErrCorrupt, err)
	}
	if int64(h.NumRecords) > int64(len(body)) {
		return h, nil, fmt.Errorf("%w: %d records in %d bytes", kbatch.ErrCorrupt, h.NumRecords, len(body))
	}
	logAppend := h.Attributes&kbatch.AttrLogAppendTime != 0
	recs := make([]kafkaRecord, 0, h.NumRecords)
	r := reader{b: body}
	for i := int32(0); i < h.NumRecords; i++ {
		n := r.varint()
		if r.err != nil || n < 0 || n > int64(len(r.b)) {
			return h, nil, fmt.Errorf("%w: record %d length", kbatch.ErrCorrupt, i)
		}
		rr := reader{b: r.b[:n]}
		r.b = r.b[n:]
		rr.skip(1) // attributes
		tsDelta := rr.varint()
		rr.varint() // offset delta: records are dense in a produced batch
		rec := kafkaRecord{key: rr.varbytes(), value: rr.varbytes(), timestamp: h.BaseTimestamp + tsDelta}
		if logAppend {
			rec.timestamp = h.MaxTimestamp
		}
		nh := rr.varint()
		if nh < 0 || nh > int64(len(rr.b)) {
			return h, nil, fmt.Errorf("%w: record %d header count", kbatch.ErrCorrupt, i)
		}
		for j := int64(0); j < nh && rr.err == nil; j++ {
			k := rr.varbytes()
			rec.headers = append(rec.headers, kafkaHeader{key: k, value: rr.varbytes()})
		}
		if rr.err != nil || len(rr.b) != 0 {
			return h, nil, fmt.Errorf("%w: record %d framing", kbatch.ErrCorrupt, i)
		}
		recs = append(recs, rec)
	}
	return h, recs, nil
}

// pulsarEntryFromKafka renders a Kafka batch as the stored payload of one
// Pulsar entry: broker-entry metadata (broker timestamp) + a checksummed
// batch container.
func pulsarEntryFromKafka(h kbatch.Header, recs []kafkaRecord, now int64) ([]byte, error) {
	var body []byte
	var key []byte
	sameKey := len(recs) > 0 && recs[0].key != nil
	for i, r := range recs {
		smm := &pb.SingleMessageMetadata{PayloadSize: proto.Int32(int32(len(r.value)))}
		if r.key != nil {
			setKey(&smm.PartitionKey, &smm.PartitionKeyB64Encoded, &smm.OrderingKey, r.key)
		}
		if sameKey && string(r.key) != string(recs[0].key) {
			sameKey = false
		}
		if r.value == nil {
			smm.NullValue = proto.Bool(true)
		}
		if r.timestamp > 0 {
			smm.EventTime = proto.Uint64(uint64(r.timestamp))
		}
		if h.BaseSequence >= 0 {
			smm.SequenceId = proto.Uint64(uint64(int64(h.BaseSequence) + int64(i)))
		}
		for _, hd := range r.headers {
			smm.Properties = append(smm.Properties, &pb.KeyValue{Key: proto.String(string(hd.key)), Value: proto.String(string(hd.value))})
		}
		size := proto.Size(smm)
		body = binary.BigEndian.AppendUint32(body, uint32(size))
		body, _ = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(body, smm)
		body = append(body, r.value...)
	}
	if sameKey {
		key = recs[0].key
	}
	md := &pb.MessageMetadata{
		ProducerName:       proto.String("kafka"),
		SequenceId:         proto.Uint64(0),
		PublishTime:        proto.Uint64(uint64(now)),
		NumMessagesInBatch: proto.Int32(int32(len(recs))),
	}
	if h.ProducerID >= 0 {
		md.ProducerName = proto.String("kafka-" + strconv.FormatInt(h.ProducerID, 10))
	}
	if h.BaseSequence >= 0 {
		md.SequenceId = proto.Uint64(uint64(h.BaseSequence))
		md.HighestSequenceId = proto.Uint64(uint64(h.LastSequence()))
	}
	if key != nil {
		// One key for the whole batch: Key_Shared routes it like a
		// key-batched Pulsar producer's entry.
		setKey(&md.PartitionKey, &md.PartitionKeyB64Encoded, &md.OrderingKey, key)
	}
	if c := pulsarCodecFor(h.Codec()); c != pb.CompressionType_NONE {
		comp, err := compressPulsar(c, body)
		if err != nil {
			return nil, err
		}
		md.Compression = c.Enum()
		md.UncompressedSize = proto.Uint32(uint32(len(body)))
		body = comp
	}
	msg, err := wire.BuildMessage(md, body)
	if err != nil {
		return nil, err
	}
	out := wire.AppendBrokerEntryMetadata(make([]byte, 0, 16+len(msg)), &pb.BrokerEntryMetadata{BrokerTimestamp: proto.Uint64(uint64(now))})
	return append(out, msg...), nil
}

func setKey(pk **string, b64 **bool, ok *[]byte, key []byte) {
	if utf8.Valid(key) {
		*pk = proto.String(string(key))
	} else {
		*pk = proto.String(base64.StdEncoding.EncodeToString(key))
		*b64 = proto.Bool(true)
	}
	*ok = append([]byte(nil), key...)
}

func keyOf(pk *string, b64 bool, orderingKey []byte) []byte {
	switch {
	case pk != nil && b64:
		if k, err := base64.StdEncoding.DecodeString(*pk); err == nil {
			return k
		}
		return []byte(*pk)
	case pk != nil:
		return []byte(*pk)
	case orderingKey != nil:
		return orderingKey
	}
	return nil
}

// kafkaRecordsFromPulsar renders a stored Pulsar entry covering count
// offsets as Kafka records. A marker entry yields no records.
func kafkaRecordsFromPulsar(payload []byte, count int64) ([]kafkaRecord, error) {
	pl, err := wire.ParsePayload(payload)
	if err != nil {
		return nil, err
	}
	md := pl.Metadata
	if int64(pl.NumMessages()) != count {
		return nil, fmt.Errorf("%w: entry has %d messages, the stream counts %d offsets", errMapping, pl.NumMessages(), count)
	}
	if md.MarkerType != nil {
		return nil, nil
	}
	publish := int64(md.GetPublishTime())
	var extra []kafkaHeader
	if md.Uuid != nil {
		extra = append(extra, kafkaHeader{[]byte("pulsar.chunk.uuid"), []byte(md.GetUuid())},
			kafkaHeader{[]byte("pulsar.chunk.id"), []byte(strconv.Itoa(int(md.GetChunkId())))},
			kafkaHeader{[]byte("pulsar.chunk.total"), []byte(strconv.Itoa(int(md.GetNumChunksFromMsg())))})
	}
	encrypted := isEncrypted(md)
	if encrypted {
		extra = append(extra, kafkaHeader{[]byte("pulsar.encrypted"), []byte("true")})
	}
	body := pl.Body
	if !encrypted {
		if body, err = decompressPulsar(md.GetCompression(), pl.Body, int(md.GetUncompressedSize())); err != nil {
			return nil, err
		}
	}
	ts := func(event uint64) int64 {
		if event > 0 {
			return int64(event)
		}
		return publish
	}
	if !pl.Batched() || encrypted {
		rec := kafkaRecord{key: keyOf(md.PartitionKey, md.GetPartitionKeyB64Encoded(), md.OrderingKey), value: body,
			timestamp: ts(md.GetEventTime()), headers: propsToHeaders(md.Properties, extra)}
		if md.GetNullValue() {
			rec.value = nil
		}
		// An encrypted batch cannot be split without the key: one record
		// holds the whole ciphertext; its other offsets carry no record.
		return []kafkaRecord{rec}, nil
	}
	msgs, err := wire.ParseBatch(body, pl.NumMessages())
	if err != nil {
		return nil, err
	}
	recs := make([]kafkaRecord, len(msgs))
	for i, m := range msgs {
		s := m.Metadata
		recs[i] = kafkaRecord{key: keyOf(s.PartitionKey, s.GetPartitionKeyB64Encoded(), s.OrderingKey), value: m.Payload,
			timestamp: ts(s.GetEventTime()), headers: propsToHeaders(s.Properties, extra)}
		if s.GetNullValue() {
			recs[i].value = nil
		}
	}
	return recs, nil
}

// isEncrypted reports whether the entry carries encryption keys
// (MessageMetadata field 13, encryption_keys, which the broker's trimmed
// protocol definition keeps as an unknown field).
func isEncrypted(md *pb.MessageMetadata) bool {
	b := md.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		if num == 13 {
			return true
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return false
		}
		b = b[n+m:]
	}
	return false
}

func propsToHeaders(props []*pb.KeyValue, extra []kafkaHeader) []kafkaHeader {
	if len(props)+len(extra) == 0 {
		return nil
	}
	out := make([]kafkaHeader, 0, len(props)+len(extra))
	for _, kv := range props {
		out = append(out, kafkaHeader{key: []byte(kv.GetKey()), value: []byte(kv.GetValue())})
	}
	return append(out, extra...)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// buildKafkaBatch encodes records as one uncompressed RecordBatch v2
// covering [base, base+span): record i has offset base+i. span may exceed
// len(recs) (an entry whose offsets carry no records: the batch is empty
// and consumers move past it).
func buildKafkaBatch(base, span int64, recs []kafkaRecord) []byte {
	size := kbatch.HeaderSize
	for _, r := range recs {
		size += 32 + len(r.key) + len(r.value)
		for _, h := range r.headers {
			size += 10 + len(h.key) + len(h.value)
		}
	}
	b := make([]byte, kbatch.HeaderSize, size)
	var baseTs, maxTs int64 = -1, -1
	if len(recs) > 0 {
		baseTs = recs[0].timestamp
		for _, r := range recs {
			baseTs = min(baseTs, r.timestamp)
			maxTs = max(maxTs, r.timestamp)
		}
	}
	var rec []byte
	for i, r := range recs {
		rec = rec[:0]
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, r.timestamp-baseTs)
		rec = binary.AppendVarint(rec, int64(i))
		rec = appendVarbytes(rec, r.key)
		rec = appendVarbytes(rec, r.value)
		rec = binary.AppendVarint(rec, int64(len(r.headers)))
		for _, h := range r.headers {
			rec = appendVarbytes(rec, h.key)
			rec = appendVarbytes(rec, h.value)
		}
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(base))
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[12:], 0xffffffff) // partition leader epoch: none
	b[16] = 2                        // magic
	be.PutUint16(b[21:], 0)          // attributes: CreateTime, uncompressed
	be.PutUint32(b[23:], uint32(max(span, 1)-1))
	be.PutUint64(b[27:], uint64(baseTs))
	be.PutUint64(b[35:], uint64(maxTs))
	be.PutUint64(b[43:], ^uint64(0)) // producer id -1
	be.PutUint16(b[51:], 0xffff)     // producer epoch -1
	be.PutUint32(b[53:], 0xffffffff) // base sequence -1
	be.PutUint32(b[57:], uint32(len(recs)))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

func appendVarbytes(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}

// reader decodes Kafka varint framing; the first short read sets err.
type reader struct {
	b   []byte
	err error
}

func (r *reader) skip(n int) {
	if r.err != nil || n > len(r.b) {
		r.err = errMapping
		r.b = nil
		return
	}
	r.b = r.b[n:]
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errMapping
		r.b = nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varbytes() []byte {
	n := r.varint()
	if r.err != nil || n < 0 {
		return nil
	}
	if n > int64(len(r.b)) {
		r.err = errMapping
		r.b = nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}
