// SEND, SEND_RECEIPT, SEND_ERROR.
//
// Behaviour:
//   - Each SEND's payload (from the 0x0e01 magic on: checksum, metadata,
//     single message or whole batch) is verified (magic, CRC-32C, metadata
//     decodes) and stored as ONE stream entry covering one offset per
//     message (RecordCount = batch size; 1 on topics of the older
//     entry-counted model), prefixed with broker-entry metadata
//     {broker_timestamp} (older topics: also the running index). The
//     entry's timestamp is the message publish time (seek by time uses it).
//   - SENDs are pipelined: the append is issued in arrival order
//     (AppendAsync preserves order per stream) and the reader moves on; a
//     receipt goroutine per producer waits for the appends in the same
//     order, so SEND_RECEIPTs leave in send order.
//   - The receipt's message id is (virtual ledger id, offset of the entry's
//     first message); clients derive batch indexes themselves.
//   - Deduplication (default on): the core checks (producer name,
//     sequence_id..highest) monotonically and persists it with the commit;
//     a duplicate is answered with the original message id, or
//     (-1, -1) when it is older than the core's window, exactly like
//     Pulsar's deduplication.
//   - A checksum mismatch is answered with SEND_ERROR ChecksumError; a
//     malformed payload closes the connection; storage errors are answered
//     with SEND_ERROR PersistenceError (the client reconnects and resends,
//     which deduplication makes safe). A fenced append session (another
//     broker took over the stream) closes the topic's producers instead.
//
// Differences from the real broker:
//   - Transactions (txnid), chunk-aware checks and delayed-delivery markers
//     are stored as ordinary entries; replication markers are not produced.

package pulsar

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
	"github.com/nereusstream/nereus-go/stream"
)

func init() {
	register(pb.BaseCommand_SEND, handleSend)
}

func handleSend(c *conn, f wire.Frame) error {
	send := f.Cmd.GetSend()
	p := c.producer(send.GetProducerId())
	if p == nil {
		// The client thinks the producer exists; make it reconnect and
		// re-create it rather than wait for a receipt that never comes.
		return fmt.Errorf("SEND for unknown producer %d", send.GetProducerId())
	}
	if f.Payload == nil {
		return errors.New("SEND without payload")
	}
	pl, err := wire.ParsePayload(f.Payload)
	if err != nil {
		if errors.Is(err, wire.ErrChecksum) {
			c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_SEND_ERROR.Enum(), SendError: &pb.CommandSendError{
				ProducerId: proto.Uint64(p.id), SequenceId: proto.Uint64(send.GetSequenceId()),
				Error: pb.ServerError_ChecksumError.Enum(), Message: proto.String(err.Error())}})
			return nil
		}
		return err
	}
	recvAt := time.Unix(0, c.lastRecv.Load()) // readLoop stamped this frame
	fut, ticket, err := p.t.appendEntry(p, send, &pl)
	if err != nil {
		code, msg := toServerError(err)
		c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_SEND_ERROR.Enum(), SendError: &pb.CommandSendError{
			ProducerId: proto.Uint64(p.id), SequenceId: proto.Uint64(send.GetSequenceId()),
			Error: code.Enum(), Message: proto.String(msg)}})
		return nil
	}
	first := send.GetSequenceId()
	ps := &pendingSend{ticket: ticket, seq: first, highest: send.GetHighestSequenceId(), numMsgs: pl.NumMessages(), bytes: len(pl.Message), fut: fut,
		lastSeq: max(int64(first), int64(send.GetHighestSequenceId()), int64(pl.Metadata.GetHighestSequenceId())),
		recvAt:  recvAt, issuedAt: time.Now()}
	stopped := false
	select {
	case <-p.stopped:
		stopped = true
	default:
	}
	if !stopped {
		select {
		case p.pending <- ps:
			return nil
		case <-p.stopped:
		case <-c.closed:
		}
	}
	// The producer or connection closed under us; the append still settles
	// (and is recorded) without a receipt.
	go func() {
		res, err := fut.Wait(context.Background())
		p.t.appendSettled(ps.ticket, p.name, ps.lastSeq, res, err)
	}()
	return nil
}

// receiptLoop answers this producer's SENDs in order as their appends
// settle.
func (p *producer) receiptLoop() {
	for {
		var ps *pendingSend
		select {
		case ps = <-p.pending:
		case <-p.stopped:
			p.drainPending()
			return
		}
		var res stream.AppendResult
		var err error
		select {
		case <-ps.fut.Done():
			res, err = ps.fut.Wait(context.Background())
		case <-p.c.closed:
			res, err = ps.fut.Wait(context.Background())
		}
		if err == nil {
			s := p.c.s
			now := time.Now()
			s.observePublish(stageAdmit, ps.issuedAt.Sub(ps.recvAt))
			s.observePublish(stageStorage, now.Sub(ps.issuedAt))
			p.t.appendSettled(ps.ticket, p.name, ps.lastSeq, res, err)
			p.answer(ps, res, err)
			s.observePublish(stageTotal, time.Since(ps.recvAt))
			continue
		}
		p.t.appendSettled(ps.ticket, p.name, ps.lastSeq, res, err)
		p.answer(ps, res, err)
	}
}

// drainPending settles appends still queued after the producer stopped, so
// the topic's in-flight count stays exact.
func (p *producer) drainPending() {
	for {
		select {
		case ps := <-p.pending:
			res, err := ps.fut.Wait(context.Background())
			p.t.appendSettled(ps.ticket, p.name, ps.lastSeq, res, err)
		default:
			return
		}
	}
}

func (p *producer) answer(ps *pendingSend, res stream.AppendResult, err error) {
	if err != nil {
		if isFenced(err) {
			p.t.writerLost()
			return
		}
		p.c.log.Warn("pulsar append failed", "topic", p.t.name.String(), "producer", p.name, "err", err,
			"certainty", stream.CommitCertainty(err))
		code, msg := toServerError(err)
		if code == pb.ServerError_UnknownError || code == pb.ServerError_ServiceNotReady {
			code = pb.ServerError_PersistenceError
		}
		p.c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_SEND_ERROR.Enum(), SendError: &pb.CommandSendError{
			ProducerId: proto.Uint64(p.id), SequenceId: proto.Uint64(ps.seq), Error: code.Enum(), Message: proto.String(msg)}})
		return
	}
	ledgerID, entryID := uint64(p.t.ledger.LedgerID()), uint64(res.Start)
	if res.Duplicate && res.Start < 0 {
		ledgerID, entryID = ^uint64(0), ^uint64(0) // (-1, -1): duplicate older than the window
	}
	if !res.Duplicate {
		p.t.stats.msgIn.Add(int64(ps.numMsgs))
		p.t.stats.bytesIn.Add(int64(ps.bytes))
	}
	p.c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: &pb.CommandSendReceipt{
		ProducerId: proto.Uint64(p.id), SequenceId: proto.Uint64(ps.seq), HighestSequenceId: proto.Uint64(ps.highest),
		MessageId: &pb.MessageIdData{LedgerId: proto.Uint64(ledgerID), EntryId: proto.Uint64(entryID)}}})
}
