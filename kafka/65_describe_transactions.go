package kafka

// DescribeTransactions: v0
//
// Behavior:
//   - Per transactional id: its state with Kafka's names (Empty, Ongoing,
//     PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort), producer
//     id and epoch, timeout, start time of the current transaction (-1 when
//     none) and its partitions, read from the transaction coordinator (the
//     record is loaded from the metadata store if this broker has not seen
//     it yet). An id without a record gets TRANSACTIONAL_ID_NOT_FOUND.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/ktxn"
)

func init() { regKey(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	return nil, func() kmsg.Response {
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID = id
			st.StartTimestamp, st.ProducerID, st.ProducerEpoch = -1, -1, -1
			rec, ok, code := r.s.txns.Describe(r.ctx, id)
			switch {
			case code != 0:
				st.ErrorCode = code
			case !ok:
				st.ErrorCode = kerr.TransactionalIDNotFound.Code
			default:
				fillTxnState(&st, rec)
			}
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp
	}, nil
}

func fillTxnState(st *kmsg.DescribeTransactionsResponseTransactionState, rec ktxn.Record) {
	st.State = string(rec.State)
	st.TimeoutMillis = rec.TimeoutMs
	st.ProducerID, st.ProducerEpoch = rec.ProducerID, rec.Epoch
	if rec.State == ktxn.Ongoing || rec.State.Preparing() {
		st.StartTimestamp = rec.StartMs
	}
	byTopic := map[string][]int32{}
	for _, tp := range rec.Partitions {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	names := make([]string, 0, len(byTopic))
	for n := range byTopic {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		t.Topic, t.Partitions = n, byTopic[n]
		st.Topics = append(st.Topics, t)
	}
}
