package kafka

// DescribeProducers: v0
//
// Behavior:
//   - Per partition, the producers with a transaction open on it (from the
//     partition's transaction index): producer id, epoch and
//     current_txn_start_offset (the transaction's first offset, or a lower
//     bound of it when the broker registered the transaction before its
//     first batch committed), which is what kafka-transactions.sh
//     find-hanging and Admin.describeProducers use. Idempotent producers
//     without an open transaction are not listed (their sequence state
//     lives in the stream head, which the front end does not enumerate);
//     last_sequence and last_timestamp are -1.
//   - Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	return nil, func() kmsg.Response {
		for _, rt := range req.Topics {
			ot := kmsg.NewDescribeProducersResponseTopic()
			ot.Topic = rt.Topic
			for _, pi := range rt.Partitions {
				op := kmsg.NewDescribeProducersResponseTopicPartition()
				op.Partition = pi
				_, p, err := r.s.store.Partition(r.ctx, rt.Topic, pi)
				if err == nil {
					var open []kstore.OpenTxn
					open, err = r.s.store.OpenTxns(r.ctx, p)
					for _, o := range open {
						ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
						ap.ProducerID, ap.ProducerEpoch = o.ProducerID, int32(o.ProducerEpoch)
						ap.LastSequence, ap.LastTimestamp, ap.CoordinatorEpoch = -1, -1, 0
						ap.CurrentTxnStartOffset = o.First
						op.ActiveProducers = append(op.ActiveProducers, ap)
					}
				}
				if err != nil {
					op.ErrorCode, op.ErrorMessage = errorCode(err), errorMessage(err)
				}
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return resp
	}, nil
}
