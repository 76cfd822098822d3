package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// MaxEntryBytes bounds one entry's payload; larger entries are refused
// before any I/O.
const MaxEntryBytes = 64 << 20

// MaxAppendEntries bounds the entries of one AppendRequest.
const MaxAppendEntries = 65536

var errOwnerGone = errors.New("nereus/stream: stream no longer owned by this process")

// owner drives the commitMachine of a stream whose append session this
// process holds: it feeds it events under mu and executes the effects it
// returns outside mu.
//
// Effects of one machine run in the order it produced them, by one
// goroutine at a time: whoever finds effects waiting and nobody executing
// them becomes the executor (flushing) until none are left. That keeps WAL
// submissions in offset order and tail-cache insertions in commit order
// without holding mu across provider calls, future resolution or logging.
type owner struct {
	c    *Core
	id   ID
	prov provider.Provider

	mu       sync.Mutex
	m        *commitMachine
	flushing bool
	// changed is closed at the next head change; idleCh when no admitted
	// append is unresolved. Both are made only when someone waits
	// (notifyState, drain) and dropped once closed: with one append per
	// commit, making them eagerly was two channels per append.
	changed  chan struct{}
	idleCh   chan struct{}
	timerAt  int64 // wake-up armed for this time (ms), 0: none
	stopTime func() bool

	cm     *committer // this stream's commit shard (Core.committerFor)
	kicked bool       // in cm.dirty (guarded by cm.mu)
}

func (c *Core) owner(id ID) *owner {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owners[id]
}

// ownersOf appends to out the owner of each named stream (nil: none in
// this process), in order, under one hold of c.mu: a pass over every
// stream (eachHead) looked each one up with its own lock and unlock of
// the mutex every AppendAsync also takes. Each answer is what c.owner
// would have said at that instant; a lookup was never atomic with the
// caller's use of the owner, so taking a page's answers together changes
// nothing the listing relies on.
func (c *Core) ownersOf(names []nameRecord, out []*owner) []*owner {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range names {
		out = append(out, c.owners[names[i].ID])
	}
	return out
}

// allOwners returns the owners (current and replaced ones still
// settling), in stream order.
func (c *Core) allOwners() []*owner {
	c.mu.Lock()
	out := make([]*owner, 0, len(c.owners)+len(c.replaced))
	for _, o := range c.owners {
		out = append(out, o)
	}
	for o := range c.replaced {
		out = append(out, o)
	}
	c.mu.Unlock()
	// A fixed order (stream, then session epoch), so a simulated Close
	// replays exactly.
	epoch := make(map[*owner]uint64, len(out))
	for _, o := range out {
		o.mu.Lock()
		epoch[o] = o.m.sess.Epoch
		o.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b *owner) int {
		if a.id != b.id {
			return cmp.Compare(a.id, b.id)
		}
		return cmp.Compare(epoch[a], epoch[b])
	})
	return out
}

// pruneReplaced forgets replaced owners with nothing left to settle.
func (c *Core) pruneReplaced() {
	c.mu.Lock()
	olds := make([]*owner, 0, len(c.replaced))
	for o := range c.replaced {
		olds = append(olds, o)
	}
	c.mu.Unlock()
	for _, o := range olds {
		o.mu.Lock()
		idle := o.m.idle()
		o.mu.Unlock()
		if idle {
			c.mu.Lock()
			delete(c.replaced, o)
			c.mu.Unlock()
		}
	}
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
		c: c, id: h.ID, prov: prov, cm: c.committerFor(h.ID),
		m: newCommitMachine(h, v, sess, prov.Name(), c.cfg.SessionTTL.Milliseconds(), c.cfg.MaxPendingRuns),
	}
	return o
}

// flushLocked executes the machine's effects and unlocks o.mu. Call it
// with o.mu held after every event.
func (o *owner) flushLocked() {
	o.syncIdleLocked()
	if o.flushing {
		o.mu.Unlock()
		return // the executing goroutine picks the new effects up
	}
	o.flushing = true
	o.runEffectsLocked(false)
}

// flushFromProviderLocked is flushLocked for a provider's completion
// callback (the done of provider.Write), which runs on a provider goroutine
// and must not block. Whoever finds effects waiting becomes the stream's
// executor, and effects include the WAL writes of appends admitted
// meanwhile — whose provider.Write may block for backpressure: the Object
// WAL's write queue and the wal producer's in-flight budget. The Object
// WAL's queue is drained only by the very goroutine that calls this (its
// waiter), so a Write there, with the queue full, waits for itself forever
// and every write of the process stops. So this goroutine executes
// batches without WAL writes itself (acknowledgements stay on the fast
// path), and at the first batch with one it hands the executor role —
// o.flushing stays set, so effects keep their order — to a goroutine of
// the core's own, which may block in Write as any producer may:
// backpressure still reaches the appending clients (their appends stay
// unresolved), and nothing queues without bound in between.
func (o *owner) flushFromProviderLocked() {
	o.syncIdleLocked()
	if o.flushing {
		o.mu.Unlock()
		return
	}
	o.flushing = true
	o.runEffectsLocked(true)
}

// runEffectsLocked is the executor loop: with o.mu held and o.flushing set
// by the caller, it executes batches of effects until none are left, then
// clears o.flushing and unlocks o.mu. fromProvider: see
// flushFromProviderLocked.
func (o *owner) runEffectsLocked(fromProvider bool) {
	for {
		rd := o.m.takeReady()
		if rd == nil {
			o.flushing = false
			o.mu.Unlock()
			return
		}
		var changed chan struct{}
		if rd.headChanged {
			changed, o.changed = o.changed, nil
		}
		o.syncIdleLocked()
		o.mu.Unlock()
		if h := testHookExecuting; h != nil {
			h(o)
		}
		if fromProvider && len(rd.writes) > 0 {
			o.c.rt.goFunc(func() {
				o.execute(rd, changed)
				o.mu.Lock()
				o.m.recycleReady(rd)
				o.runEffectsLocked(false)
			})
			return
		}
		o.execute(rd, changed)
		o.mu.Lock()
		o.m.recycleReady(rd)
	}
}

// testHookExecuting, when set (tests only), runs on the executing goroutine
// before each batch of effects, with o.mu not held.
var testHookExecuting func(o *owner)

func (o *owner) syncIdleLocked() {
	if o.idleCh != nil && o.m.idle() {
		close(o.idleCh)
		o.idleCh = nil
	}
}

// execute runs one batch of effects in the order commitReady documents.
func (o *owner) execute(rd *commitReady, changed chan struct{}) {
	c := o.c
	for _, l := range rd.logs {
		args := l.args
		if l.msg == msgWALWriteFailed {
			// A fault that fails every append (a full disk) must not also
			// flood the log: one line per second, with a count.
			held, ok := c.walFailLog.allow(c.rt.now(), time.Second)
			if !ok {
				continue
			}
			args = append(args, "similar_lines_suppressed", held)
		}
		c.log.Log(context.Background(), l.level, l.msg, args...)
	}
	for _, op := range rd.writes {
		op := op
		// Read back by the callback, which the provider can only call
		// after Write received the run (so after this store).
		op.submittedNs = c.rt.now().UnixNano()
		o.prov.Write(op.run, func(t provider.Target, err error) {
			now := c.rt.now().UnixNano()
			o.mu.Lock()
			if err == nil && op.submittedNs != 0 {
				op.walDoneNs = now
				c.metrics.observeStage(stageWAL, time.Duration(now-op.submittedNs))
			}
			o.m.walDone(op, t, err)
			o.flushFromProviderLocked()
		})
	}
	for _, run := range rd.committedRuns {
		c.tail.add(o.id, run)
	}
	if changed != nil {
		close(changed)
	}
	if rd.headChanged {
		c.watch.local(o.id)
	}
	for _, r := range rd.releases {
		o.prov.Release(r.target, r.committed)
	}
	var now int64
	for _, r := range rd.resolves {
		if r.walDoneNs != 0 {
			if now == 0 {
				now = c.rt.now().UnixNano()
			}
			c.metrics.observeStage(stageCommit, time.Duration(now-r.walDoneNs))
		}
		r.future.Resolve(r.result, r.err)
	}
	for _, mo := range rd.mutDone {
		close(mo.done)
	}
	c.metrics.add(rd.counters)
	if p := rd.probe; p != nil {
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		c.rt.scan(ctx, c.meta, p.min, p.max, 1, func(recs []metadata.Record, err error) {
			cancel()
			o.mu.Lock()
			o.m.probeResult(recs, err, c.nowMs())
			o.flushLocked()
		})
	}
	if rd.wakeAtMs != 0 {
		o.wakeAt(rd.wakeAtMs)
	}
	if rd.kick {
		o.cm.kick(o)
	}
	if rd.materialize {
		c.mat.urge(o.id)
	}
	if rd.drop {
		c.dropOwner(o)
	}
}

// wakeAt makes sure the committer looks at o again no later than atMs.
func (o *owner) wakeAt(atMs int64) {
	o.mu.Lock()
	if o.timerAt != 0 && o.timerAt <= atMs {
		o.mu.Unlock()
		return
	}
	if o.stopTime != nil {
		o.stopTime()
	}
	o.timerAt = atMs
	d := time.Duration(atMs-o.c.nowMs()) * time.Millisecond
	o.stopTime = o.c.rt.afterFunc(max(d, 0), func() {
		o.mu.Lock()
		if o.timerAt == atMs {
			o.timerAt, o.stopTime = 0, nil
		}
		o.mu.Unlock()
		o.cm.kick(o)
	})
	o.mu.Unlock()
}

func (o *owner) committed() (*head, metadata.Version) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m.head, o.m.version
}

func (o *owner) info() Info {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m.head.info()
}

// notifyState returns the committed end and the channel closed at the next
// head change, read together so a commit between them cannot be missed.
func (o *owner) notifyState() (int64, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.changed == nil {
		o.changed = make(chan struct{})
	}
	return o.m.head.End, o.changed
}

// session returns the session o holds and whether a new acquisition by
// writerID at authorityEpoch may simply share it.
func (o *owner) session(writerID string, authorityEpoch int64) (Session, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	same := o.m.fatal == nil && o.m.writerID == writerID && authorityEpoch <= o.m.head.Session.Authority
	return o.m.sess, same
}

func (o *owner) appendAsync(s Session, req AppendRequest, f *AppendFuture) {
	o.mu.Lock()
	o.m.admit(s, req, f)
	o.flushLocked()
}

// fail makes the owner permanently unusable (fenced, deleted) and fails
// everything queued.
func (o *owner) fail(err error) {
	o.mu.Lock()
	o.m.fail(err)
	o.flushLocked()
}

// mutate runs m through the commit pipeline.
func (o *owner) mutate(ctx context.Context, m mutation) (*head, error) {
	mo := &mutationOp{m: m, done: make(chan struct{})}
	o.mu.Lock()
	ok := o.m.mutate(mo)
	o.flushLocked()
	if !ok {
		return nil, errOwnerGone
	}
	if err := o.c.rt.await(ctx, mo.done); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCommitUnknown, err)
	}
	return mo.head, mo.err
}

// drain waits until every admitted append has resolved or ctx ends.
func (o *owner) drain(ctx context.Context) {
	o.mu.Lock()
	if o.m.idle() {
		o.mu.Unlock()
		return
	}
	if o.idleCh == nil {
		o.idleCh = make(chan struct{})
	}
	idle := o.idleCh
	o.mu.Unlock()
	_ = o.c.rt.await(ctx, idle)
}
