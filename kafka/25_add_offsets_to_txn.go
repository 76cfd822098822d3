package kafka

// AddOffsetsToTxn: v0-4
//
// Behavior:
//   - Adds the consumer group to the producer's transaction at the
//     transaction coordinator (starting the transaction if none is
//     ongoing), so that TxnOffsetCommit may stage the group's offsets in it.
//     Errors as for AddPartitionsToTxn; an empty group id INVALID_GROUP_ID.
//
// Version notes:
//   - v1: same as v0. v2: PRODUCER_FENCED may be returned. v3: flexible.
//   - v4: same as v3 (TRANSACTION_ABORTABLE is never returned).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil, nil
	}
	return nil, func() kmsg.Response {
		code := r.s.txns.AddGroup(r.ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
		if code == kerr.ProducerFenced.Code && req.Version < 2 {
			code = kerr.InvalidProducerEpoch.Code
		}
		resp.ErrorCode = code
		return resp
	}, nil
}
