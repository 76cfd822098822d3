// ACK, ACK_RESPONSE.
//
// Behaviour:
//   - Individual acks mark entries acknowledged in the subscription's
//     cursor (the mark-delete point advances over contiguous acknowledged
//     entries; others are kept as individually deleted ranges). An id with
//     an ack_set (batch-index acknowledgement; set bit = still
//     unacknowledged) acknowledges only the cleared indexes; the entry is
//     acknowledged once none is left.
//   - Cumulative acks acknowledge every entry up to the id (with an ack_set:
//     up to the previous entry plus those indexes). They are refused on
//     Shared and Key_Shared subscriptions.
//   - Acks with validation_error (the client could not decode the entry)
//     are applied like ordinary acks, as in Pulsar.
//   - Without request_id the cursor is persisted within
//     Config.CursorFlushInterval. With request_id the ACK_RESPONSE is sent
//     only after the metadata write covering this ack was applied, so a
//     confirmed ack survives any broker crash.
//
// Differences from the real broker:
//   - Transactional acks (txnid) are applied immediately, not at commit.

package pulsar

import (
	"context"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

func init() {
	register(pb.BaseCommand_ACK, handleAck)
}

func handleAck(c *conn, f wire.Frame) error {
	a := f.Cmd.GetAck()
	cons := c.consumer(a.GetConsumerId())
	if cons == nil {
		if a.RequestId != nil {
			sendAckResponse(c, a.GetConsumerId(), a.GetRequestId(), pb.ServerError_ConsumerNotFound, "consumer not found")
		}
		return nil
	}
	sub := cons.sub
	cur := sub.cursor
	cumulative := a.GetAckType() == pb.CommandAck_Cumulative
	if cumulative && (cons.subType == pb.CommandSubscribe_Shared || cons.subType == pb.CommandSubscribe_Key_Shared) {
		if a.RequestId != nil {
			sendAckResponse(c, cons.id, a.GetRequestId(), pb.ServerError_NotAllowedError, "cumulative ack is not allowed on Shared/Key_Shared subscriptions")
		}
		return nil
	}
	var settled []int64
	cumTo := int64(-1)
	for _, id := range a.GetMessageId() {
		off := sub.t.ledger.OffsetOf(managedledger.Position{LedgerID: int64(id.GetLedgerId()), EntryID: int64(id.GetEntryId())})
		if off == math.MinInt64 || off == math.MaxInt64 || off < 0 {
			continue // another topic incarnation's id: nothing to ack here
		}
		n := sub.spanOf(c.s.ctx, off, nil)
		set := toWords(id.GetAckSet())
		switch {
		case cumulative && len(set) > 0:
			cur.AckCumulativeBatch(off, n, set)
			cumTo = max(cumTo, off-1)
		case cumulative:
			cur.AckCumulative(off, n)
			cumTo = max(cumTo, off)
		case len(set) > 0:
			cur.AckBatch(off, n, set)
		default:
			cur.AckEntry(off, n)
		}
		if !cumulative && cur.IsAcked(off, n) {
			settled = append(settled, off)
		}
	}
	sub.forgetSpans(settled, cumTo)
	sub.do(func() {
		for _, off := range settled {
			sub.settle(off)
			delete(sub.redeliveries, off)
			sub.delayed.remove(off)
		}
		if cumTo >= 0 {
			sub.delayed.removeBelow(cumTo + 1)
			for off := range sub.pending {
				if off <= cumTo {
					sub.settle(off)
				}
			}
			for off := range sub.redeliveries {
				if off <= cumTo {
					delete(sub.redeliveries, off)
				}
			}
		}
	})
	if a.RequestId != nil {
		reqID := a.GetRequestId()
		c.async(func(ctx context.Context) {
			if err := cur.Flush(ctx); err != nil {
				code, msg := toServerError(err)
				sendAckResponse(c, cons.id, reqID, code, msg)
				return
			}
			sendAckResponse(c, cons.id, reqID, 0, "")
		})
	}
	return nil
}

func toWords(set []int64) []uint64 {
	if len(set) == 0 {
		return nil
	}
	out := make([]uint64, len(set))
	for i, w := range set {
		out[i] = uint64(w)
	}
	return out
}

// sendAckResponse answers an ack with request id; an empty msg means
// success (clients test the message field).
func sendAckResponse(c *conn, consumerID, reqID uint64, code pb.ServerError, msg string) {
	r := &pb.CommandAckResponse{ConsumerId: proto.Uint64(consumerID), RequestId: proto.Uint64(reqID)}
	if msg != "" {
		r.Error, r.Message = code.Enum(), proto.String(msg)
	}
	c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_ACK_RESPONSE.Enum(), AckResponse: r})
}
