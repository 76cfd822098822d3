package kafka

// InitProducerId: v0-4
//
// Behavior:
//   - Idempotent producers (null transactional_id) get a fresh producer id
//     with epoch 0 from a cluster-wide block allocator persisted in the
//     metadata store (kafka/producer-ids), so ids are never reused across
//     brokers or restarts. As in Kafka, a v3+ request carrying an existing
//     producer id/epoch (KIP-360 bump after UNKNOWN_PRODUCER_ID) also gets
//     a fresh id: the sequence state of the old id stays with the streams.
//   - A transactional id goes to the transaction coordinator (package
//     ktxn): the first call allocates a producer id with epoch 0; every
//     later call bumps the epoch, which fences the previous instance (its
//     requests get PRODUCER_FENCED / INVALID_PRODUCER_EPOCH). An ongoing
//     transaction of the previous instance is aborted first (markers with
//     the bumped epoch) and a decided one is completed first, before the
//     answer. Past epoch 32766 a new producer id is allocated.
//   - KIP-360 (v3+ producer_id/epoch): a producer that still owns the id
//     asks for a bump of its own epoch; a retry of a bump whose answer was
//     lost gets the same answer; anyone else gets PRODUCER_FENCED.
//   - transaction_timeout_ms above 15 minutes (or <= 0) is
//     INVALID_TRANSACTION_TIMEOUT.
//
// Version notes:
//   - v1: same as v0. v2: flexible. v3: producer_id/epoch (KIP-360).
//   - v4: same as v3 (PRODUCER_FENCED may be returned).
//   - v5 (KIP-890 TRANSACTION_ABORTABLE) is not advertised.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(22, 0, 4, handleInitProducerID) }

func handleInitProducerID(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if *req.TransactionalID == "" {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil, nil
		}
		return nil, func() kmsg.Response {
			pid, epoch := int64(-1), int16(-1)
			if req.Version >= 3 {
				pid, epoch = req.ProducerID, req.ProducerEpoch
			}
			id, ep, code := r.s.txns.InitProducerID(r.ctx, *req.TransactionalID, req.TransactionTimeoutMillis, pid, epoch)
			if code == kerr.ProducerFenced.Code && req.Version < 4 {
				code = kerr.InvalidProducerEpoch.Code
			}
			resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = id, ep, code
			return resp
		}, nil
	}
	id, err := r.s.store.AllocateProducerID(r.ctx)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil, nil
}
