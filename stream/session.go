package stream

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

func writerIDOf(tag string) string {
	if i := strings.IndexByte(tag, 0); i >= 0 {
		return tag[:i]
	}
	return tag
}

// acquireVerdict is what AcquireSession does after reading the head.
type acquireVerdict uint8

const (
	acquireRefuse   acquireVerdict = iota + 1 // return err
	acquireOurs                               // our own earlier CAS applied: install the stored head
	acquireTakeOver                           // CAS next over the stored version
)

// decideAcquire applies the takeover rules to the stored head h. It is the
// whole decision of AcquireSession: pure, so the simulator and the blocking
// driver below share it.
//
// Takeover rules, checked against the session stored in the head:
//   - a lower AuthorityEpoch than the stored one is refused (ErrFenced);
//   - a higher AuthorityEpoch takes over even a live session;
//   - the same WriterID takes over at once (an earlier incarnation of this
//     writer, e.g. before a crash, must not block its successor);
//   - an expired session of another writer needs StealExpired;
//   - a live session of another writer is ErrSessionBusy.
//
// Taking over bumps the epoch in the head by CAS, which fences the previous
// writer: its next head CAS fails on the version and, re-reading, it finds
// a session that is not its own.
func decideAcquire(h *head, id ID, opts SessionOptions, token uint64, writerTag string, ttlMs, nowMs int64) (acquireVerdict, *head, error) {
	if h.State == StateDeleted || h.State == StateDeleting {
		return acquireRefuse, nil, fmt.Errorf("%w: %v", ErrStreamNotFound, id)
	}
	if h.Session.Token == token {
		return acquireOurs, h, nil
	}
	cur := h.Session
	live := cur.Writer != "" && nowMs < cur.ExpiresMs
	switch {
	case opts.AuthorityEpoch > 0 && opts.AuthorityEpoch < cur.Authority:
		return acquireRefuse, nil, fmt.Errorf("%w: authority epoch %d is below the stream's %d", ErrFenced, opts.AuthorityEpoch, cur.Authority)
	case opts.AuthorityEpoch > cur.Authority, cur.Writer == "", writerIDOf(cur.Writer) == opts.WriterID:
	case live:
		return acquireRefuse, nil, fmt.Errorf("%w: %q holds it until %s", ErrSessionBusy, writerIDOf(cur.Writer),
			time.UnixMilli(cur.ExpiresMs).UTC().Format(time.RFC3339))
	case !opts.StealExpired:
		return acquireRefuse, nil, fmt.Errorf("%w: expired session of %q (set StealExpired to take over)", ErrSessionBusy, writerIDOf(cur.Writer))
	}
	next := h.clone()
	next.Session = sessionRecord{
		Epoch: cur.Epoch + 1, Token: token, Writer: writerTag,
		Authority: max(cur.Authority, opts.AuthorityEpoch), ExpiresMs: nowMs + ttlMs,
	}
	next.Commits = 0
	return acquireTakeOver, next, nil
}

// AcquireSession implements Storage (rules: decideAcquire).
func (c *Core) AcquireSession(ctx context.Context, id ID, opts SessionOptions) (Session, error) {
	if opts.WriterID == "" {
		opts.WriterID = c.cfg.WriterID
	}
	if strings.IndexByte(opts.WriterID, 0) >= 0 {
		return Session{}, fmt.Errorf("%w: WriterID contains NUL", ErrInvalidArgument)
	}
	ttl := opts.TTL
	if ttl <= 0 {
		ttl = c.cfg.SessionTTL
	}
	if c.isClosed() {
		return Session{}, ErrClosed
	}
	if o := c.owner(id); o != nil {
		if sess, same := o.session(opts.WriterID, opts.AuthorityEpoch); same {
			return sess, nil
		}
	}
	token := c.random()
	for {
		h, v, err := c.readHead(ctx, id)
		if err != nil {
			return Session{}, err
		}
		verdict, next, err := decideAcquire(h, id, opts, token, c.writerTag(opts.WriterID), ttl.Milliseconds(), c.nowMs())
		switch verdict {
		case acquireRefuse:
			return Session{}, err
		case acquireOurs:
			return c.installOwner(h, v, opts.WriterID)
		}
		nv, err := c.meta.Put(ctx, headKey(id), next.encode(), v)
		switch metadata.Classify(err) {
		case metadata.Applied:
			return c.installOwner(next, nv, opts.WriterID)
		case metadata.Conflict:
			continue
		case metadata.NotApplied:
			return Session{}, err
		default:
			if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
				return Session{}, fmt.Errorf("acquiring session on %v: outcome unknown: %w", id, err)
			}
		}
	}
}

func (c *Core) installOwner(h *head, v metadata.Version, writerID string) (Session, error) {
	prov, err := c.providerFor(h.Profile)
	if err != nil {
		return Session{}, err
	}
	sess := Session{Stream: h.ID, Epoch: h.Session.Epoch, Token: h.Session.Token, WriterID: writerID}
	o := newOwner(c, h, v, sess, prov)
	c.mu.Lock()
	prev := c.owners[h.ID]
	c.owners[h.ID] = o
	if prev != nil {
		c.replaced[prev] = struct{}{}
	}
	c.mu.Unlock()
	if prev != nil {
		prev.fail(fmt.Errorf("%w: stream %v taken over by session epoch %d", ErrFenced, h.ID, sess.Epoch))
		c.pruneReplaced()
	}
	c.tail.resetIfNotContiguous(h.ID, h.End)
	c.watch.local(h.ID)
	c.metrics.sessionsAcquired.Add(1)
	o.mu.Lock()
	o.flushLocked() // publish the index entries the head still lists as pending
	return sess, nil
}

// ReleaseSession implements Storage: in-flight appends finish first, then
// the session's lease is ended in the head so another writer can take over
// without waiting for expiry.
func (c *Core) ReleaseSession(ctx context.Context, s Session) error {
	o := c.owner(s.Stream)
	if o == nil {
		return fmt.Errorf("%w: session epoch %d is not held by this process", ErrFenced, s.Epoch)
	}
	if held, _ := o.session("", 0); held.Token != s.Token {
		return fmt.Errorf("%w: session epoch %d is not held by this process", ErrFenced, s.Epoch)
	}
	o.drain(ctx)
	_, err := o.mutate(ctx, func(h *head) (bool, error) {
		if h.Session.Token != s.Token {
			return false, ErrFenced
		}
		if h.Session.Writer == "" {
			return false, nil
		}
		// A released session names no writer: anyone may acquire next,
		// and the epoch still only grows.
		h.Session.ExpiresMs = 0
		h.Session.Writer = ""
		return true, nil
	})
	o.fail(fmt.Errorf("%w: session released", ErrFenced))
	c.dropOwner(o)
	if err == errOwnerGone {
		return nil
	}
	return err
}

// AppendAsync implements Storage.
func (c *Core) AppendAsync(s Session, req AppendRequest) *AppendFuture {
	f := NewAppendFuture()
	if err := validateAppend(req); err != nil {
		f.Resolve(AppendResult{}, err)
		return f
	}
	if c.isClosed() {
		f.Resolve(AppendResult{}, ErrClosed)
		return f
	}
	o := c.owner(s.Stream)
	if o == nil {
		f.Resolve(AppendResult{}, fmt.Errorf("%w: no live session of this process on stream %v (acquire one)", ErrFenced, s.Stream))
		return f
	}
	if err := c.materializeBackpressure(o); err != nil {
		f.Resolve(AppendResult{}, err)
		return f
	}
	o.appendAsync(s, req, f)
	return f
}

// Append implements Storage.
func (c *Core) Append(ctx context.Context, s Session, req AppendRequest) (AppendResult, error) {
	return c.AppendAsync(s, req).Wait(ctx)
}

func validateAppend(req AppendRequest) error {
	if len(req.Entries) == 0 {
		return fmt.Errorf("%w: append with no entries", ErrInvalidArgument)
	}
	if len(req.Entries) > MaxAppendEntries {
		return fmt.Errorf("%w: %d entries in one append (max %d)", ErrInvalidArgument, len(req.Entries), MaxAppendEntries)
	}
	for i, e := range req.Entries {
		if e.RecordCount == 0 {
			return fmt.Errorf("%w: entry %d has RecordCount 0", ErrInvalidArgument, i)
		}
		if len(e.Payload) > MaxEntryBytes {
			return fmt.Errorf("%w: entry %d is %d bytes (max %d)", ErrInvalidArgument, i, len(e.Payload), MaxEntryBytes)
		}
	}
	if q := req.Sequence; q != nil {
		if q.Mode != SequenceContiguous && q.Mode != SequenceMonotonic {
			return fmt.Errorf("%w: unknown sequence mode %d", ErrInvalidArgument, q.Mode)
		}
		if q.LastSeq < q.FirstSeq {
			return fmt.Errorf("%w: LastSeq %d < FirstSeq %d", ErrInvalidArgument, q.LastSeq, q.FirstSeq)
		}
	}
	return nil
}
