package bookkeeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	"github.com/nereusstream/nereus-go/bookkeeper/proto"
)

// RecoverLedger is the recovery open: it makes sure the ledger is CLOSED at
// exactly the entries its writer could have had acknowledged, and returns a
// reader over the result. Use it only to take over from a dead (or
// presumed dead) owner: it fences the ledger, so a live writer loses it.
//
// Steps (BookKeeper's LedgerRecoveryOp):
//  1. CLOSED already: nothing to do.
//  2. CAS OPEN -> IN_RECOVERY (an IN_RECOVERY ledger is recovered again:
//     fencing and recovery adds are idempotent, so concurrent recoverers
//     are safe).
//  3. Fencing read of the last entry on every bookie of the last ensemble
//     until the answers cover every write set. From then on the old
//     writer cannot get any add acknowledged by an ack quorum.
//  4. From LAC+1 on, read each entry from its write set (fencing reads):
//     found on any bookie -> recovery-add the same bytes to the write set
//     and wait for the ack quorum; missing on WQ-AQ+1 bookies -> the end
//     (such an entry cannot have been acknowledged).
//  5. CAS IN_RECOVERY -> CLOSED with lastEntryId and length. If another
//     recoverer closed it first, its result stands.
//
// Outcomes: a reader over the CLOSED ledger (applied, or already closed);
// ErrRecoveryIncomplete (not enough bookies answered; the ledger may be
// fenced and IN_RECOVERY, both safe to repeat: retry later);
// ErrOutcomeUnknown (a metadata CAS could not be settled before ctx ended:
// retry); ErrUnauthorized, ErrNoSuchLedger.
func (c *Client) RecoverLedger(ctx context.Context, id int64, o OpenOptions) (*Reader, error) {
	if c.closed.Load() {
		return nil, ErrClientClosed
	}
	md, v, err := c.readMetadata(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := checkOpen(id, md, o); err != nil {
		return nil, err
	}
	for md.State == meta.StateOpen {
		next := md.Clone()
		next.State = meta.StateInRecovery
		nv, cur, cv, err := c.writeMetadataSettled(ctx, id, next, v)
		if err == nil {
			md, v = next, nv
			break
		}
		if errors.Is(err, ErrBadVersion) && cur != nil {
			md, v = cur, cv
			continue
		}
		return nil, err
	}
	if md.State == meta.StateClosed {
		return newReader(c, id, md, v)
	}

	d, err := proto.NewDigester(md.DigestType, md.Password)
	if err != nil {
		return nil, err
	}
	mk := proto.MasterKey(md.Password)
	res, err := c.readLastConfirmed(ctx, id, md, d, &mk)
	if err != nil {
		return nil, err
	}
	lac := max(res.lac, md.Last().FirstEntryID-1)
	var length int64
	switch {
	case lac < 0:
	case res.haveLength && lac == res.lac:
		length = res.lacLength
	default:
		// The LAC entry reached its ack quorum, so a plain read finds it.
		ent, err := c.readEntry(ctx, id, md, d, lac)
		if err != nil {
			return nil, fmt.Errorf("%w: reading LAC entry %d of ledger %d: %v", ErrRecoveryIncomplete, lac, id, err)
		}
		length = ent.Length
	}

	// Recovery reads are sequential; the re-adds they trigger run
	// concurrently and must all reach the ack quorum before the close.
	var adds []chan error
	for e := lac + 1; ; e++ {
		body, h, found, err := c.recoveryRead(ctx, id, md, d, &mk, e)
		if err != nil {
			return nil, err
		}
		if !found {
			break
		}
		ch := make(chan error, 1)
		go func() { ch <- c.recoveryAdd(ctx, id, md, &mk, e, body) }()
		adds = append(adds, ch)
		lac, length = e, h.Length
	}
	for _, ch := range adds {
		if err := <-ch; err != nil {
			return nil, err
		}
	}

	next := md.Clone()
	next.State, next.LastEntryID, next.Length = meta.StateClosed, lac, length
	for {
		nv, cur, cv, err := c.writeMetadataSettled(ctx, id, next, v)
		if err == nil {
			c.cfg.Logger.Info("bookkeeper: ledger recovered", "ledger", id, "lastEntryId", lac, "length", length)
			return newReader(c, id, next, nv)
		}
		if !errors.Is(err, ErrBadVersion) || cur == nil {
			return nil, err
		}
		switch cur.State {
		case meta.StateClosed:
			// Another recoverer finished first; the metadata is the truth.
			if cur.LastEntryID != lac {
				c.cfg.Logger.Warn("bookkeeper: ledger closed by a concurrent recovery at a different entry",
					"ledger", id, "theirs", cur.LastEntryID, "ours", lac)
			}
			return newReader(c, id, cur, cv)
		case meta.StateInRecovery:
			if !sameSegments(cur, md) {
				return nil, fmt.Errorf("%w: ledger %d ensembles changed during recovery", ErrRecoveryIncomplete, id)
			}
			v = cv
			next = cur.Clone()
			next.State, next.LastEntryID, next.Length = meta.StateClosed, lac, length
		default:
			return nil, fmt.Errorf("%w: ledger %d went back to %s during recovery", ErrRecoveryIncomplete, id, cur.State)
		}
	}
}

// recoveryRead asks every bookie of entry e's write set with a fencing read.
// Found on any bookie with a valid digest -> found. Missing (ENOENTRY or
// ENOLEDGER) on WQ-AQ+1 bookies -> not found: fewer than AQ bookies can
// hold it, so it was never acknowledged. Neither, once all answered ->
// ErrRecoveryIncomplete.
func (c *Client) recoveryRead(ctx context.Context, id int64, md *meta.LedgerMetadata, d *proto.Digester,
	mk *[proto.MasterKeyLen]byte, e int64) ([]byte, proto.EntryHeader, bool, error) {
	seg := md.SegmentFor(e)
	wq, aq := int(md.WriteQuorum), int(md.AckQuorum)
	ws := writeSet(e, len(seg.Ensemble), wq)
	frame := proto.AppendReadRequest(nil, id, e, proto.FlagDoFencing|proto.FlagHighPriority, mk)
	type ans struct {
		bookie string
		resp   proto.Response
		err    error
	}
	ch := make(chan ans, len(ws))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, idx := range ws {
		bookie := seg.Ensemble[idx]
		go func() {
			r, err := c.call(ctx, bookie, reqKey{op: proto.OpRead, ledger: id, entry: e}, frame)
			ch <- ans{bookie, r, err}
		}()
	}
	missing := 0
	var lastErr error
	for range ws {
		var a ans
		select {
		case a = <-ch:
		case <-ctx.Done():
			return nil, proto.EntryHeader{}, false, ctx.Err()
		}
		err := a.err
		if err == nil {
			err = rcError(a.bookie, a.resp.RC)
		}
		switch {
		case err == nil:
			h, _, verr := d.VerifyEntry(a.resp.Body, id, e)
			if verr == nil {
				return a.resp.Body, h, true, nil
			}
			lastErr = fmt.Errorf("%w: bookie %s: %v", ErrCorrupt, a.bookie, verr)
		case errors.Is(err, ErrNoEntry):
			missing++
			if missing >= wq-aq+1 {
				return nil, proto.EntryHeader{}, false, nil
			}
		case errors.Is(err, ErrUnauthorized):
			return nil, proto.EntryHeader{}, false, err
		default:
			lastErr = err
		}
	}
	return nil, proto.EntryHeader{}, false, fmt.Errorf("%w: ledger %d entry %d: neither found nor absent on enough bookies: %v",
		ErrRecoveryIncomplete, id, e, lastErr)
}

// recoveryAdd writes the entry's stored bytes unchanged to its write set
// with RECOVERY_ADD|HIGH_PRIORITY (accepted by fenced bookies) and waits
// for the ack quorum, resending to failed bookies until AddTimeout.
func (c *Client) recoveryAdd(ctx context.Context, id int64, md *meta.LedgerMetadata, mk *[proto.MasterKeyLen]byte, e int64, entry []byte) error {
	seg := md.SegmentFor(e)
	ws := writeSet(e, len(seg.Ensemble), int(md.WriteQuorum))
	frame := make([]byte, 0, 4+4+proto.MasterKeyLen+len(entry))
	frame = proto.AppendAddFrameForEntry(frame, mk, proto.FlagRecoveryAdd|proto.FlagHighPriority, entry)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AddTimeout)
	defer cancel()
	results := make(chan error, len(ws))
	for _, idx := range ws {
		bookie := seg.Ensemble[idx]
		go func() {
			backoff := c.cfg.ResendBackoff
			for {
				r, err := c.call(ctx, bookie, reqKey{op: proto.OpAdd, ledger: id, entry: e}, frame)
				if err == nil {
					err = rcError(bookie, r.RC)
				}
				if err == nil || errors.Is(err, ErrUnauthorized) || ctx.Err() != nil {
					results <- err
					return
				}
				select {
				case <-ctx.Done():
					results <- err
					return
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, time.Second)
			}
		}()
	}
	acks := 0
	var lastErr error
	for range ws {
		err := <-results
		if err == nil {
			acks++
			if acks >= int(md.AckQuorum) {
				return nil
			}
			continue
		}
		lastErr = err
	}
	return fmt.Errorf("%w: recovery add of ledger %d entry %d reached %d of %d acks: %v",
		ErrRecoveryIncomplete, id, e, acks, md.AckQuorum, lastErr)
}
