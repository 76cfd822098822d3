// GET_LAST_MESSAGE_ID, CONSUMER_STATS.
//
// Behaviour:
//   - GET_LAST_MESSAGE_ID answers the position of the topic's last entry
//     (with batch_index = n-1 when it is a batch of n) and the
//     subscription's mark-delete position (last entry below which
//     everything is acknowledged). An empty topic answers entry id -1.
//     Readers use it for HasNext and inclusive start ids.
//   - CONSUMER_STATS answers permits, unacknowledged entries, backlog and
//     the subscription type.
//
// Differences from the real broker:
//   - CONSUMER_STATS rates are the topic's, not the consumer's.

package pulsar

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

func init() {
	register(pb.BaseCommand_GET_LAST_MESSAGE_ID, handleGetLastMessageID)
	register(pb.BaseCommand_CONSUMER_STATS, handleConsumerStats)
}

func handleGetLastMessageID(c *conn, f wire.Frame) error {
	g := f.Cmd.GetGetLastMessageId()
	reqID := g.GetRequestId()
	cons := c.consumer(g.GetConsumerId())
	if cons == nil {
		c.sendError(reqID, pb.ServerError_ConsumerNotFound, "consumer not found")
		return nil
	}
	c.async(func(ctx context.Context) {
		l := cons.sub.t.ledger
		ledgerID := uint64(l.LedgerID())
		last, err := lastMessageID(ctx, l)
		if err != nil {
			c.sendErr(reqID, err)
			return
		}
		md, err := markDeleteEntry(ctx, l, cons.sub.cursor.AckedBelow())
		if err != nil {
			c.sendErr(reqID, err)
			return
		}
		c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE.Enum(),
			GetLastMessageIdResponse: &pb.CommandGetLastMessageIdResponse{
				RequestId:     proto.Uint64(reqID),
				LastMessageId: last,
				ConsumerMarkDeletePosition: &pb.MessageIdData{LedgerId: proto.Uint64(ledgerID),
					EntryId: proto.Uint64(uint64(md))},
			}})
	})
	return nil
}

func handleConsumerStats(c *conn, f wire.Frame) error {
	g := f.Cmd.GetConsumerStats()
	reqID := g.GetRequestId()
	cons := c.consumer(g.GetConsumerId())
	resp := &pb.CommandConsumerStatsResponse{RequestId: proto.Uint64(reqID)}
	if cons == nil {
		resp.ErrorCode, resp.ErrorMessage = pb.ServerError_ConsumerNotFound.Enum(), proto.String("consumer not found")
		c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_CONSUMER_STATS_RESPONSE.Enum(), ConsumerStatsResponse: resp})
		return nil
	}
	c.async(func(ctx context.Context) {
		sub := cons.sub
		var permits int64
		var unacked int
		sub.call(func() { permits, unacked = cons.permits, cons.unacked })
		_, end, _ := sub.t.ledger.Bounds(ctx)
		st := &sub.t.stats
		st.mu.Lock()
		rateOut, tputOut := st.rateOut, st.tputOut
		st.mu.Unlock()
		resp.ConsumerName = proto.String(cons.name)
		resp.AvailablePermits = proto.Uint64(uint64(max(permits, 0)))
		resp.UnackedMessages = proto.Uint64(uint64(max(unacked, 0)))
		resp.MsgBacklog = proto.Uint64(uint64(sub.cursor.Backlog(end)))
		resp.Type = proto.String(cons.subType.String())
		resp.MsgRateOut, resp.MsgThroughputOut = proto.Float64(rateOut), proto.Float64(tputOut)
		resp.Address = proto.String(c.nc.RemoteAddr().String())
		c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_CONSUMER_STATS_RESPONSE.Enum(), ConsumerStatsResponse: resp})
	})
	return nil
}

// lastMessageID is the id of the topic's last entry (entry id -1 when it
// is empty), with batch_index = n-1 and batch_size = n for a batch.
func lastMessageID(ctx context.Context, l *managedledger.Ledger) (*pb.MessageIdData, error) {
	_, end, err := l.Bounds(ctx)
	if err != nil {
		return nil, err
	}
	last := &pb.MessageIdData{LedgerId: proto.Uint64(uint64(l.LedgerID())), EntryId: proto.Uint64(uint64(end - 1))}
	if end == 0 {
		last.EntryId = proto.Uint64(^uint64(0))
		return last, nil
	}
	e, ok, err := l.EntryContaining(ctx, end-1)
	if err != nil {
		return nil, err
	}
	if ok {
		last.EntryId = proto.Uint64(uint64(e.Offset))
		if pl, err := wire.ParsePayload(e.Payload); err == nil && pl.Batched() {
			last.BatchIndex = proto.Int32(int32(pl.NumMessages() - 1))
			last.BatchSize = proto.Int32(int32(pl.NumMessages()))
		}
	}
	return last, nil
}

// markDeleteEntry is the Pulsar mark-delete position of a cursor whose
// every offset below ackedBelow is acknowledged: the id of the last entry
// acknowledged as a whole with everything before it. On a message-counted
// topic ackedBelow may lie inside an entry (a batch partly acknowledged, a
// Kafka commit); that entry is not yet deleted, so the position is the
// entry before it.
func markDeleteEntry(ctx context.Context, l *managedledger.Ledger, ackedBelow int64) (int64, error) {
	if !l.CountsMessages() || ackedBelow <= 0 {
		return ackedBelow - 1, nil
	}
	cut := ackedBelow
	if e, ok, err := l.EntryContaining(ctx, ackedBelow); err != nil {
		return 0, err
	} else if ok {
		cut = e.Offset // first entry not wholly acknowledged
	}
	if cut <= 0 {
		return -1, nil
	}
	e, ok, err := l.EntryContaining(ctx, cut-1)
	if err != nil {
		return 0, err
	}
	if !ok {
		return cut - 1, nil // trimmed: below the first readable entry
	}
	return e.Offset, nil
}
