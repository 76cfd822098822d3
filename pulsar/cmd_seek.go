// SEEK.
//
// Behaviour:
//   - By message id: the cursor is reset so that the id's entry is the next
//     delivered (entry granularity; clients drop batch indexes before the
//     id themselves). Ids of another topic incarnation and the
//     earliest/latest sentinels map to the start/end of the topic.
//   - By publish time: the cursor is reset to the first entry whose publish
//     time is >= the given time (the stream core's time index).
//   - Acknowledgements at or after the new position are forgotten, the reset
//     cursor is persisted, SUCCESS is sent, and then every consumer of the
//     subscription receives CLOSE_CONSUMER — clients rely on this to
//     reconnect and start from the new position.
//
// Differences from the real broker:
//   - None known for clients; seek on a partitioned consumer is per
//     partition, as clients send it.

package pulsar

import (
	"context"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

func init() {
	register(pb.BaseCommand_SEEK, handleSeek)
}

func handleSeek(c *conn, f wire.Frame) error {
	sk := f.Cmd.GetSeek()
	reqID := sk.GetRequestId()
	cons := c.consumer(sk.GetConsumerId())
	if cons == nil {
		c.sendError(reqID, pb.ServerError_ConsumerNotFound, "consumer not found")
		return nil
	}
	c.async(func(ctx context.Context) {
		sub := cons.sub
		l := sub.t.ledger
		start, end, err := l.Bounds(ctx)
		if err != nil {
			c.sendErr(reqID, err)
			return
		}
		var off int64
		switch {
		case sk.MessageId != nil:
			id := sk.GetMessageId()
			off = l.OffsetOf(managedledger.Position{LedgerID: int64(id.GetLedgerId()), EntryID: int64(id.GetEntryId())})
		case sk.MessagePublishTime != nil:
			off, err = l.OffsetForTimestamp(ctx, int64(sk.GetMessagePublishTime()))
			if err != nil {
				c.sendErr(reqID, err)
				return
			}
		default:
			c.sendError(reqID, pb.ServerError_UnknownError, "SEEK needs a message id or a publish time")
			return
		}
		off = min(max(off, start), end)
		var consumers []*consumer
		ok := sub.call(func() {
			sub.cursor.Reset(off)
			sub.rewind()
			sub.readPos = off
			sub.redeliveries = map[int64]uint32{}
			consumers = append(consumers, sub.consumers...)
			for _, cs := range consumers {
				cs.permits = 0 // nothing more until they resubscribe
			}
		})
		if !ok {
			c.sendErr(reqID, errTopicClosed)
			return
		}
		if err := sub.cursor.Flush(ctx); err != nil {
			c.sendErr(reqID, err)
			return
		}
		c.sendSuccess(reqID)
		for _, cs := range consumers {
			cs.closeByBrokerKeep(true)
		}
	})
	return nil
}
