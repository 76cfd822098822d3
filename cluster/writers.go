package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/stream"
)

// ErrNotOwner matches every NotOwnerError.
var ErrNotOwner = errors.New("nereus/cluster: this node does not own the stream")

// ErrHandoffPending: this node owns the stream, but its previous owner is
// alive and has not released it within Config.HandoffWait. Retriable: the
// client should retry (Kafka NOT_LEADER_OR_FOLLOWER, Pulsar
// ServiceNotReady).
var ErrHandoffPending = errors.New("nereus/cluster: the previous owner has not handed the stream over yet; retry")

// NotOwnerError says which broker owns a key instead (Owner is valid when
// HasOwner; no broker may be active at all).
type NotOwnerError struct {
	Key      string
	Owner    Broker
	HasOwner bool
}

func (e *NotOwnerError) Error() string {
	if !e.HasOwner {
		return fmt.Sprintf("nereus/cluster: %s has no owner (no active broker)", e.Key)
	}
	return fmt.Sprintf("nereus/cluster: %s is owned by broker %d (%s)", e.Key, e.Owner.KafkaID, e.Owner.NodeID)
}

// Is makes errors.Is(err, ErrNotOwner) match.
func (e *NotOwnerError) Is(target error) bool { return target == ErrNotOwner }

func (n *Node) notOwner(key string) error {
	b, ok := n.OwnerOf(key)
	return &NotOwnerError{Key: key, Owner: b, HasOwner: ok}
}

// writerEntry is this node's append session on one stream. op is held
// while acquiring or releasing, so concurrent callers wait for one attempt
// instead of racing their own; sess, held and acquired are guarded by the
// node's mu (read on every append without waiting for op).
type writerEntry struct {
	id   stream.ID
	name string

	op       sync.Mutex
	sess     stream.Session
	held     bool
	acquired time.Time
}

// Writer returns this node's append session on the stream (id, named
// name), taking it if the node owns the stream and does not hold it yet.
// It never assumes ownership: the session is acquired through the core,
// whose head CAS fences any previous writer.
//
// Taking over, by what the stream head says about the current session:
//   - none, expired, or this node's own (an earlier incarnation): acquire;
//   - held by another registered broker (alive, about to hand over): wait
//     for its release (a head change) up to HandoffWait, then
//     ErrHandoffPending;
//   - held by a writer that is not registered (dead: its registry session
//     expired): pre-empt it with AuthorityEpoch = its authority + 1, without
//     waiting for the append session's TTL. The head CAS makes this safe
//     even if the old writer still runs: its next commit fails.
//
// A node that does not own the stream gets a *NotOwnerError naming the
// owner. Reads never need a Writer.
func (n *Node) Writer(ctx context.Context, id stream.ID, name string) (stream.Session, error) {
	if !n.Owns(name) {
		return stream.Session{}, n.notOwner(name)
	}
	var e *writerEntry
	for {
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return stream.Session{}, n.notOwner(name)
		}
		e = n.writers[id]
		if e == nil {
			e = &writerEntry{id: id, name: name}
			n.writers[id] = e
		}
		if e.held {
			sess := e.sess
			n.mu.Unlock()
			return sess, nil
		}
		n.mu.Unlock()
		e.op.Lock()
		n.mu.Lock()
		current, held, sess := n.writers[id] == e, e.held, e.sess
		n.mu.Unlock()
		if held && current {
			e.op.Unlock()
			return sess, nil
		}
		if current {
			break // e.op stays locked for the acquisition below
		}
		e.op.Unlock() // the entry was retired meanwhile; start over
	}
	defer e.op.Unlock()
	start := time.Now()
	sess, preempted, waited, err := n.acquire(ctx, id, name)
	if err != nil {
		n.forgetIfIdle(e)
		return stream.Session{}, err
	}
	n.mu.Lock()
	e.sess, e.held, e.acquired = sess, true, time.Now()
	n.mu.Unlock()
	n.stats.acquired.Add(1)
	if preempted {
		n.stats.preempted.Add(1)
	}
	if waited {
		n.stats.handoffWaits.Add(1)
	}
	n.stats.acquireSeconds.observe(time.Since(start))
	n.log.Debug("took stream ownership", "stream", name, "epoch", sess.Epoch, "preempted", preempted,
		"waited_for_handoff", waited, "took", time.Since(start))
	if !n.Owns(name) {
		// The view moved on while we acquired: hand it on.
		n.kickReconcile()
		return stream.Session{}, n.notOwner(name)
	}
	return sess, nil
}

// forgetIfIdle retires an entry that holds nothing. The caller holds e.op,
// so no acquisition of this entry is in progress.
func (n *Node) forgetIfIdle(e *writerEntry) {
	n.mu.Lock()
	if n.writers[e.id] == e && !e.held {
		delete(n.writers, e.id)
	}
	n.mu.Unlock()
}

func (n *Node) acquire(ctx context.Context, id stream.ID, name string) (sess stream.Session, preempted, waited bool, err error) {
	deadline := time.Now().Add(n.cfg.HandoffWait)
	for attempt := 0; ; attempt++ {
		if !n.Owns(name) {
			return stream.Session{}, false, waited, n.notOwner(name)
		}
		info, err := n.cfg.Storage.Describe(ctx, id)
		if err != nil {
			return stream.Session{}, false, waited, err
		}
		cur := info.Session
		live := cur.WriterID != "" && time.Now().Before(cur.Expires)
		opts := stream.SessionOptions{WriterID: n.cfg.NodeID, TTL: n.cfg.StreamSessionTTL, StealExpired: true}
		preempt := false
		switch {
		case !live || cur.WriterID == n.cfg.NodeID:
		case n.registered(cur.WriterID):
			// A live broker holds it: it sees the same view and releases.
			if time.Now().After(deadline) {
				return stream.Session{}, false, true, fmt.Errorf("%w (%s is held by %s)", ErrHandoffPending, name, cur.WriterID)
			}
			waited = true
			if err := n.waitForRelease(ctx, id, deadline); err != nil {
				return stream.Session{}, false, true, err
			}
			continue
		default:
			opts.AuthorityEpoch = cur.AuthorityEpoch + 1
			preempt = true
		}
		s, err := n.cfg.Storage.AcquireSession(ctx, id, opts)
		if err == nil {
			return s, preempt, waited, nil
		}
		if !errors.Is(err, stream.ErrSessionBusy) && !errors.Is(err, stream.ErrFenced) {
			return stream.Session{}, false, waited, err
		}
		// Lost a race with another acquirer: re-read and re-plan.
		if time.Now().After(deadline) {
			return stream.Session{}, false, waited, fmt.Errorf("%w: %v", ErrHandoffPending, err)
		}
		if err := sleepCtx(ctx, time.Duration(min(attempt+1, 10))*20*time.Millisecond); err != nil {
			return stream.Session{}, false, waited, err
		}
	}
}

// waitForRelease waits for a change of the stream head (the holder's
// release), of the view, or a short poll interval.
func (n *Node) waitForRelease(ctx context.Context, id stream.ID, deadline time.Time) error {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	_, ch, err := n.cfg.Storage.Notify(wctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		ch = nil
	}
	t := time.NewTimer(250 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ch:
	case <-n.Changes():
	case <-t.C:
	case <-wctx.Done():
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// registered reports whether nodeID is a registered broker other than
// this node.
func (n *Node) registered(nodeID string) bool {
	if nodeID == n.cfg.NodeID {
		return false
	}
	_, ok := n.View().Broker(nodeID)
	return ok
}

// Lost tells the node that an append under sess failed as fenced (another
// writer took the stream): the session is forgotten so the next Writer
// call re-plans.
func (n *Node) Lost(sess stream.Session) {
	n.mu.Lock()
	e := n.writers[sess.Stream]
	if e != nil && e.held && e.sess.Token == sess.Token && e.sess.Epoch == sess.Epoch {
		e.held = false
		n.stats.lost.Add(1)
		if !e.op.TryLock() {
			e = nil // an acquire or release is running; it keeps the entry
		} else {
			delete(n.writers, sess.Stream)
			e.op.Unlock()
		}
	}
	n.mu.Unlock()
}

// Release gives up this node's session on the stream (e.g. a front end
// unloading a topic). In-flight appends finish first. Releasing a stream
// the node does not hold is a no-op.
func (n *Node) Release(ctx context.Context, id stream.ID) error {
	n.mu.Lock()
	e := n.writers[id]
	n.mu.Unlock()
	if e == nil {
		return nil
	}
	return n.releaseEntry(ctx, e)
}

func (n *Node) releaseEntry(ctx context.Context, e *writerEntry) error {
	e.op.Lock()
	defer func() {
		n.forgetIfIdle(e)
		e.op.Unlock()
	}()
	n.mu.Lock()
	held, sess := e.held, e.sess
	// New appends stop asking for this session now; the release below
	// lets the ones in flight finish.
	e.held = false
	n.mu.Unlock()
	if !held {
		return nil
	}
	start := time.Now()
	err := n.cfg.Storage.ReleaseSession(ctx, sess)
	// The core forgets the session locally whatever the outcome; a
	// release that could not reach the store ends by fencing or expiry.
	if errors.Is(err, stream.ErrFenced) || errors.Is(err, stream.ErrStreamNotFound) {
		err = nil
	}
	n.stats.released.Add(1)
	n.stats.releaseSeconds.observe(time.Since(start))
	if err != nil {
		n.stats.releaseFailed.Add(1)
		n.log.Warn("releasing a stream failed; its session ends by expiry or takeover", "stream", e.name, "err", err)
		return err
	}
	n.log.Debug("handed stream ownership over", "stream", e.name, "epoch", sess.Epoch, "took", time.Since(start))
	return nil
}

// releaseAll releases, 16 at a time, every held session whose stream
// drop(name) selects.
func (n *Node) releaseAll(ctx context.Context, drop func(name string) bool) error {
	// Every entry, not only held ones: an entry whose release (or
	// acquisition) is in progress is waited for through its op lock, so
	// releaseAll returns only when nothing selected is held.
	n.mu.Lock()
	var held []*writerEntry
	for _, e := range n.writers {
		held = append(held, e)
	}
	n.mu.Unlock()
	var todo []*writerEntry
	for _, e := range held {
		if drop(e.name) { // outside n.mu: drop may consult the view
			todo = append(todo, e)
		}
	}
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, e := range todo {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := n.releaseEntry(ctx, e); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (n *Node) kickReconcile() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// reconcileLoop hands over, at every change, the streams this node holds
// but no longer owns.
func (n *Node) reconcileLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.kick:
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.HandoffWait)
		_ = n.releaseAll(ctx, func(name string) bool { return !n.Owns(name) })
		cancel()
	}
}

// Held lists the streams whose append session this node holds, by name.
func (n *Node) Held() []string {
	n.mu.Lock()
	var out []string
	for _, e := range n.writers {
		if e.held {
			out = append(out, e.name)
		}
	}
	n.mu.Unlock()
	sort.Strings(out)
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
