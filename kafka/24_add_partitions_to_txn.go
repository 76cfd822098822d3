package kafka

// AddPartitionsToTxn: v0-5
//
// Behavior:
//   - Adds partitions to the producer's transaction at the transaction
//     coordinator (package ktxn), starting the transaction if none is
//     ongoing; the new state is persisted before the answer, so a produce
//     to the partition can be verified against it (KIP-890 part 1: every
//     transactional batch is checked, under the partition's index lock,
//     against the coordinator's view before it is appended).
//   - Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION and the
//     rest of the request OPERATION_NOT_ATTEMPTED, as in Kafka; another
//     producer id INVALID_PRODUCER_ID_MAPPING, an older or newer epoch
//     PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for v0-1),
//     a transaction being completed CONCURRENT_TRANSACTIONS (retriable).
//   - v4+ (broker-to-coordinator batching) is served too: each transaction
//     is added, or with verify_only checked without change (the KIP-890
//     verification request a partition leader sends); per partition 0 or
//     the reason it is not part of the ongoing transaction.
//
// Version notes:
//   - v1: same as v0. v2: PRODUCER_FENCED may be returned. v3: flexible.
//   - v4: batched transactions, verify_only, top-level error code.
//   - v5: same as v4 (TRANSACTION_ABORTABLE is never returned).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/ktxn"
)

func init() { regKey(24, 0, 5, handleAddPartitionsToTxn) }

type txnTopicParts struct {
	Topic      string
	Partitions []int32
}

// addPartitions answers one transaction's add (or verification) with a
// code per partition, in request order.
func addPartitions(r *request, id string, pid int64, epoch int16, verifyOnly bool, topics []txnTopicParts, version int16) [][]int16 {
	out := make([][]int16, len(topics))
	var tps []ktxn.TopicPartition
	unknown := false
	for i, t := range topics {
		out[i] = make([]int16, len(t.Partitions))
		for j, p := range t.Partitions {
			if _, _, err := r.s.store.Partition(r.ctx, t.Topic, p); err != nil {
				out[i][j] = errorCode(err)
				unknown = true
				continue
			}
			tps = append(tps, ktxn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	fill := func(code int16) {
		for i := range out {
			for j := range out[i] {
				if out[i][j] == 0 {
					out[i][j] = code
				}
			}
		}
	}
	switch {
	case unknown:
		fill(kerr.OperationNotAttempted.Code)
	case verifyOnly:
		codes := r.s.txns.VerifyPartitions(id, pid, epoch, tps)
		k := 0
		for i := range out {
			for j := range out[i] {
				out[i][j] = codes[k]
				k++
			}
		}
	default:
		code := r.s.txns.AddPartitions(r.ctx, id, pid, epoch, tps)
		if code == kerr.ProducerFenced.Code && version < 2 {
			code = kerr.InvalidProducerEpoch.Code
		}
		fill(code)
	}
	return out
}

func handleAddPartitionsToTxn(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	return nil, func() kmsg.Response {
		if req.Version < 4 {
			topics := make([]txnTopicParts, len(req.Topics))
			for i, t := range req.Topics {
				topics[i] = txnTopicParts{t.Topic, t.Partitions}
			}
			codes := addPartitions(r, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, topics, req.Version)
			for i, t := range req.Topics {
				ot := kmsg.NewAddPartitionsToTxnResponseTopic()
				ot.Topic = t.Topic
				for j, p := range t.Partitions {
					op := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					op.Partition, op.ErrorCode = p, codes[i][j]
					ot.Partitions = append(ot.Partitions, op)
				}
				resp.Topics = append(resp.Topics, ot)
			}
			return resp
		}
		for _, tx := range req.Transactions {
			topics := make([]txnTopicParts, len(tx.Topics))
			for i, t := range tx.Topics {
				topics[i] = txnTopicParts{t.Topic, t.Partitions}
			}
			codes := addPartitions(r, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly, topics, req.Version)
			ot := kmsg.NewAddPartitionsToTxnResponseTransaction()
			ot.TransactionalID = tx.TransactionalID
			for i, t := range tx.Topics {
				tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				tt.Topic = t.Topic
				for j, p := range t.Partitions {
					tp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					tp.Partition, tp.ErrorCode = p, codes[i][j]
					tt.Partitions = append(tt.Partitions, tp)
				}
				ot.Topics = append(ot.Topics, tt)
			}
			resp.Transactions = append(resp.Transactions, ot)
		}
		return resp
	}, nil
}
