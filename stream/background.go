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
	trims := c.lc.retentionTrims.Load()
	defer c.kickIfTrimmed(trims) // retired sources start their grace now (gc_schedule.go)
	return c.forOwnedStreams(ctx, func(in Info) error {
		c.hintRetention(in)
		if in.State != StateActive && in.State != StateSealed {
			return nil
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
}
