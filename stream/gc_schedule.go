package stream

import (
	"context"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// When GC passes run.
//
// A full pass (CollectGarbage) runs every GCInterval. Two kinds of work
// become due between intervals, and waiting for the next one only keeps
// bytes on disk longer (with seconds of retention, R + ~4 s of data was
// kept, about 1.3 s of it interval rounding; docs/notes/issue-9.md,
// session 12):
//
//   - a trim moved a stream's start (a retention pass that trimmed, Trim):
//     the WAL units it retired are first judged by the next full pass, and
//     their grace period starts there. gcKick runs that pass now, and the
//     interval restarts from it: while retention trims every interval (the
//     defaults, 1 s both) there is still one full pass per interval, in
//     phase with the trims.
//   - a retired unit's grace period ends (ReclaimReport.NextDue): a full
//     pass that starts within gcMinGap after that does the deleting (in
//     steady retention the next trim's pass comes a moment after the grace
//     of the previous-but-one trim ends; a kicked pass due a moment before a
//     grace end waits for it); if none does, a due pass
//     (ReclaimOptions.DueOnly) judges just the units whose grace has ended
//     again and deletes those still retired.
//
// Neither changes a proof. Every delete is still decided by a judge call of
// the pass that deletes (fresh heads; protections read after the
// unpublication), and the grace still counts from the pass that first found
// the unit retired — only no longer rounded up to the next interval.
// Scheduled passes never overlap, and no pass starts sooner than gcMinGap after the previous
// one started, so a burst of trims (Kafka DeleteRecords in a loop) costs at
// most one pass per gcMinGap (250 ms by default).
type gcSched struct {
	mu      sync.Mutex
	slot    int       // c.periodicStops index of the armed timer
	armedAt time.Time // when the armed timer fires (zero: none armed)
	armGen  uint64    // the armed timer's generation: a stale one does nothing
	running bool
	enabled bool
	// lastStart: start of the last pass of either kind; nextFull: when the
	// periodic full pass is due; kicked: a full pass was asked for; due:
	// the earliest grace end a provider reported (zero: none); holdUntil:
	// a full pass waits for a grace end due in a moment.
	lastStart, nextFull, due, holdUntil time.Time
	kicked                              bool
}

// gcMinGap is the shortest time between the starts of two passes: a
// quarter of the interval, at most 250 ms.
func (c *Core) gcMinGap() time.Duration {
	return min(c.cfg.Lifecycle.GCInterval/4, 250*time.Millisecond)
}

// startGC arms the GC passes.
func (c *Core) startGC() {
	c.mu.Lock()
	slot := len(c.periodicStops)
	c.periodicStops = append(c.periodicStops, nil)
	c.mu.Unlock()
	s := &c.gcs
	s.mu.Lock()
	s.slot, s.enabled = slot, true
	s.nextFull = c.rt.now().Add(c.cfg.Lifecycle.GCInterval)
	c.gcArmLocked()
	s.mu.Unlock()
}

// gcKick asks for a full pass as soon as gcMinGap allows: a trim retired
// sources.
func (c *Core) gcKick() {
	s := &c.gcs
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.enabled {
		return
	}
	s.kicked = true
	c.gcArmLocked()
}

// gcNoteDue records a provider's next grace end (zero: none).
func (c *Core) gcNoteDue(due time.Time) {
	if due.IsZero() {
		return
	}
	s := &c.gcs
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.enabled || !s.due.IsZero() && !due.Before(s.due) {
		return
	}
	s.due = due
	c.gcArmLocked()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// gcWakeLocked is when the next pass should start.
func (c *Core) gcWakeLocked() time.Time {
	s := &c.gcs
	at := s.nextFull
	if s.kicked {
		at = s.lastStart // as early as the gap allows
	}
	if dueAt := s.due.Add(c.gcMinGap()); !s.due.IsZero() && dueAt.Before(at) {
		at = dueAt
	}
	return later(later(at, s.lastStart.Add(c.gcMinGap())), s.holdUntil)
}

// gcArmLocked (re)arms the timer for gcWakeLocked unless a pass runs (its
// end arms it) or an earlier wake-up is already armed. Called with c.gcs.mu.
func (c *Core) gcArmLocked() {
	s := &c.gcs
	if s.running {
		return
	}
	at := c.gcWakeLocked()
	if !s.armedAt.IsZero() && !at.Before(s.armedAt) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return
	}
	if stop := c.periodicStops[s.slot]; stop != nil {
		stop()
	}
	s.armGen++
	gen := s.armGen
	s.armedAt = at
	c.periodicStops[s.slot] = c.rt.afterFunc(max(at.Sub(c.rt.now()), 0), func() { c.gcFire(gen) })
}

// gcFire starts the pass that is due, if any.
func (c *Core) gcFire(gen uint64) {
	if c.ctx.Err() != nil {
		return
	}
	s := &c.gcs
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.armGen || s.running {
		return // replaced by an earlier wake-up, or a pass runs (it re-arms)
	}
	s.armedAt = time.Time{}
	now := c.rt.now()
	if now.Before(c.gcWakeLocked()) {
		c.gcArmLocked()
		return
	}
	gap := c.gcMinGap()
	full := s.kicked || !now.Before(s.nextFull)
	due := !s.due.IsZero() && !now.Before(s.due.Add(gap))
	switch {
	case full && s.due.After(now) && s.due.Sub(now) <= gap && s.holdUntil.IsZero():
		// Units whose grace ends in a moment: one pass for both, then.
		s.holdUntil = s.due
		c.gcArmLocked()
		return
	case due && !full && s.nextFull.Sub(now) <= gap:
		// The periodic pass is due in a moment and does this too.
		s.due = time.Time{}
		c.gcArmLocked()
		return
	case !full && !due:
		c.gcArmLocked()
		return
	}
	s.running, s.lastStart = true, now
	s.due, s.holdUntil = time.Time{}, time.Time{} // the pass reports what is due next
	if full {
		s.kicked, s.nextFull = false, now.Add(c.cfg.Lifecycle.GCInterval)
	}
	if !c.goBackground(func() {
		ctx, cancel := c.rt.withTimeout(c.ctx, max(4*c.cfg.Lifecycle.GCInterval, 30*time.Second))
		defer cancel()
		if full {
			if _, err := c.CollectGarbage(ctx); err != nil && c.ctx.Err() == nil {
				c.log.Warn("gc pass failed", "err", err)
			}
		} else {
			c.collectDue(ctx)
		}
		s.mu.Lock()
		s.running = false
		c.gcArmLocked()
		s.mu.Unlock()
	}) {
		s.running = false
	}
}

// collectDue is a due pass: each provider's units whose grace has ended
// are judged again and deleted if still retired. What is pending stays the
// full passes' report; a due pass only adds deletions (audit, counters).
func (c *Core) collectDue(ctx context.Context) {
	c.lc.gcDuePasses.Add(1)
	opts := provider.ReclaimOptions{Grace: c.cfg.Lifecycle.GCGrace, DryRun: c.cfg.Lifecycle.GCDryRun, Now: c.rt.now(), Clock: c.rt.now, DueOnly: true}
	var pend gcPending
	for _, p := range c.providers() {
		r, ok := p.(provider.Reclaimer)
		if !ok {
			continue
		}
		rep, err := r.Reclaim(ctx, c.judgeRuns, opts)
		if err != nil && c.ctx.Err() == nil {
			c.log.Warn("gc due pass failed", "provider", p.Name(), "err", err)
		}
		c.accountReclaim(p.Name(), rep, &pend)
		c.gcNoteDue(rep.NextDue)
	}
}
