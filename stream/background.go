package stream

import (
	"context"
	"time"
)

// startBackground starts the core's periodic work, each on its own
// goroutine so a slow pass of one (a large listing) never delays another
// (session renewal):
//
//   - sessions and leases: renew held append sessions and reader leases;
//   - materialization: plan the streams this process writes;
//   - retention: trim owned streams (and plan idle ones' materialization);
//   - GC: logical GC of owned and deleted streams, then physical GC.
func (c *Core) startBackground() {
	c.every(min(c.cfg.SessionTTL/3, time.Second), func(ctx context.Context) {
		c.renewSessions()
		c.leases.renew(ctx)
	})
	c.every(c.cfg.Lifecycle.Interval, c.scheduleMaterialization)
	c.every(c.cfg.RetentionInterval, func(ctx context.Context) {
		if err := c.retentionPass(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("retention pass failed", "err", err)
		}
	})
	if !c.cfg.Lifecycle.GCDisabled {
		c.every(c.cfg.Lifecycle.GCInterval, func(ctx context.Context) {
			if _, err := c.CollectGarbage(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("gc pass failed", "err", err)
			}
		})
	}
}

// every runs fn every d until the core closes; a pass is bounded by a
// deadline of a few intervals so a hung store cannot stall it forever.
func (c *Core) every(d time.Duration, fn func(context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(c.ctx, max(4*d, 30*time.Second))
			fn(ctx)
			cancel()
		}
	}()
}

// retentionPass enforces retention on every owned stream and plans the
// materialization of owned streams no append session here touches.
func (c *Core) retentionPass(ctx context.Context) error {
	return c.forOwnedStreams(ctx, func(in Info) error {
		if in.State != StateActive && in.State != StateSealed {
			return nil
		}
		if in.Retention != (Retention{}) {
			if _, err := c.enforceOne(ctx, in); err != nil {
				return err
			}
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
