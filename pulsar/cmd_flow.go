// FLOW, MESSAGE.
//
// Behaviour:
//   - FLOW adds messagePermits to the consumer's permits. The dispatcher
//     sends entries while a consumer has permits > 0; an entry costs its
//     number of messages (num_messages_in_batch for a batch), so the last
//     entry may overshoot, as in Pulsar.
//   - MESSAGE carries (virtual ledger id, entry offset), the redelivery
//     count, the ack_set of a partially acknowledged batch (set bit = still
//     unacknowledged) and the stored entry bytes, verified (CRC-32C) before
//     they are sent and prefixed with broker-entry metadata only for clients
//     that announced support.
//
// Differences from the real broker:
//   - Permits are not blocked on unacknowledged-message limits.

package pulsar

import (
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

func init() {
	register(pb.BaseCommand_FLOW, handleFlow)
}

func handleFlow(c *conn, f wire.Frame) error {
	fl := f.Cmd.GetFlow()
	cons := c.consumer(fl.GetConsumerId())
	if cons == nil {
		return nil // closed meanwhile; clients resend FLOW after resubscribing
	}
	n := int64(fl.GetMessagePermits())
	cons.sub.do(func() { cons.permits += n })
	return nil
}
