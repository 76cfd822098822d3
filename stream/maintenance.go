package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

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
			if errors.Is(err, errTrimmedEvidence) {
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
