package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// RetentionGuard lets a protocol adapter keep what its consumers still
// need: time and size retention never trim a stream it guards past the
// offset RetentionFloor returns (explicit Trim is not limited by it). The
// Pulsar boundary uses it for subscription backlogs: a message not yet
// acknowledged by every durable subscription stays unless retention is told
// otherwise. An error skips the stream's retention for this pass.
type RetentionGuard interface {
	RetentionFloor(ctx context.Context, info Info) (int64, error)
}

type guardEntry struct {
	match func(Info) bool
	g     RetentionGuard
}

type retentionGuards struct {
	mu sync.Mutex
	gs []guardEntry
}

// RegisterRetentionGuard makes g limit retention of every stream match
// accepts (e.g. by its "protocol" attribute).
func (c *Core) RegisterRetentionGuard(match func(Info) bool, g RetentionGuard) {
	c.guards.mu.Lock()
	c.guards.gs = append(c.guards.gs, guardEntry{match: match, g: g})
	c.guards.mu.Unlock()
}

// floor returns the lowest floor any guard sets for in (h.End if none).
func (c *Core) retentionFloor(ctx context.Context, in Info) (int64, error) {
	c.guards.mu.Lock()
	gs := append([]guardEntry(nil), c.guards.gs...)
	c.guards.mu.Unlock()
	floor := in.EndOffset
	for _, g := range gs {
		if !g.match(in) {
			continue
		}
		f, err := g.g.RetentionFloor(ctx, in)
		if err != nil {
			return 0, err
		}
		floor = min(floor, f)
	}
	return floor, nil
}

// EnforceRetention trims the streams this process owns whose retention says
// so: whole sources (commits, generations) older than Retention.Time, and
// whole sources from the front while the retained size exceeds
// Retention.Bytes, never past a RetentionGuard's floor. It runs every
// RetentionInterval; tests and admin tools may call it directly.
func (c *Core) EnforceRetention(ctx context.Context) error {
	trims := c.lc.retentionTrims.Load()
	defer c.kickIfTrimmed(trims)
	return c.forOwnedStreams(ctx, func(in Info) error {
		c.hintRetention(in)
		if in.Retention == (Retention{}) || in.State != StateActive && in.State != StateSealed {
			return nil
		}
		_, err := c.enforceOne(ctx, in)
		return err
	})
}

// hintRetention tells the stream's WAL provider, if it takes hints
// (provider.RetentionHinter), the stream's time retention — 0 when it has
// none — so the provider can keep its physical
// units (ledgers) shorter than what retention keeps. It names the stream
// and a duration only: the core never learns how the provider lays bytes
// out, and the hint retires nothing.
func (c *Core) hintRetention(in Info) {
	pv, err := c.providerFor(in.Profile)
	if err != nil {
		return
	}
	h, ok := pv.(provider.RetentionHinter)
	if !ok {
		return
	}
	// Whatever the state: a deleted stream's last ledger goes sooner
	// when its provider still knows the retention it had.
	h.HintRetention(uint64(in.ID), in.Retention.Time)
}

// kickIfTrimmed asks for a GC pass now if retention trimmed since the
// counter read `before` (once per retention pass, not once per trim).
func (c *Core) kickIfTrimmed(before int64) {
	if c.lc.retentionTrims.Load() != before {
		c.gcKick()
	}
}

// enforceOne applies retention to one stream and returns the new start.
func (c *Core) enforceOne(ctx context.Context, in Info) (int64, error) {
	h, _, err := c.readHeadView(ctx, in.ID)
	if err != nil {
		return 0, err
	}
	to, newestTS, err := c.retentionCut(ctx, h)
	if err != nil || to <= h.Start {
		return h.Start, err
	}
	floor, err := c.retentionFloor(ctx, h.info())
	if err != nil {
		return h.Start, fmt.Errorf("retention floor: %w", err)
	}
	to = min(to, floor)
	if to <= h.Start {
		return h.Start, nil
	}
	if _, err := c.trim(ctx, in.ID, to); err != nil {
		return h.Start, err
	}
	c.lc.retentionTrims.Add(1)
	if in.Retention.Time > 0 && newestTS > 0 {
		// How long after its retention ended the newest trimmed source
		// went (the retention part of the space held past the window:
		// docs/notes/issue-9.md, session 16).
		c.log.Debug("retention trimmed", "stream", in.ID, "to", to,
			"newest_expired_ago", time.Duration(c.nowMs()-newestTS-in.Retention.Time.Milliseconds())*time.Millisecond)
	}
	return to, nil
}

// retentionScanFirst and retentionScanMax bound how many sources one index
// read of retentionCut asks for: the first read's and the widest.
const (
	retentionScanFirst = 4
	retentionScanMax   = 256
)

// retentionCut walks sources from h.Start and returns the end of the last
// one retention lets go: older than Retention.Time (by its newest entry's
// timestamp, as Kafka judges segments), or keeping the retained size above
// Retention.Bytes. newestTS is the largest MaxTS among the sources it lets
// go (0: none).
func (c *Core) retentionCut(ctx context.Context, h *head) (trimTo, newestTS int64, err error) {
	r := h.Retention
	cutoff := c.nowMs() - r.Time.Milliseconds()
	retained := h.CommittedBytes - h.StartBytes
	trimTo = h.Start
	// cum is the cumulative size at trimTo. Sources may overlap while a
	// merge finishes (a merged generation and the small ones it replaces
	// are both listed): each byte is counted once.
	cum := h.StartBytes
	// Most passes let nothing go: the first source is still inside the
	// window. So the walk reads the index a few sources at a time and
	// widens geometrically, instead of decoding a full page of sources per
	// stream per pass only to look at the first.
	limit := retentionScanFirst
	for trimTo < h.End {
		runs, err := c.runsFrom(ctx, h, trimTo, limit)
		if err != nil {
			return trimTo, newestTS, err
		}
		limit = min(limit*4, retentionScanMax)
		if len(runs) == 0 || runs[0].Start > trimTo {
			return trimTo, newestTS, nil
		}
		for _, d := range runs {
			old := r.Time > 0 && d.MaxTS < cutoff
			big := r.Bytes > 0 && retained > r.Bytes
			if !old && !big {
				return trimTo, newestTS, nil
			}
			newestTS = max(newestTS, d.MaxTS)
			retained -= max(d.CumBytes-max(d.CumBytes-d.Bytes, cum), 0)
			cum = max(cum, d.CumBytes)
			trimTo = max(trimTo, d.End)
		}
	}
	return trimTo, newestTS, nil
}

// forOwnedStreams calls fn for every live stream this process owns, in name
// order. fn's errors are logged per stream and do not stop the pass.
func (c *Core) forOwnedStreams(ctx context.Context, fn func(Info) error) error {
	return c.forOwnedHeads(ctx, func(in Info, _ *head) error { return fn(in) })
}

// forOwnedHeads is forOwnedStreams also handing fn the head the listing
// read (see eachHead); it returns nil only when it visited every stream.
func (c *Core) forOwnedHeads(ctx context.Context, fn func(Info, *head) error) error {
	err := c.eachHead(ctx, "", "", func(l listedStream) bool {
		in := l.info
		if !l.owned && c.cfg.Ownership != nil && !c.cfg.Ownership.OwnsStream(in.Name) {
			return true
		}
		if err := fn(in, l.h); err != nil && !errors.Is(err, ErrStreamNotFound) && ctx.Err() == nil {
			c.log.Warn("lifecycle work failed", "stream", in.ID, "name", in.Name, "err", err)
		}
		return ctx.Err() == nil
	})
	if err == nil {
		err = ctx.Err()
	}
	return err
}
