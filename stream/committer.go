package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/internal/dedup"
)

// committer is the group-commit loop. Each round it gathers, for every
// owned stream with work, at most one metadata operation per key — the head
// CAS carrying every append whose WAL write has completed (in offset order,
// contiguous), its index publications, or the re-read that settles an
// earlier unknown CAS — and sends them all in ONE Batch. Rounds are
// sequential, so a stream's CAS always names the version its previous round
// produced; WAL writes of later appends keep running during a round, which
// is the pipelining: the next round picks up whatever became durable
// meanwhile.
//
// A stream whose CAS conflicts, whose outcome is unknown, or which is
// fenced only affects its own ops in the batch: ops are independent and so
// are their outcomes.
type committer struct {
	c     *Core
	mu    sync.Mutex
	dirty map[*owner]struct{}
	wake  chan struct{}
}

func newCommitter(c *Core) *committer {
	return &committer{c: c, dirty: map[*owner]struct{}{}, wake: make(chan struct{}, 1)}
}

// kick marks o as having work and wakes the loop. Safe from any goroutine;
// never takes an owner lock.
func (cm *committer) kick(o *owner) {
	cm.mu.Lock()
	cm.dirty[o] = struct{}{}
	cm.mu.Unlock()
	select {
	case cm.wake <- struct{}{}:
	default:
	}
}

func (cm *committer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			cm.failAll()
			return
		case <-cm.wake:
		}
		for cm.round(ctx) {
			if ctx.Err() != nil {
				break
			}
		}
	}
}

// failAll resolves everything still queued when the core stops.
func (cm *committer) failAll() {
	cm.c.mu.Lock()
	owners := make([]*owner, 0, len(cm.c.owners))
	for _, o := range cm.c.owners {
		owners = append(owners, o)
	}
	cm.c.mu.Unlock()
	for _, o := range owners {
		o.mu.Lock()
		if o.unsettled != nil {
			for _, op := range o.unsettled.ops {
				o.resolveOp(op, AppendResult{}, fmt.Errorf("%w: storage closed before the commit was settled", ErrCommitUnknown))
			}
			o.unsettled = nil
			o.queue = nil
		}
		o.failLocked(ErrClosed)
		o.mu.Unlock()
	}
}

type roundItem struct {
	op     metadata.Op
	handle func(metadata.Result, error)
}

// round runs one batch; it reports whether it did anything (so the loop
// goes again at once, picking up work that arrived during the round).
func (cm *committer) round(ctx context.Context) bool {
	cm.mu.Lock()
	dirty := cm.dirty
	cm.dirty = make(map[*owner]struct{}, len(dirty))
	cm.mu.Unlock()
	if len(dirty) == 0 {
		return false
	}
	var items []roundItem
	for o := range dirty {
		items = o.prepare(items)
	}
	if len(items) == 0 {
		return false
	}
	ops := make([]metadata.Op, len(items))
	for i, it := range items {
		ops[i] = it.op
	}
	start := time.Now()
	// A bounded round: a store that stops answering (etcd down: its client
	// waits for a connection) must show up as failing rounds — unknown
	// outcomes settled by re-reading, and a degraded Health — instead of
	// one round that hangs until the store returns.
	rctx, cancel := context.WithTimeout(ctx, metadataRoundTimeout)
	res, err := cm.c.meta.Batch(rctx, ops)
	cancel()
	if err != nil && ctx.Err() == nil {
		cm.c.metaHealth.fail("metadata store unreachable: commit rounds failing: " + err.Error())
	} else if err == nil {
		cm.c.metaHealth.ok()
	}
	cm.c.metrics.metaRoundTrips.Add(1)
	cm.c.metrics.metaOps.Add(int64(len(ops)))
	cm.c.metrics.observeRound(time.Since(start))
	for i, it := range items {
		if err != nil {
			it.handle(metadata.Result{}, err)
		} else {
			it.handle(res[i], res[i].Err)
		}
	}
	if err != nil {
		// The whole round trip failed: back off a little before the
		// re-reads so a down store is not hammered.
		_ = sleepCtx(ctx, unknownBackoff)
	}
	return true
}

// metadataRoundTimeout bounds one commit round's metadata Batch.
const metadataRoundTimeout = 10 * time.Second

// prepare appends this owner's operations for the round.
func (o *owner) prepare(items []roundItem) []roundItem {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.unsettled != nil {
		if o.probing {
			return items // probeIndex settles it, or kicks a re-read
		}
		return append(items, roundItem{
			op:     metadata.Op{Kind: metadata.OpGet, Key: headKey(o.id)},
			handle: o.onSettleRead,
		})
	}
	if o.fatal != nil {
		return items
	}
	items = o.prepareIndexLocked(items)
	return o.prepareHeadLocked(items)
}

// Index publication batching. An OBJECT_WAL_ASYNC_OBJECT stream's commits
// wait in the head's Pending list (where reads already find them) until
// indexBatchCommits of them accumulate or the oldest is indexBatchDelay
// old, and are then published as ONE merged index entry: with many streams
// each taking one commit per round, an index put per commit would rewrite a
// metadata page per stream per round. OBJECT_WAL_SYNC_OBJECT streams publish
// every round, since their acknowledgement waits for it.
const (
	indexBatchCommits = 8
	indexBatchDelay   = time.Second
)

func (o *owner) prepareIndexLocked(items []roundItem) []roundItem {
	var pending []*indexItem
	for _, it := range o.toIndex {
		if !it.confirmed {
			pending = append(pending, it)
		}
	}
	if len(pending) == 0 {
		return items
	}
	if !o.sync && len(pending) < indexBatchCommits && o.fatal == nil && len(o.head.Pending) < o.c.cfg.MaxPendingRuns/2 {
		if wait := indexBatchDelay - time.Since(pending[0].added); wait > 0 {
			o.c.committer.kickAfter(o, wait)
			return items
		}
	}
	// Merge runs of consecutive commits of one session into one entry.
	for start := 0; start < len(pending); {
		end := start + 1
		for end < len(pending) && mergeable(pending[end-1].d, pending[end].d) {
			end++
		}
		group := pending[start:end]
		d := mergeDescriptors(group)
		start = end
		items = append(items, roundItem{
			op: metadata.Op{Kind: metadata.OpPut, Key: indexKey(o.id, d.End), Value: d.encodeIndexRecord(), Expected: metadata.AnyVersion},
			handle: func(r metadata.Result, err error) {
				o.mu.Lock()
				defer o.mu.Unlock()
				if err == nil {
					for _, it := range group {
						it.confirmed = true
					}
					o.advanceIndexLocked()
					return
				}
				// Unknown or failed: the put is idempotent, so the next
				// round simply sends it again.
				o.c.committer.kick(o)
			},
		})
	}
	return items
}

// mergeable reports whether b directly follows a in offsets and session.
func mergeable(a, b descriptor) bool {
	return a.End == b.Start && a.Epoch == b.Epoch && a.Token == b.Token && a.Provider == b.Provider &&
		a.Generation == b.Generation && a.Commit < b.FirstCommit && len(a.Parts)+len(b.Parts) <= 1024
}

func mergeDescriptors(group []*indexItem) descriptor {
	d := group[0].d
	d.Parts = append([]part(nil), d.Parts...)
	for _, it := range group[1:] {
		n := it.d
		d.End = n.End
		d.Entries += n.Entries
		d.Bytes += n.Bytes
		d.CumBytes = n.CumBytes
		d.MinTS, d.MaxTS = min(d.MinTS, n.MinTS), max(d.MaxTS, n.MaxTS)
		d.Commit = n.Commit
		d.Parts = append(d.Parts, n.Parts...)
	}
	return d
}

// advanceIndexLocked moves confirmedThrough over the confirmed prefix and
// releases appends that wait for index visibility.
func (o *owner) advanceIndexLocked() {
	n := 0
	for n < len(o.toIndex) && o.toIndex[n].confirmed {
		o.confirmedThrough = max(o.confirmedThrough, o.toIndex[n].d.End)
		n++
	}
	o.toIndex = o.toIndex[n:]
	keep := o.syncWaiters[:0]
	for _, op := range o.syncWaiters {
		if op.run.End() <= o.confirmedThrough {
			o.resolveOp(op, AppendResult{Start: op.run.Start, End: op.run.End()}, nil)
		} else {
			keep = append(keep, op)
		}
	}
	o.syncWaiters = keep
	// Confirmed runs leave Pending with the stream's next commit; only a
	// head carrying many of them gets a CAS of its own. Appends held back
	// while the index lagged go now.
	if len(o.queue) > 0 || o.droppablePendingLocked() >= compactPendingAt {
		o.c.committer.kick(o)
	}
}

// compactPendingAt is how many index-confirmed runs a head may carry before
// a CAS is spent on dropping them alone.
const compactPendingAt = 32

func (o *owner) droppablePendingLocked() int {
	n := 0
	for _, d := range o.head.Pending {
		if d.End <= o.confirmedThrough {
			n++
		}
	}
	return n
}

func (o *owner) prepareHeadLocked(items []roundItem) []roundItem {
	// Ready appends: the contiguous prefix whose WAL writes completed.
	ready := 0
	for ready < len(o.queue) {
		op := o.queue[ready]
		if op.walState.Load() != walDone {
			break
		}
		if op.walErr != nil {
			if held, ok := o.c.walFailLog.allow(time.Second); ok {
				o.c.log.Warn("WAL write failed; failing it and every later append of the stream",
					"stream", o.id, "offset", op.run.Start, "err", op.walErr, "similar_lines_suppressed", held)
			}
			o.failQueueFromLocked(ready, fmt.Errorf("%w: WAL write failed, not committed: %w", ErrStorageUnavailable, op.walErr))
			break
		}
		ready++
	}
	if ready > 0 && len(o.head.Pending) >= o.c.cfg.MaxPendingRuns && o.droppablePendingLocked() == 0 {
		// Index publication lags (a commit adds one descriptor to the head
		// however many runs it carries): hold appends until it catches up;
		// its confirmation kicks this owner again.
		ready = 0
	}
	dropped := o.droppablePendingLocked()
	if ready == 0 && len(o.mutations) == 0 && dropped < compactPendingAt {
		return items
	}
	next := o.head.clone()
	if dropped > 0 {
		kept := next.Pending[:0]
		for _, d := range next.Pending {
			if d.End > o.confirmedThrough {
				kept = append(kept, d)
			}
		}
		next.Pending = kept
		next.IndexedThrough = max(next.IndexedThrough, o.confirmedThrough)
	}
	cas := &headCAS{next: next, expected: o.version}
	for _, m := range o.mutations {
		changed, err := m.m(next)
		if err != nil {
			m.err = err
			m.head = o.head
			close(m.done)
			continue
		}
		if !changed {
			m.head = o.head
			close(m.done)
			continue
		}
		cas.muts = append(cas.muts, m)
	}
	o.mutations = nil
	if ready > 0 && next.State != StateActive {
		err := ErrStreamSealed
		if next.State != StateSealed {
			err = fmt.Errorf("%w: %v", ErrStreamNotFound, o.id)
		}
		o.failQueueFromLocked(0, err)
		ready = 0
	}
	now := o.c.nowMs()
	if ready > 0 {
		// One descriptor for all of this round's runs of the stream.
		d := descriptor{Start: o.queue[0].run.Start, MinTS: 1<<63 - 1, MaxTS: -1 << 63,
			Epoch: o.sess.Epoch, Token: o.sess.Token, FirstCommit: o.queue[0].run.Commit, Provider: o.prov.Name()}
		for _, op := range o.queue[:ready] {
			op.sent = true
			d.End = op.run.End()
			d.Entries += uint32(len(op.run.Entries))
			d.Bytes += op.bytes
			d.MinTS, d.MaxTS = min(d.MinTS, op.minTS), max(d.MaxTS, op.maxTS)
			d.Commit = op.run.Commit
			d.Parts = append(d.Parts, part{Start: op.run.Start, Target: op.target})
			if q := op.seq; q != nil {
				next.ownProducers().Record(q.Producer, q.Epoch, dedup.Batch{FirstSeq: q.FirstSeq, LastSeq: q.LastSeq, Start: op.run.Start, End: op.run.End()})
			}
			cas.ops = append(cas.ops, op)
		}
		d.CumBytes = next.CommittedBytes + d.Bytes
		next.Pending = append(next.Pending, d)
		next.End = d.End
		next.CommittedBytes = d.CumBytes
		next.Commits = d.Commit
		cas.desc = d
	}
	if len(cas.ops) == 0 && len(cas.muts) == 0 && dropped == 0 {
		return items
	}
	if len(cas.ops) > 0 {
		// Committing refreshes the session lease.
		next.Session.ExpiresMs = max(next.Session.ExpiresMs, now+o.c.cfg.SessionTTL.Milliseconds())
	}
	o.inFlight = cas
	return append(items, roundItem{
		op:     metadata.Op{Kind: metadata.OpPut, Key: headKey(o.id), Value: next.encode(), Expected: o.version},
		handle: o.onHeadResult,
	})
}

// onHeadResult settles the round's head CAS.
func (o *owner) onHeadResult(r metadata.Result, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cas := o.inFlight
	o.inFlight = nil
	if cas == nil {
		return
	}
	switch metadata.Classify(err) {
	case metadata.Applied:
		o.applyCommittedLocked(cas, cas.next, r.Version)
	case metadata.NotApplied:
		// Rejected before it could apply (e.g. record too large): these
		// appends are definitely not committed.
		o.c.log.Error("head CAS rejected", "stream", o.id, "err", err)
		o.unsendLocked(cas)
		for _, m := range cas.muts {
			m.err, m.head = err, o.head
			close(m.done)
		}
		o.failQueueFromLocked(0, fmt.Errorf("nereus/stream: commit rejected, not committed: %w", err))
	default:
		// Conflict or unknown: settle by re-reading before anything else.
		if metadata.Classify(err) == metadata.Unknown {
			o.c.metrics.unknownOutcomes.Add(1)
		} else {
			o.c.metrics.conflicts.Add(1)
		}
		o.unsettled = cas
		o.c.committer.kick(o)
	}
}

// applyCommittedLocked makes a settled-as-applied CAS the owner's truth.
// committed is the head now known to be stored (the CAS's own value, or a
// fresher read that includes it) at version v.
func (o *owner) applyCommittedLocked(cas *headCAS, committed *head, v metadata.Version) {
	o.head, o.version = committed, v
	n := len(cas.ops)
	if n > 0 {
		o.queue = o.queue[n:]
	}
	if len(cas.ops) > 0 {
		o.toIndex = append(o.toIndex, &indexItem{d: cas.desc, added: time.Now()})
	}
	for _, op := range cas.ops {
		o.c.tail.add(o.id, op.run)
		o.prov.Release(op.target, true)
		o.c.metrics.appendsCommitted.Add(1)
		o.c.metrics.bytesCommitted.Add(op.bytes)
		if o.sync {
			o.syncWaiters = append(o.syncWaiters, op)
		} else {
			o.resolveOp(op, AppendResult{Start: op.run.Start, End: op.run.End()}, nil)
		}
	}
	for _, m := range cas.muts {
		m.head = committed
		close(m.done)
	}
	if len(o.queue) == 0 {
		select {
		case <-o.idle:
		default:
			close(o.idle)
		}
	}
	o.notifyLocked()
	o.c.watch.local(o.id)
	o.c.committer.kick(o) // publish the index entries, pick up more work
}

// unsendLocked returns a CAS's appends to the not-yet-sent state.
func (o *owner) unsendLocked(cas *headCAS) {
	for _, op := range cas.ops {
		op.sent = false
	}
}

// onSettleRead resolves an unsettled CAS from a fresh read of the head.
//
// The proof that our CAS applied: if the stored session is still ours,
// nobody but us can have advanced Commits, so Commits >= our last run's
// number means applied. If the session moved on (we were fenced), our runs
// are committed exactly if their descriptors — identified by (epoch, token,
// commit) — are in the head's Pending list or in the offset index: a run
// leaves Pending only after its index entry was confirmed. The index
// lookup is I/O, so it runs outside o.mu (probeIndex); until it answers the
// CAS stays unsettled, and a lookup that fails proves nothing: the head is
// re-read and the lookup tried again, never guessed.
func (o *owner) onSettleRead(r metadata.Result, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cas := o.unsettled
	if cas == nil || o.probing {
		return
	}
	if err != nil {
		if errors.Is(err, metadata.ErrKeyNotFound) {
			o.unsettled = nil
			o.unsendLocked(cas)
			o.failLocked(fmt.Errorf("%w: %v disappeared", ErrStreamNotFound, o.id))
			return
		}
		o.c.committer.kickLater(o)
		return
	}
	fresh, derr := decodeHead(r.Record.Value)
	if derr != nil {
		o.c.log.Error("stored head is corrupt", "stream", o.id, "err", derr)
		o.c.committer.kickLater(o)
		return
	}
	ours := fresh.Session.Token == o.sess.Token && fresh.Session.Epoch == o.sess.Epoch
	applied := false
	if len(cas.ops) > 0 {
		last := cas.ops[len(cas.ops)-1].run
		if ours {
			applied = fresh.Commits >= last.Commit
		} else {
			id := runID{Epoch: last.Epoch, Token: last.Token, Commit: last.Commit}
			var settled bool
			if applied, settled = committedInHead(fresh, id, last.End()); !settled {
				o.probing = true
				o.c.wg.Add(1) // the committer goroutine is in c.wg: Close waits for this too
				go o.probeIndex(cas, fresh, r.Record.Version, id, last.End())
				return
			}
		}
	}
	o.settleLocked(cas, fresh, r.Record.Version, ours, applied)
}

// probeIndex looks an unsettled run up in the offset index (outside o.mu)
// and settles cas with the answer, or — if the store did not answer — has
// the committer re-read the head and try again.
func (o *owner) probeIndex(cas *headCAS, fresh *head, v metadata.Version, id runID, end int64) {
	defer o.c.wg.Done()
	ctx, cancel := context.WithTimeout(o.c.ctx, 5*time.Second)
	ok, err := o.c.committedInIndex(ctx, fresh, id, end)
	cancel()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.probing = false
	if o.unsettled != cas {
		return // settled meanwhile (the core is closing)
	}
	if err != nil {
		o.c.metrics.unknownOutcomes.Add(1)
		o.c.log.Warn("offset-index lookup for an unsettled commit failed; re-reading", "stream", o.id, "err", err)
		o.c.committer.kickLater(o)
		return
	}
	o.settleLocked(cas, fresh, v, false, ok)
}

// settleLocked applies the proven outcome of an unsettled CAS: applied or
// not, against the fresh head at version v, still ours or fenced.
func (o *owner) settleLocked(cas *headCAS, fresh *head, v metadata.Version, ours, applied bool) {
	o.unsettled = nil
	if applied {
		o.applyCommittedLocked(cas, fresh, v)
		// Mutations in the same CAS were applied too, but re-running an
		// idempotent mutation is harmless and settles its caller.
		if !ours {
			o.fenceLocked(fresh)
		}
		return
	}
	o.unsendLocked(cas)
	if !ours {
		for _, m := range cas.muts {
			m.err = errOwnerGone
			close(m.done)
		}
		o.head, o.version = fresh, v
		o.fenceLocked(fresh)
		return
	}
	if fresh.End != o.head.End || fresh.Commits != o.head.Commits {
		// Only this session moves End; anything else is a broken invariant.
		o.c.log.Error("head advanced under our session by someone else", "stream", o.id,
			"ourEnd", o.head.End, "storedEnd", fresh.End)
		o.head, o.version = fresh, v
		o.failLocked(fmt.Errorf("nereus/stream: invariant violated on %v: head moved under our session", o.id))
		return
	}
	// Not applied, still ours: someone else changed the head (trim, seal,
	// retention from another process). Adopt it and retry next round.
	o.head, o.version = fresh, v
	o.mutations = append(cas.muts, o.mutations...)
	o.c.committer.kick(o)
}

func (o *owner) fenceLocked(fresh *head) {
	o.c.metrics.fenced.Add(1)
	o.failLocked(fmt.Errorf("%w: stream %v now has session epoch %d", ErrFenced, o.id, fresh.Session.Epoch))
	go o.c.dropOwner(o)
}

// kickLater retries an owner after a short delay (settling reads that
// failed: the store is unreachable).
func (cm *committer) kickLater(o *owner) { cm.kickAfter(o, unknownBackoff) }

// kickAfter kicks o once d has passed. At most one timer per owner is
// pending; an earlier kick makes it redundant, not wrong.
func (cm *committer) kickAfter(o *owner, d time.Duration) {
	if o.timerArmed.Swap(true) {
		return
	}
	time.AfterFunc(d, func() {
		o.timerArmed.Store(false)
		cm.kick(o)
	})
}
