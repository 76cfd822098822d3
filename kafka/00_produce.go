package kafka

// Produce: v0-11 (v3+ served; v0-2 answered with UNSUPPORTED_VERSION)
//
// Behavior:
//   - Each partition's records must be exactly one RecordBatch v2 (magic 2),
//     as Kafka requires from v3 on. The batch is validated (framing, CRC-32C,
//     codec <= zstd, no control bit, recordCount/lastOffsetDelta, and for
//     uncompressed batches every record's framing and offset delta) and
//     stored byte-for-byte as one stream entry whose RecordCount is the
//     batch's record count. Compressed batches pass through undecompressed.
//   - The partition leader epoch (the append session's epoch) is stamped
//     into the batch header before the append; the base offset is assigned
//     by the core at commit and patched in on fetch (both outside the CRC).
//   - Topics with message.timestamp.type=LogAppendTime get attribute bit 3,
//     maxTimestamp = append time and a recomputed CRC; the time is returned
//     in log_append_time_ms. Otherwise log_append_time_ms is -1.
//   - Batches larger than the topic's max.message.bytes get MESSAGE_TOO_LARGE.
//   - Idempotence: a batch with producerId >= 0 and baseSequence >= 0 is
//     appended with a contiguous producer sequence; the core's dedup window
//     (last 5 batches per producer, committed with the stream head) returns
//     the original offsets for a duplicate, OUT_OF_ORDER_SEQUENCE_NUMBER for
//     a gap, INVALID_PRODUCER_EPOCH for a fenced epoch and
//     UNKNOWN_PRODUCER_ID for a producer without state sending seq != 0.
//   - Appends are issued with AppendAsync in request order (per partition
//     commit order = call order), and the response waits for all of them,
//     bounded by timeout_ms (then REQUEST_TIMED_OUT; an idempotent retry
//     settles whether it committed). acks=1 and acks=-1 both wait for the
//     storage profile's ack boundary: Nereus has no weaker acknowledgement.
//   - acks=0 sends no response at all and does not hold up later responses.
//   - Transactional batches (attribute bit 4) need the request's
//     transactional_id and are verified with the transaction coordinator
//     (KIP-890 part 1) under the partition's transaction-index lock: the
//     producer's transaction must be ongoing with this producer id and
//     epoch and include the partition (else INVALID_TXN_STATE,
//     INVALID_PRODUCER_ID_MAPPING or INVALID_PRODUCER_EPOCH). The
//     transaction is registered as open on the partition before the batch
//     is issued, so the last stable offset never passes it uncommitted.
//   - Producing to an internal topic (__consumer_offsets,
//     __transaction_state) gets INVALID_TOPIC_EXCEPTION, as in Kafka.
//   - producer_byte_rate quotas (quota.go): the request's bytes are
//     recorded for its user/client id; over the quota the response carries
//     throttle_time_ms and the connection is not read for that long.
//   - Per-record errors (v8 record_errors) are never produced; a bad batch
//     fails as a whole with error_message set.
//
// Version notes:
//   - v0-2: message sets v0/v1; advertised only because librdkafka < 2.11
//     (Debian's kcat) enables compression only when the Produce range
//     overlaps v0 (Kafka 4 does the same, KAFKA-18659). Refused per partition.
//   - v3: transactional_id; RecordBatch v2 only.
//   - v5: log_start_offset in the response.
//   - v7: zstd (librdkafka needs exactly v7 in range to enable zstd).
//   - v8: record_errors, error_message.
//   - v9: flexible.
//   - v10-11: current_leader/node_endpoints tags (only with NOT_LEADER); v11
//     is the same as v10 for us.

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/kafka/kcompact"
	"github.com/nereusstream/nereus-go/kafka/kstore"
	"github.com/nereusstream/nereus-go/kafka/ktxn"
	"github.com/nereusstream/nereus-go/stream"
)

func init() { regKey(0, 0, 11, handleProduce) }

// produceTarget is one partition of a produce request in flight.
type produceTarget struct {
	out     *kmsg.ProduceResponseTopicPartition
	app     *kstore.Appending
	part    *kstore.Partition
	records int
	bytes   int
}

func handleProduce(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	s := r.s
	now := s.cfg.Now().UnixMilli()

	var refuse int16
	switch {
	case req.Version < 3:
		refuse = kerr.UnsupportedVersion.Code
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		refuse = kerr.InvalidRequiredAcks.Code
	}

	var targets []produceTarget
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		ot := &resp.Topics[ti]
		ot.Topic = rt.Topic
		ot.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			op := &ot.Partitions[pi]
			*op = kmsg.NewProduceResponseTopicPartition()
			op.Partition = rp.Partition
			op.BaseOffset = -1
			op.LogAppendTime = -1
			op.LogStartOffset = -1
			if refuse != 0 {
				op.ErrorCode = refuse
				continue
			}
			if isInternalTopic(rt.Topic) {
				op.ErrorCode = kerr.InvalidTopicException.Code
				if req.Version >= 8 {
					op.ErrorMessage = errorMessage(fmt.Errorf("%w %s: producing to it is not allowed", errInternalTopic, rt.Topic))
				}
				continue
			}
			t, p, err := s.store.Partition(r.ctx, rt.Topic, rp.Partition)
			if err != nil {
				op.ErrorCode = errorCode(err)
				continue
			}
			app, nrec, err := produceOne(r.ctx, s, t, p, req.TransactionID, rp.Records, now, op)
			if err != nil {
				s.stats.ProduceErrors.Add(1)
				op.ErrorCode = errorCode(err)
				if req.Version >= 8 {
					op.ErrorMessage = errorMessage(err)
				}
				continue
			}
			targets = append(targets, produceTarget{out: op, app: app, part: p, records: nrec, bytes: len(rp.Records)})
		}
	}

	user := r.principalName()
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	settle := func() {
		ctx, cancel := context.WithTimeout(r.ctx, timeout)
		defer cancel()
		defer func() {
			n := 0
			for i := range targets {
				n += targets[i].bytes
			}
			resp.ThrottleMillis = r.throttleProduce(user, n)
		}()
		for i := range targets {
			t := &targets[i]
			res, err := t.app.Settle(ctx)
			if err != nil {
				s.stats.ProduceErrors.Add(1)
				t.out.ErrorCode = errorCode(err)
				if req.Version >= 8 {
					t.out.ErrorMessage = errorMessage(err)
				}
				if t.out.ErrorCode == kerr.UnknownProducerID.Code {
					if start, _, berr := s.store.Bounds(ctx, t.part); berr == nil {
						t.out.LogStartOffset = start
					}
				}
				t.out.LogAppendTime = -1
				continue
			}
			if res.Duplicate {
				s.stats.DuplicateBatches.Add(1)
			} else {
				s.stats.ProducedBatches.Add(1)
				s.stats.ProducedRecords.Add(int64(t.records))
				s.stats.ProducedBytes.Add(int64(t.bytes))
			}
			t.out.BaseOffset = res.Start
		}
	}
	if req.Acks == 0 {
		// No response; still settle so fenced sessions are dropped.
		go settle()
		return nil, nil, nil
	}
	if len(targets) == 0 {
		return resp, nil, nil
	}
	return nil, func() kmsg.Response { settle(); return resp }, nil
}

// produceOne validates one partition's batch and issues its append.
func produceOne(ctx context.Context, s *Server, t *kstore.Topic, p *kstore.Partition, txnID *string, records []byte, now int64,
	out *kmsg.ProduceResponseTopicPartition) (*kstore.Appending, int, error) {
	if len(records) == 0 {
		return nil, 0, fmt.Errorf("%w: no records", kbatch.ErrInvalid)
	}
	if max := t.Configs.MaxMessageBytes(); len(records) > max {
		return nil, 0, fmt.Errorf("batch of %d bytes exceeds max.message.bytes %d: %w", len(records), max, errTooLarge)
	}
	h, err := kbatch.ValidateProduced(records)
	if err != nil {
		return nil, 0, err
	}
	if t.Configs.Compacted() {
		i, err := kcompact.NullKeyRecord(records, h)
		if err != nil {
			return nil, 0, err
		}
		if i >= 0 {
			// Kafka answers INVALID_RECORD naming the record (v8+).
			msg := fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d.", t.Name, p.Index)
			er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			er.RelativeOffset, er.ErrorMessage = int32(i), &msg
			out.ErrorRecords = append(out.ErrorRecords[:0], er)
			return nil, 0, fmt.Errorf("%w: %s", kbatch.ErrInvalid, msg)
		}
	}
	transactional := h.Attributes&kbatch.AttrTransactional != 0
	if transactional && (txnID == nil || h.ProducerID < 0 || h.BaseSequence < 0) {
		return nil, 0, errTransactional
	}
	ts := h.MaxTimestamp
	if t.Configs.LogAppendTime() {
		kbatch.SetLogAppendTime(records, now)
		ts = now
		out.LogAppendTime = now
	}
	var seq *stream.ProducerSequence
	if h.ProducerID >= 0 && h.BaseSequence >= 0 {
		seq = &stream.ProducerSequence{
			Mode:     stream.SequenceContiguous,
			Producer: strconv.FormatInt(h.ProducerID, 10),
			Epoch:    int64(h.ProducerEpoch),
			FirstSeq: int64(h.BaseSequence),
			LastSeq:  int64(h.LastSequence()),
		}
	}
	build := func(epoch int32) stream.AppendRequest {
		kbatch.SetLeaderEpoch(records, epoch)
		return stream.AppendRequest{
			Entries:       []stream.Entry{{Payload: records, RecordCount: uint32(h.NumRecords), Timestamp: ts}},
			ExpectedStart: -1,
			Sequence:      seq,
		}
	}
	var app *kstore.Appending
	if transactional {
		tp := ktxn.TopicPartition{Topic: t.Name, Partition: p.Index}
		app, err = s.store.AppendTransactional(ctx, p, h.ProducerID, h.ProducerEpoch, func() error {
			if code := s.txns.VerifyAt(ctx, *txnID, h.ProducerID, h.ProducerEpoch, tp); code != 0 {
				return codeError(code)
			}
			return nil
		}, build)
	} else {
		app, err = s.store.AppendAsync(ctx, p, build)
	}
	if err != nil {
		return nil, 0, err
	}
	return app, int(h.NumRecords), nil
}

// precheckProduce walks a Produce body's topic and partition arrays with
// bounds checks before kmsg decodes it, so a forged array count cannot make
// the decoder allocate far more than the frame holds, and caps the number of
// partitions one request may carry.
func precheckProduce(b []byte, flexible bool, version int16) error {
	const maxPartitions = 100000
	w := walker{b: b, flexible: flexible}
	if version >= 3 {
		w.nullableString()
	}
	w.skip(2 + 4) // acks, timeout
	nt := w.arrayLen()
	total := 0
	for i := 0; i < nt && w.err == nil; i++ {
		if version >= 13 {
			w.skip(16)
		} else {
			w.nullableString()
		}
		np := w.arrayLen()
		total += np
		if total > maxPartitions {
			return badInput("produce request with more than %d partitions", maxPartitions)
		}
		for j := 0; j < np && w.err == nil; j++ {
			w.skip(4)
			w.nullableBytes()
			w.tags()
		}
		w.tags()
	}
	w.tags()
	if w.err != nil {
		return badInput("malformed produce request: %v", w.err)
	}
	return nil
}

type walker struct {
	b        []byte
	flexible bool
	err      error
}

func (w *walker) fail(what string) {
	if w.err == nil {
		w.err = fmt.Errorf("truncated at %s", what)
	}
	w.b = nil
}

func (w *walker) skip(n int) {
	if w.err != nil {
		return
	}
	if n < 0 || n > len(w.b) {
		w.fail("field")
		return
	}
	w.b = w.b[n:]
}

func (w *walker) uvarint() uint64 {
	if w.err != nil {
		return 0
	}
	v, k := binary.Uvarint(w.b)
	if k <= 0 {
		w.fail("varint")
		return 0
	}
	w.b = w.b[k:]
	return v
}

func (w *walker) int16() int16 {
	if w.err != nil || len(w.b) < 2 {
		w.fail("int16")
		return 0
	}
	v := int16(binary.BigEndian.Uint16(w.b))
	w.b = w.b[2:]
	return v
}

func (w *walker) int32() int32 {
	if w.err != nil || len(w.b) < 4 {
		w.fail("int32")
		return 0
	}
	v := int32(binary.BigEndian.Uint32(w.b))
	w.b = w.b[4:]
	return v
}

func (w *walker) nullableString() {
	if w.flexible {
		n := w.uvarint()
		if n > 0 {
			w.skip(int(min(n-1, uint64(len(w.b)+1))))
		}
		return
	}
	n := w.int16()
	if n > 0 {
		w.skip(int(n))
	}
}

func (w *walker) nullableBytes() {
	if w.flexible {
		n := w.uvarint()
		if n > 0 {
			w.skip(int(min(n-1, uint64(len(w.b)+1))))
		}
		return
	}
	n := w.int32()
	if n > 0 {
		w.skip(int(n))
	}
}

// arrayLen returns an array count, failing if the remaining bytes cannot
// possibly hold that many elements (each element is at least 4 bytes here).
func (w *walker) arrayLen() int {
	var n int64
	if w.flexible {
		n = int64(w.uvarint()) - 1
	} else {
		n = int64(w.int32())
	}
	if w.err != nil || n < 0 {
		return 0
	}
	if n > int64(len(w.b)/4)+1 {
		w.fail("array count")
		return 0
	}
	return int(n)
}

func (w *walker) tags() {
	if !w.flexible || w.err != nil {
		return
	}
	n := w.uvarint()
	for i := uint64(0); i < n && w.err == nil; i++ {
		w.uvarint()
		sz := w.uvarint()
		w.skip(int(min(sz, uint64(len(w.b)+1))))
	}
}
