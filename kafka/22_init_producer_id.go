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
//   - Transactional ids are refused with INVALID_TXN_STATE: transactions
//     are not implemented and no transaction API is advertised.
//
// Version notes:
//   - v1: same as v0. v2: flexible. v3: producer_id/epoch (KIP-360).
//   - v4: same as v3 (new error codes, not produced here).

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
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp, nil, nil
	}
	id, err := r.s.store.AllocateProducerID(r.ctx)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil, nil
}
