package stream

import (
	"context"
	"sync/atomic"
	"time"
)

// startLifecycle arms the periodic lifecycle work, each kind one pass at a
// time on its own asynchronous run (through the runtime seam, so the
// simulator drives it on its clock):
//
//   - materialization: plan the streams this process writes, and renew
//     the durable reader leases this process holds;
//   - GC: logical GC of owned and deleted streams, then physical GC
//     (every GCInterval, and earlier when a trim or a grace end makes work
//     due: gc_schedule.go).
//
// Retention runs from the maintenance tick (maintenance.go).
func (c *Core) startLifecycle() {
	var matRunning atomic.Bool
	c.periodic(c.cfg.Lifecycle.Interval, &matRunning, func(ctx context.Context) {
		c.scheduleMaterialization(ctx)
		c.leases.renew(ctx)
	})
	if !c.cfg.Lifecycle.GCDisabled {
		c.startGC() // every GCInterval, and when work is due (gc_schedule.go)
	}
	c.startShortRetention()
}

// shortRetention is the state of the retention passes a short time
// retention adds between the maintenance tick's (every RetentionInterval).
//
// A source leaves at the first pass after its retention ends, so on
// average half a pass interval late, and the WAL unit holding it waits
// that long too: with retention.ms of seconds that was ~0.5 s of the
// ~3.4 s between a source's expiry and its unit's deletion
// (docs/notes/issue-9.md, session 16). So the passes run every
// retentionEvery: a twentieth of the shortest time retention an owned
// stream had at the last pass, never more often than four times per
// RetentionInterval, and never less often than the tick. A stream whose
// retention is a minute or more sees no extra pass at all.
type shortRetention struct {
	shortest  atomic.Int64 // ns: shortest time retention of an owned live stream at the last complete pass (0: none)
	lastStart atomic.Int64 // ns since the Unix epoch (runtime clock): start of the last retention pass of either kind
}

// retentionEvery is how often retention runs given the shortest owned
// time retention seen.
func (c *Core) retentionEvery() time.Duration {
	iv := c.cfg.RetentionInterval
	r := time.Duration(c.shortRetention.shortest.Load())
	if r <= 0 {
		return iv
	}
	return min(iv, max(r/20, iv/4))
}

// startShortRetention arms the extra passes: a chained timer that wakes
// when the next pass is due by retentionEvery, and otherwise every quarter
// RetentionInterval to see whether retention got short (an atomic load). It shares
// retentionRunning with the maintenance tick, so passes never overlap.
func (c *Core) startShortRetention() {
	c.mu.Lock()
	slot := len(c.periodicStops)
	c.periodicStops = append(c.periodicStops, nil)
	c.mu.Unlock()
	var loop func()
	arm := func(d time.Duration) {
		c.mu.Lock()
		if c.ctx.Err() == nil {
			c.periodicStops[slot] = c.rt.afterFunc(d, loop)
		}
		c.mu.Unlock()
	}
	loop = func() {
		if c.ctx.Err() != nil {
			return
		}
		every := c.retentionEvery()
		if every >= c.cfg.RetentionInterval {
			// The tick's passes suffice; look again soon, as the tick's
			// next pass may find a short retention.
			arm(c.cfg.RetentionInterval / 4)
			return
		}
		since := c.rt.now().Sub(time.Unix(0, c.shortRetention.lastStart.Load()))
		if since >= every && c.retentionRunning.CompareAndSwap(false, true) {
			if !c.goBackground(func() {
				defer c.retentionRunning.Store(false)
				ctx, cancel := c.rt.withTimeout(c.ctx, c.cfg.RetentionInterval)
				defer cancel()
				if err := c.retentionPass(ctx); err != nil && c.ctx.Err() == nil {
					c.log.Warn("retention pass failed", "err", err)
				}
			}) {
				c.retentionRunning.Store(false)
			}
			since = 0
		}
		arm(max(every-since, every/4))
	}
	arm(c.cfg.RetentionInterval / 4)
}

// periodic runs fn every d until the core closes, skipping a tick while
// the previous pass still runs; a pass is bounded by a deadline of a few
// intervals so a hung store cannot stall it forever.
//
// The armed timer is kept in c.periodicStops so Close stops it (a tick
// already running arms no other: arm checks c.ctx under c.mu, which Close
// takes after cancelling) — nothing of a closed core stays scheduled.
func (c *Core) periodic(d time.Duration, running *atomic.Bool, fn func(context.Context)) {
	c.mu.Lock()
	slot := len(c.periodicStops)
	c.periodicStops = append(c.periodicStops, nil)
	c.mu.Unlock()
	var loop func()
	arm := func() {
		c.mu.Lock()
		if c.ctx.Err() == nil {
			c.periodicStops[slot] = c.rt.afterFunc(d, loop)
		}
		c.mu.Unlock()
	}
	loop = func() {
		if c.ctx.Err() != nil {
			return
		}
		if running.CompareAndSwap(false, true) && !c.goBackground(func() {
			defer running.Store(false)
			ctx, cancel := c.rt.withTimeout(c.ctx, max(4*d, 30*time.Second))
			defer cancel()
			fn(ctx)
		}) {
			running.Store(false)
		}
		arm()
	}
	arm()
}

// retentionPass enforces retention on every owned stream and plans the
// materialization of owned streams no append session here touches.
func (c *Core) retentionPass(ctx context.Context) error {
	c.shortRetention.lastStart.Store(c.rt.now().UnixNano())
	trims := c.lc.retentionTrims.Load()
	defer c.kickIfTrimmed(trims) // retired sources start their grace now (gc_schedule.go)
	var shortest time.Duration
	err := c.forOwnedStreams(ctx, func(in Info) error {
		c.hintRetention(in)
		if in.State != StateActive && in.State != StateSealed {
			return nil
		}
		if r := in.Retention.Time; r > 0 && (shortest == 0 || r < shortest) {
			shortest = r
		}
		if in.Retention != (Retention{}) {
			if _, err := c.enforceOne(ctx, in); err != nil {
				return err
			}
		}
		if err := c.compactPass(ctx, in); err != nil {
			c.log.Warn("compaction failed", "stream", in.ID, "name", in.Name, "err", err)
		}
		if c.owner(in.ID) == nil && c.materializes(in.Profile) {
			h, _, err := c.readHeadView(ctx, in.ID)
			if err != nil {
				return err
			}
			c.mat.consider(h)
		}
		return nil
	})
	if old := time.Duration(c.shortRetention.shortest.Load()); err == nil || shortest > 0 && (old == 0 || shortest < old) {
		// A pass cut short only ever makes the passes more frequent.
		c.shortRetention.shortest.Store(int64(shortest))
	}
	return err
}
