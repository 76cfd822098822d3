package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// startMaintenance arms the periodic tick that renews the sessions this
// process holds and enforces retention (retention.go; the pass also plans
// idle owned streams' materialization). A tick never blocks on a single
// stream: renewals are queued into the commit pipeline, and a retention pass
// runs asynchronously (one at a time).
//
// Ticks keep running while Close drains (renewals keep the leases of
// draining streams alive) and end when Close cancels c.ctx: Close also
// stops the armed timer, and a tick already running arms no other (arm
// checks c.ctx under c.mu, which Close takes after cancelling). Ticks are
// chained (each arms the next when it is done), so the tick
// state (lastRetention) is only ever touched by one of them at a time.
func (c *Core) startMaintenance() {
	tick := min(c.cfg.SessionTTL/3, time.Second)
	c.lastRetention = c.rt.now()
	var loop func()
	arm := func() {
		c.mu.Lock()
		if c.ctx.Err() == nil {
			c.stopTick = c.rt.afterFunc(tick, loop)
		}
		c.mu.Unlock()
	}
	loop = func() {
		if c.ctx.Err() != nil {
			return
		}
		c.maintenanceTick()
		arm()
	}
	arm()
}

func (c *Core) maintenanceTick() {
	c.renewSessions()
	now := c.rt.now()
	if now.Sub(c.lastRetention) < c.cfg.RetentionInterval || !c.retentionRunning.CompareAndSwap(false, true) {
		return
	}
	c.lastRetention = now
	if !c.goBackground(func() {
		defer c.retentionRunning.Store(false)
		rctx, cancel := c.rt.withTimeout(c.ctx, c.cfg.RetentionInterval)
		defer cancel()
		if err := c.retentionPass(rctx); err != nil && c.ctx.Err() == nil {
			c.log.Warn("retention pass failed", "err", err)
		}
	}) {
		c.retentionRunning.Store(false)
	}
}

// goBackground runs f asynchronously as background work, counted in
// c.background (retention and lifecycle passes, materialization tasks), or
// reports false once Close waits for that work; then f does not run and the
// caller undoes its own bookkeeping. Every c.background.Add goes through
// here: the check and the Add happen under c.mu, where Close sets
// backgroundClosed right before it calls Wait, so every Add happens before
// that Wait, as the sync.WaitGroup contract requires (an Add from zero
// concurrent with Wait may be missed by it, and the race detector reports
// it as a data race), and nothing starts after Close stopped waiting. Work
// may still start while Close drains: only the Wait needs the gate.
func (c *Core) goBackground(f func()) bool {
	c.mu.Lock()
	if c.backgroundClosed {
		c.mu.Unlock()
		return false
	}
	c.background.Add(1)
	c.backgroundN.Add(1)
	c.mu.Unlock()
	c.rt.goFunc(func() {
		defer c.background.Done()
		defer c.backgroundN.Add(-1)
		f()
	})
	return true
}

func (c *Core) renewSessions() {
	c.mu.Lock()
	owners := make([]*owner, 0, len(c.owners))
	for _, o := range c.owners {
		owners = append(owners, o)
	}
	c.mu.Unlock()
	// In stream order, so a simulated run renews (and kicks) in the same
	// order every time.
	slices.SortFunc(owners, func(a, b *owner) int { return cmp.Compare(a.id, b.id) })
	now := c.nowMs()
	for _, o := range owners {
		o.mu.Lock()
		o.m.renewIfDue(now)
		o.flushLocked()
	}
}

// committedIn reports whether run id, ending at end, is committed according
// to head h: in its Pending list, or in the offset index (where the commit
// holding it is the first index entry ending at or after end). An error
// means the question is open, never "not committed".
func (c *Core) committedIn(ctx context.Context, h *head, id runID, end int64) (bool, error) {
	if committed, settled := committedInHead(h, id, end); settled {
		return committed, nil
	}
	return c.committedInIndex(ctx, h, id, end)
}

// committedInHead answers from h alone when it can: settled is false when
// only the indexes can tell.
func committedInHead(h *head, id runID, end int64) (committed, settled bool) {
	for _, d := range h.Pending {
		if d.contains(id) {
			return true, true
		}
	}
	for _, d := range h.GenPending {
		if d.Start < end && end <= d.End && d.contains(id) {
			return true, true
		}
	}
	if end > h.IndexedThrough {
		// A committed run ending here would still be in Pending (runs
		// leave it only after their index entry is confirmed).
		return false, true
	}
	return false, false
}

// errTrimmedEvidence: the run lies below the start offset and the records
// that could prove whether it was committed are already collected. Its
// bytes are not needed either way; whether it was committed stays unknown.
var errTrimmedEvidence = errors.New("nereus/stream: the run was trimmed and its commit evidence collected")

// errLineageLost: the generation serving the run's offsets was restored by
// rebuild-index, which cannot recover the commits a generation came from.
// As with errTrimmedEvidence the bytes are not needed either way.
var errLineageLost = errors.New("nereus/stream: the generation serving the run lost its lineage in a repair")

// committedInIndex looks run id up in the offset index below
// h.IndexedThrough and, where GC has retired the WAL entry of a range that
// a generation now serves, in that generation's lineage.
func (c *Core) committedInIndex(ctx context.Context, h *head, id runID, end int64) (bool, error) {
	recs, err := c.meta.RangeScan(ctx, indexKey(h.ID, end), indexKey(h.ID, h.IndexedThrough+1), 1)
	if err != nil {
		return false, err
	}
	if len(recs) > 0 {
		d, err := decodeIndexRecord(recs[0].Value)
		if err != nil {
			return false, err
		}
		if d.Start < end {
			// The entry covering the run's last offset is the committed
			// one there: ours or not, this is proof.
			return d.contains(id), nil
		}
	}
	if end <= h.GenThrough {
		gens, err := c.scanIndex(ctx, genKey(h.ID, end), genKey(h.ID, h.GenIndexedThrough+1), end <= h.GenIndexedThrough, 1)
		if err != nil {
			return false, err
		}
		if len(gens) > 0 && gens[0].Start < end {
			if !gens[0].contains(id) && gens[0].lineageLost() {
				// Restored by rebuild-index without its lineage: no proof
				// either way. The run's bytes are not needed (the
				// generation serves its offsets).
				return false, errLineageLost
			}
			return gens[0].contains(id), nil
		}
	}
	if end <= h.Start {
		return false, errTrimmedEvidence
	}
	return false, nil
}

// settleIntent decides whether a run an earlier incarnation made durable is
// committed. The answer must be final, so when the run's session is still
// the stream's current one it is fenced first (an epoch bump by CAS): after
// that the old session can never commit again, and a re-read is proof.
func (c *Core) settleIntent(ctx context.Context, in provider.Intent) (bool, error) {
	id := ID(in.Run.Stream)
	want := runID{Epoch: in.Run.Epoch, Token: in.Run.Token, Commit: in.Run.Commit}
	for {
		h, v, err := c.readHead(ctx, id)
		if errors.Is(err, ErrStreamNotFound) || err == nil && h.State == StateDeleted {
			return false, nil // the stream is gone: nothing of it is needed
		}
		if err == nil {
			var committed bool
			committed, err = c.committedIn(ctx, h, want, in.Run.End())
			if errors.Is(err, errTrimmedEvidence) || errors.Is(err, errLineageLost) {
				// Trimmed: its bytes are not needed whatever the answer,
				// which is all Recover uses it for.
				return false, nil
			}
			if err == nil && committed {
				return true, nil
			}
		}
		if err != nil {
			if metadata.Classify(err) != metadata.Unknown {
				return false, err
			}
			// The store did not answer: the proof must be re-read.
			if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
				return false, err
			}
			continue
		}
		if h.Session.Epoch != in.Run.Epoch || h.Session.Token != in.Run.Token || plantedBug == bugRecoverWithoutFence {
			return false, nil // that session can never commit again
		}
		next := h.clone()
		next.Session = sessionRecord{Epoch: h.Session.Epoch + 1, Token: c.random(),
			Writer: c.writerTag(writerIDOf(h.Session.Writer)), Authority: h.Session.Authority}
		next.Commits = 0
		_, err = c.meta.Put(ctx, headKey(id), next.encode(), v)
		switch metadata.Classify(err) {
		case metadata.Applied, metadata.Conflict:
			continue
		case metadata.NotApplied:
			return false, fmt.Errorf("fencing %v to settle an intent: %w", id, err)
		default:
			if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
				return false, err
			}
		}
	}
}
