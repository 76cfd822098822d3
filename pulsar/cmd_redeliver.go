// REDELIVER_UNACKNOWLEDGED_MESSAGES (negative acks, ack timeouts).
//
// Behaviour:
//   - With message ids: each listed entry that is still unacknowledged is
//     queued for redelivery with its redelivery count + 1 (on Shared and
//     Key_Shared possibly to another consumer). Clients send this for
//     negative acknowledgements after their nack delay.
//   - Without ids: on Shared/Key_Shared every entry pending on this consumer
//     is redelivered; on Exclusive/Failover the subscription rewinds to its
//     first unacknowledged entry (acknowledged ones are skipped).
//
// Differences from the real broker:
//   - consumer_epoch is ignored (the client filters stale messages itself).

package pulsar

import (
	"math"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

func init() {
	register(pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES, handleRedeliver)
}

func handleRedeliver(c *conn, f wire.Frame) error {
	r := f.Cmd.GetRedeliverUnacknowledgedMessages()
	cons := c.consumer(r.GetConsumerId())
	if cons == nil {
		return nil
	}
	sub := cons.sub
	var offs []int64
	for _, id := range r.GetMessageIds() {
		off := sub.t.ledger.OffsetOf(managedledger.Position{LedgerID: int64(id.GetLedgerId()), EntryID: int64(id.GetEntryId())})
		if off != math.MinInt64 && off != math.MaxInt64 && off >= 0 {
			offs = append(offs, off)
		}
	}
	all := len(r.GetMessageIds()) == 0
	sub.do(func() {
		if all {
			switch sub.subType {
			case pb.CommandSubscribe_Shared, pb.CommandSubscribe_Key_Shared:
				for off, pc := range sub.pending {
					if pc == cons {
						offs = append(offs, off)
					}
				}
			default:
				sub.rewind()
				return
			}
		}
		for _, off := range offs {
			if sub.cursor.IsAcked(off, sub.spanOf(sub.t.s.ctx, off, nil)) {
				continue
			}
			slot := -1
			if pc, ok := sub.pending[off]; ok {
				if s, ok := pc.pendingSlots[off]; ok {
					slot = s
				}
				sub.settle(off)
			}
			sub.redeliveries[off]++
			sub.addReplay(off, &replayItem{slot: slot})
		}
	})
	return nil
}
