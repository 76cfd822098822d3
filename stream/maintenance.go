package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// maintenance renews the sessions this process holds and enforces
// retention. It never blocks on a single stream: renewals are queued into
// the commit pipeline without waiting.
func (c *Core) maintenance(ctx context.Context) {
	tick := min(c.cfg.SessionTTL/3, time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	lastRetention := c.cfg.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.renewSessions()
		if now := c.cfg.Now(); now.Sub(lastRetention) >= c.cfg.RetentionInterval {
			lastRetention = now
			rctx, cancel := context.WithTimeout(ctx, c.cfg.RetentionInterval)
			if err := c.EnforceRetention(rctx); err != nil && ctx.Err() == nil {
				c.log.Warn("retention pass failed", "err", err)
			}
			cancel()
		}
	}
}

func (c *Core) renewSessions() {
	c.mu.Lock()
	owners := make([]*owner, 0, len(c.owners))
	for _, o := range c.owners {
		owners = append(owners, o)
	}
	c.mu.Unlock()
	ttl := c.cfg.SessionTTL.Milliseconds()
	now := c.nowMs()
	for _, o := range owners {
		o.mu.Lock()
		due := o.fatal == nil && o.head.Session.ExpiresMs > 0 && o.head.Session.ExpiresMs-now < ttl*2/3
		token := o.sess.Token
		if due {
			o.mutations = append(o.mutations, &mutationOp{done: make(chan struct{}), m: func(h *head) (bool, error) {
				if h.Session.Token != token {
					return false, ErrFenced
				}
				exp := c.nowMs() + ttl
				if h.Session.ExpiresMs >= exp-ttl/3 {
					return false, nil
				}
				h.Session.ExpiresMs = exp
				return true, nil
			}})
		}
		o.mu.Unlock()
		if due {
			c.committer.kick(o)
		}
	}
}

// EnforceRetention trims every stream whose retention says so: whole runs
// older than Retention.Time, and whole runs from the front while the
// retained size exceeds Retention.Bytes. It runs periodically; tests and
// admin tools may call it directly.
func (c *Core) EnforceRetention(ctx context.Context) error {
	after := ""
	for {
		infos, err := c.List(ctx, "", after, 512)
		if err != nil {
			return err
		}
		if len(infos) == 0 {
			return nil
		}
		for _, in := range infos {
			after = in.Name
			if in.Retention == (Retention{}) || in.State != StateActive && in.State != StateSealed {
				continue
			}
			if err := c.enforceOne(ctx, in.ID); err != nil && !errors.Is(err, ErrStreamNotFound) {
				c.log.Warn("retention failed", "stream", in.ID, "name", in.Name, "err", err)
			}
		}
	}
}

func (c *Core) enforceOne(ctx context.Context, id ID) error {
	h, _, err := c.readHeadView(ctx, id)
	if err != nil {
		return err
	}
	r := h.Retention
	cutoff := c.nowMs() - r.Time.Milliseconds()
	retained := h.CommittedBytes - h.StartBytes
	trimTo := h.Start
scan:
	for trimTo < h.End {
		runs, err := c.runsFrom(ctx, h, trimTo, 256)
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			break
		}
		for _, d := range runs {
			old := r.Time > 0 && d.MaxTS < cutoff
			big := r.Bytes > 0 && retained > r.Bytes
			if !old && !big {
				break scan
			}
			retained -= d.CumBytes - max(d.CumBytes-d.Bytes, h.StartBytes)
			trimTo = d.End
		}
	}
	if trimTo > h.Start {
		return c.Trim(ctx, id, trimTo)
	}
	return nil
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
// only the offset index can tell.
func committedInHead(h *head, id runID, end int64) (committed, settled bool) {
	for _, d := range h.Pending {
		if d.contains(id) {
			return true, true
		}
	}
	if end > h.IndexedThrough {
		return false, true
	}
	return false, false
}

// committedInIndex looks run id up in the offset index below
// h.IndexedThrough.
func (c *Core) committedInIndex(ctx context.Context, h *head, id runID, end int64) (bool, error) {
	recs, err := c.meta.RangeScan(ctx, indexKey(h.ID, end), indexKey(h.ID, h.IndexedThrough+1), 1)
	if err != nil {
		return false, err
	}
	if len(recs) == 0 {
		return false, nil
	}
	d, err := decodeIndexRecord(recs[0].Value)
	if err != nil {
		return false, err
	}
	return d.contains(id), nil
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
		if errors.Is(err, ErrStreamNotFound) {
			return false, nil
		}
		if err == nil {
			var committed bool
			committed, err = c.committedIn(ctx, h, want, in.Run.End())
			if err == nil && committed {
				return true, nil
			}
		}
		if err != nil {
			if metadata.Classify(err) != metadata.Unknown {
				return false, err
			}
			// The store did not answer: the proof must be re-read.
			if err := sleepCtx(ctx, unknownBackoff); err != nil {
				return false, err
			}
			continue
		}
		if h.Session.Epoch != in.Run.Epoch || h.Session.Token != in.Run.Token {
			return false, nil // that session can never commit again
		}
		next := h.clone()
		next.Session = sessionRecord{Epoch: h.Session.Epoch + 1, Token: randomUint64(),
			Writer: c.writerTag(writerIDOf(h.Session.Writer)), Authority: h.Session.Authority}
		next.Commits = 0
		_, err = c.meta.Put(ctx, headKey(id), next.encode(), v)
		switch metadata.Classify(err) {
		case metadata.Applied, metadata.Conflict:
			continue
		case metadata.NotApplied:
			return false, fmt.Errorf("fencing %v to settle an intent: %w", id, err)
		default:
			if err := sleepCtx(ctx, unknownBackoff); err != nil {
				return false, err
			}
		}
	}
}
