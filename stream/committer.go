package stream

import (
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// committer drives the group-commit rounds of a shard of the owned streams
// (Core.shards; a stream always goes through the same one, chosen by
// its ID). Each round it asks every stream of its shard with work (kicked
// since its last round) for its metadata operations — at most one per key:
// the head CAS carrying every append whose WAL write has completed, its
// index publications, or the re-read that settles an earlier unknown CAS
// (commitMachine.prepareRound) — sends them all in ONE Batch, and steps
// each stream's machine with its results. A shard's rounds are sequential,
// so a stream's CAS always names the version its previous round produced;
// WAL writes of later appends keep running during a round, which is the
// pipelining: the next round picks up whatever became durable meanwhile.
//
// Shards are independent: while one shard's Batch is with the store, the
// others prepare and step theirs, on other cores. With thousands of active
// streams a round is dominated by per-stream work (preparing and encoding
// each head, stepping each machine, resolving its appends), which one
// goroutine would otherwise do serially while the store sat idle, and the
// store in turn would be idle while that goroutine worked. Nothing is
// shared between shards but the store, whose Batch calls are independent
// (a store may commit concurrent ones together, as boltstore does).
//
// A stream whose CAS conflicts, whose outcome is unknown, or which is
// fenced only affects its own ops in the batch: ops are independent and so
// are their outcomes.
//
// A committer runs only while there is work: the first kick starts it
// (through the runtime), and it stops when a round finds nothing to do.
type committer struct {
	c       *Core
	mu      sync.Mutex
	dirty   []*owner // kicked since their last round, in kick order (owner.kicked marks members)
	busy    bool     // a run is active (a round being prepared, in flight or stepped)
	stopped bool
	active  sync.WaitGroup // held while busy
}

func newCommitter(c *Core) *committer {
	return &committer{c: c}
}

// kick marks o as having work and starts the committer if it is not
// running. Safe from any goroutine; never takes an owner lock.
func (cm *committer) kick(o *owner) {
	cm.mu.Lock()
	if !o.kicked {
		o.kicked = true
		cm.dirty = append(cm.dirty, o)
	}
	start := !cm.busy && !cm.stopped
	if start {
		cm.busy = true
		cm.active.Add(1)
	}
	cm.mu.Unlock()
	if start {
		cm.c.rt.goFunc(cm.run)
	}
}

// stop prevents new rounds and waits for the current one to finish.
func (cm *committer) stop() {
	cm.mu.Lock()
	cm.stopped = true
	cm.mu.Unlock()
	// A simulated runtime cannot see a goroutine block on the wait group:
	// it parks the caller until the round is done (the real one does not).
	cm.c.rt.block(func() bool {
		cm.mu.Lock()
		defer cm.mu.Unlock()
		return !cm.busy
	})
	cm.active.Wait()
}

// round is one prepared commit round.
type round struct {
	owners []*owner
	counts []int // ops of owners[i]
	ops    []metadata.Op
}

// run performs rounds until one finds no work. With a runtime that
// completes batches on the calling goroutine it loops here; otherwise each
// batch's completion schedules the next run.
func (cm *committer) run() {
	for {
		r := cm.gather()
		if r == nil {
			return
		}
		ctx := cm.c.ctx
		start := cm.c.rt.now()
		async := false
		completed := cm.c.rt.batch(ctx, cm.c.meta, r.ops, func(res []metadata.Result, err error) {
			cm.finish(r, res, err, start)
			if async {
				cm.next(err)
			} else if err != nil {
				// The whole round trip failed: back off a little before
				// the re-reads so a down store is not hammered.
				_ = cm.c.rt.sleep(ctx, unknownBackoff)
			}
		})
		if !completed {
			async = true
			return
		}
	}
}

func (cm *committer) next(err error) {
	if err != nil {
		cm.c.rt.afterFunc(unknownBackoff, cm.run)
	} else {
		cm.c.rt.goFunc(cm.run)
	}
}

// gather prepares the next round, or reports that there is none (and marks
// the committer idle) by returning nil.
func (cm *committer) gather() *round {
	for {
		cm.mu.Lock()
		if cm.stopped || cm.c.ctx.Err() != nil || len(cm.dirty) == 0 {
			cm.busy = false
			cm.mu.Unlock()
			cm.active.Done()
			return nil
		}
		dirty := cm.dirty
		cm.dirty = make([]*owner, 0, len(dirty))
		for _, o := range dirty {
			o.kicked = false
		}
		cm.mu.Unlock()
		// Sized for one op per stream, the common case.
		r := &round{owners: make([]*owner, 0, len(dirty)), counts: make([]int, 0, len(dirty)), ops: make([]metadata.Op, 0, len(dirty))}
		now := cm.c.nowMs()
		for _, o := range dirty {
			o.mu.Lock()
			n := len(r.ops)
			r.ops = o.m.prepareRound(r.ops, now)
			if len(r.ops) > n {
				r.owners = append(r.owners, o)
				r.counts = append(r.counts, len(r.ops)-n)
			}
			o.flushLocked() // preparing may fail appends (a WAL error) or arm a timer
		}
		if len(r.ops) > 0 {
			return r
		}
	}
}

// finish steps every machine of the round with its results.
func (cm *committer) finish(r *round, res []metadata.Result, err error, start time.Time) {
	m := &cm.c.metrics
	switch {
	case err == nil:
		cm.c.metaHealth.ok()
	case cm.c.ctx.Err() == nil:
		cm.c.metaHealth.fail(cm.c.rt.now(), "metadata store unreachable: commit rounds failing: "+err.Error())
	}
	m.metaRoundTrips.Add(1)
	m.metaOps.Add(int64(len(r.ops)))
	m.observeRound(cm.c.rt.now().Sub(start))
	now := cm.c.nowMs()
	i := 0
	for k, o := range r.owners {
		n := r.counts[k]
		var part []metadata.Result
		if err == nil {
			part = res[i : i+n]
		}
		i += n
		o.mu.Lock()
		o.m.stepRound(part, err, now)
		o.flushLocked()
	}
}

// newCommitters makes the core's n commit shards.
func newCommitters(c *Core, n int) []*committer {
	cms := make([]*committer, max(n, 1))
	for i := range cms {
		cms[i] = newCommitter(c)
	}
	return cms
}

// committerFor is the shard that commits stream id: fixed for the stream's
// lifetime in this process, so its rounds stay sequential.
func (c *Core) committerFor(id ID) *committer {
	if len(c.shards) == 1 {
		return c.shards[0]
	}
	// Fibonacci hashing: IDs are random, but nothing should depend on it.
	h := uint64(id) * 0x9E3779B97F4A7C15
	return c.shards[(h>>32)%uint64(len(c.shards))]
}

// stopCommitters prevents new rounds in every shard and waits for the
// current ones to finish.
func (c *Core) stopCommitters() {
	for _, cm := range c.shards {
		cm.stop()
	}
}

// failAll settles everything still queued when the core stops (after
// stopCommitters).
func (c *Core) failAll() {
	for _, o := range c.allOwners() {
		o.mu.Lock()
		o.m.closeNow()
		o.flushLocked()
	}
}
