package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/internal/dedup"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// MaxEntryBytes bounds one entry's payload; larger entries are refused
// before any I/O.
const MaxEntryBytes = 64 << 20

// MaxAppendEntries bounds the entries of one AppendRequest.
const MaxAppendEntries = 65536

// WAL write states of an appendOp.
const (
	walPending uint32 = iota
	walDone
	walAbandoned // failed before the write completed; the callback releases it
)

var errOwnerGone = errors.New("nereus/stream: stream no longer owned by this process")

// owner is this process's state for a stream whose append session it holds.
//
// Offsets are assigned at admission ("projected" state) so WAL writes of
// later appends overlap the commit of earlier ones; they become true only
// when the head CAS that carries them applies. Invariants (under mu):
//   - queue holds admitted, unresolved appends in offset order; the first
//     starts at head.End, each starts where the previous ends, and projEnd
//     is the last one's end (head.End when empty).
//   - projProducers = head.Producers + the sequences of queue, in order.
//   - nextCommit never repeats within a session, even after a reset, so a
//     run's (Epoch, Token, Commit) identity is unique forever.
//   - the committer is the only goroutine that issues head CASes for an
//     owned stream, one round at a time.
type owner struct {
	c    *Core
	id   ID
	prov provider.Provider
	sync bool // ack waits for index publication (OBJECT_WAL_SYNC_OBJECT)

	mu       sync.Mutex
	writerID string
	sess     Session
	head     *head
	version  metadata.Version

	projEnd       int64
	projCum       int64
	projProducers *dedup.Table
	nextCommit    uint64

	queue     []*appendOp
	mutations []*mutationOp

	// inFlight is the head CAS of the current committer round (committer
	// goroutine only); unsettled is a CAS whose outcome was conflict or
	// unknown and must be resolved by re-reading before anything else.
	inFlight  *headCAS
	unsettled *headCAS
	// probing: an offset-index lookup for unsettled is running outside mu
	// (probeIndex); no settle read is sent meanwhile.
	probing bool

	// toIndex holds committed runs whose index entry is not yet confirmed,
	// in offset order; confirmedThrough is the end of the confirmed prefix.
	toIndex          []*indexItem
	confirmedThrough int64
	syncWaiters      []*appendOp
	// genWaiters (BOOKKEEPER_WAL_SYNC_OBJECT) are committed appends whose
	// acknowledgement waits for a generation covering them.
	genWaiters []*appendOp
	genSync    bool

	fatal      error
	changed    chan struct{}
	timerArmed atomic.Bool   // a delayed committer kick is pending
	idle       chan struct{} // closed and replaced when queue drains
}

type appendOp struct {
	run      provider.Run
	bytes    int64
	minTS    int64
	maxTS    int64
	seq      *ProducerSequence
	future   *AppendFuture
	dupOf    []*AppendFuture // duplicates waiting for this op's outcome
	walState atomic.Uint32   // walPending, walDone or walAbandoned
	target   provider.Target
	walErr   error
	sent     bool
}

type mutationOp struct {
	m    mutation
	done chan struct{}
	head *head
	err  error
}

type indexItem struct {
	d         descriptor
	confirmed bool
	added     time.Time // when the commit was applied (publication batching)
}

type headCAS struct {
	next     *head
	expected metadata.Version
	ops      []*appendOp
	desc     descriptor // the commit of ops (when there are any)
	muts     []*mutationOp
}

func (c *Core) owner(id ID) *owner {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owners[id]
}

func (c *Core) dropOwner(o *owner) {
	c.mu.Lock()
	if c.owners[o.id] == o {
		delete(c.owners, o.id)
	}
	c.mu.Unlock()
}

func newOwner(c *Core, h *head, v metadata.Version, sess Session, prov provider.Provider) *owner {
	o := &owner{
		c: c, id: h.ID, prov: prov, sync: h.Profile == ObjectWALSyncObject, genSync: syncObject(h.Profile),
		writerID: sess.WriterID, sess: sess, head: h, version: v,
		projEnd: h.End, projCum: h.CommittedBytes, projProducers: h.Producers.Clone(),
		nextCommit: h.Commits + 1, confirmedThrough: h.IndexedThrough,
		changed: make(chan struct{}), idle: make(chan struct{}),
	}
	for _, d := range h.Pending {
		o.toIndex = append(o.toIndex, &indexItem{d: d})
	}
	close(o.idle)
	return o
}

func (o *owner) committed() (*head, metadata.Version) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.head, o.version
}

func (o *owner) info() Info {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.head.info()
}

func (o *owner) notifyLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// appendAsync admits an append: validation, deduplication against the
// projected producer table, offset assignment, then the WAL write.
func (o *owner) appendAsync(s Session, req AppendRequest, f *AppendFuture) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.fatal != nil:
		f.Resolve(AppendResult{}, o.fatal)
		return
	case s.Token != o.sess.Token || s.Epoch != o.sess.Epoch:
		f.Resolve(AppendResult{}, fmt.Errorf("%w: session epoch %d is not the current one (%d)", ErrFenced, s.Epoch, o.sess.Epoch))
		return
	case o.head.State == StateSealed:
		f.Resolve(AppendResult{}, ErrStreamSealed)
		return
	case o.head.State != StateActive:
		f.Resolve(AppendResult{}, fmt.Errorf("%w: %v", ErrStreamNotFound, o.id))
		return
	case req.ExpectedStart >= 0 && req.ExpectedStart != o.projEnd:
		f.Resolve(AppendResult{}, fmt.Errorf("%w: expected %d, next offset is %d", ErrOffsetConflict, req.ExpectedStart, o.projEnd))
		return
	}
	var count, bytes int64
	minTS, maxTS := int64(1<<63-1), int64(-1<<63)
	entries := make([]provider.Entry, len(req.Entries))
	for i, e := range req.Entries {
		count += int64(e.RecordCount)
		bytes += int64(len(e.Payload))
		minTS, maxTS = min(minTS, e.Timestamp), max(maxTS, e.Timestamp)
		entries[i] = provider.Entry{Payload: e.Payload, RecordCount: e.RecordCount, Timestamp: e.Timestamp}
	}
	start := o.projEnd
	if q := req.Sequence; q != nil {
		verdict, orig := o.projProducers.Check(dedup.Mode(q.Mode), q.Producer, q.Epoch, q.FirstSeq, q.LastSeq)
		switch verdict {
		case dedup.Duplicate:
			o.c.metrics.duplicates.Add(1)
			if orig.End <= o.head.End {
				f.Resolve(AppendResult{Start: orig.Start, End: orig.End, Duplicate: true}, nil)
				return
			}
			for _, op := range o.queue {
				if op.run.Start == orig.Start {
					op.dupOf = append(op.dupOf, f)
					return
				}
			}
			f.Resolve(AppendResult{Start: orig.Start, End: orig.End, Duplicate: true}, nil)
			return
		case dedup.OutOfOrder:
			f.Resolve(AppendResult{}, ErrOutOfOrderSequence)
			return
		case dedup.Fenced:
			f.Resolve(AppendResult{}, ErrProducerFenced)
			return
		case dedup.Unknown:
			f.Resolve(AppendResult{}, ErrUnknownProducer)
			return
		}
		o.projProducers.Record(q.Producer, q.Epoch, dedup.Batch{FirstSeq: q.FirstSeq, LastSeq: q.LastSeq, Start: start, End: start + count})
	}
	op := &appendOp{
		run:   provider.Run{Stream: uint64(o.id), Epoch: o.sess.Epoch, Token: o.sess.Token, Commit: o.nextCommit, Start: start, Entries: entries},
		bytes: bytes, minTS: minTS, maxTS: maxTS, seq: req.Sequence, future: f,
	}
	o.nextCommit++
	o.projEnd = start + count
	o.projCum += bytes
	if len(o.queue) == 0 {
		o.idle = make(chan struct{})
	}
	o.queue = append(o.queue, op)
	o.c.metrics.appendsAdmitted.Add(1)
	// Write under mu so WAL submission order equals offset order. Providers
	// never call done synchronously under their own locks in a way that
	// re-enters o.mu: walDone only touches the op and kicks the committer.
	o.prov.Write(op.run, func(t provider.Target, err error) {
		op.target, op.walErr = t, err
		if op.walState.CompareAndSwap(walPending, walDone) {
			o.c.committer.kick(o)
		} else if err == nil {
			// The append was failed before its WAL write finished: the
			// bytes can never be committed.
			o.prov.Release(t, false)
		}
	})
}

// resolveOp settles an append's future (and any duplicates waiting on it).
func (o *owner) resolveOp(op *appendOp, r AppendResult, err error) {
	op.future.Resolve(r, err)
	for _, f := range op.dupOf {
		if err != nil {
			f.Resolve(AppendResult{}, err)
		} else {
			f.Resolve(AppendResult{Start: r.Start, End: r.End, Duplicate: true}, nil)
		}
	}
}

// failQueueFromLocked fails queue[i:] (never committed: their CAS was never
// applied) and rewinds the projected state to the remaining prefix.
func (o *owner) failQueueFromLocked(i int, err error) {
	for _, op := range o.queue[i:] {
		if !op.walState.CompareAndSwap(walPending, walAbandoned) && op.walErr == nil {
			o.prov.Release(op.target, false)
		}
		o.resolveOp(op, AppendResult{}, err)
		o.c.metrics.appendsFailed.Add(1)
	}
	o.queue = o.queue[:i]
	o.rebuildProjectionLocked()
}

func (o *owner) rebuildProjectionLocked() {
	o.projEnd = o.head.End
	o.projCum = o.head.CommittedBytes
	o.projProducers = o.head.Producers.Clone()
	for _, op := range o.queue {
		o.projEnd = op.run.End()
		o.projCum += op.bytes
		if q := op.seq; q != nil {
			o.projProducers.Record(q.Producer, q.Epoch, dedup.Batch{FirstSeq: q.FirstSeq, LastSeq: q.LastSeq, Start: op.run.Start, End: op.run.End()})
		}
	}
	if len(o.queue) == 0 {
		select {
		case <-o.idle:
		default:
			close(o.idle)
		}
	}
}

// fail makes the owner permanently unusable (fenced, deleted) and fails
// everything queued. Appends already sent in an unsettled CAS stay with the
// committer, which settles them by re-reading.
func (o *owner) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failLocked(err)
}

func (o *owner) failLocked(err error) {
	if o.fatal == nil {
		o.fatal = err
	}
	keep := 0
	for keep < len(o.queue) && o.queue[keep].sent {
		keep++
	}
	o.failQueueFromLocked(keep, err)
	for _, m := range o.mutations {
		m.err = errOwnerGone
		close(m.done)
	}
	o.mutations = nil
	for _, op := range o.syncWaiters {
		// Committed; only the index wait is abandoned.
		o.resolveOp(op, AppendResult{Start: op.run.Start, End: op.run.End()}, nil)
	}
	o.syncWaiters = nil
	for _, op := range o.genWaiters {
		o.resolveOp(op, AppendResult{Start: op.run.Start, End: op.run.End()}, nil)
	}
	o.genWaiters = nil
	o.notifyLocked()
}

// mutate runs m through the commit pipeline.
func (o *owner) mutate(ctx context.Context, m mutation) (*head, error) {
	mo := &mutationOp{m: m, done: make(chan struct{})}
	o.mu.Lock()
	if o.fatal != nil {
		o.mu.Unlock()
		return nil, errOwnerGone
	}
	o.mutations = append(o.mutations, mo)
	o.mu.Unlock()
	o.c.committer.kick(o)
	select {
	case <-mo.done:
		return mo.head, mo.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrCommitUnknown, ctx.Err())
	}
}

// drain waits until every admitted append has resolved or ctx ends.
func (o *owner) drain(ctx context.Context) {
	o.mu.Lock()
	idle := o.idle
	o.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// releaseGenWaitersLocked acknowledges BOOKKEEPER_WAL_SYNC_OBJECT appends
// that a published generation now covers, and urges materialization for
// the rest.
func (o *owner) releaseGenWaitersLocked() {
	if len(o.genWaiters) == 0 {
		return
	}
	keep := o.genWaiters[:0]
	for _, op := range o.genWaiters {
		if op.run.End() <= o.head.GenThrough {
			o.resolveOp(op, AppendResult{Start: op.run.Start, End: op.run.End()}, nil)
		} else {
			keep = append(keep, op)
		}
	}
	o.genWaiters = keep
	if len(keep) > 0 {
		o.c.mat.urge(o.id)
	}
}
