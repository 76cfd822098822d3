package kafka

// EndTxn: v0-4
//
// Behavior:
//   - Commits or aborts the producer's transaction. The coordinator first
//     persists PrepareCommit / PrepareAbort (the outcome's commit point),
//     then appends a commit or abort control batch to every partition of
//     the transaction (in parallel) and, on commit, stores the offsets that
//     TxnOffsetCommit staged, then persists CompleteCommit / CompleteAbort.
//     The answer is sent after all of that: when commitTransaction()
//     returns, read_committed consumers can read the transaction.
//   - A crash after the Prepare* record is stored is finished by the
//     restarted (or next) coordinator before it serves; the client's retry
//     of the same EndTxn then succeeds. A retry after completion succeeds;
//     the opposite outcome, or EndTxn without a transaction,
//     INVALID_TXN_STATE. A completion that could not finish (a partition
//     unavailable) answers CONCURRENT_TRANSACTIONS, which clients retry;
//     the coordinator's background loop retries it too.
//
// Version notes:
//   - v1: same as v0. v2: PRODUCER_FENCED may be returned. v3: flexible.
//   - v4: same as v3. v5 (KIP-890 part 2 epoch bump per transaction) is
//     not advertised, and transaction.version is not finalized.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(26, 0, 4, handleEndTxn) }

func handleEndTxn(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	return nil, func() kmsg.Response {
		code := r.s.txns.EndTxn(r.ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
		if code == kerr.ProducerFenced.Code && req.Version < 2 {
			code = kerr.InvalidProducerEpoch.Code
		}
		resp.ErrorCode = code
		return resp
	}, nil
}
