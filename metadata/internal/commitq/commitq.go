// Package commitq is the request queue in front of an embedded store's one
// committer goroutine (boltstore, logstore): writers submit, the committer
// collects whole requests into one commit round.
//
// It owns only the queue: admission (public requests are refused once the
// store began closing; the store's own session purges are still taken
// until it stops), waking the committer, the optional batch delay and the
// cut of a round at MaxBatchOps. It must never split a request, reorder
// requests, or drop one it admitted: everything admitted before Stop is
// still collected.
package commitq

import (
	"sync"
	"time"
)

// Queue holds requests of type R; ops reports how many ops one holds (a
// request with none counts as one).
type Queue[R any] struct {
	maxOps   int
	maxDelay time.Duration
	ops      func(R) int
	wake     chan struct{}

	mu           sync.Mutex // guards the fields below
	queue        []R
	queuedOps    int
	acceptPublic bool
	stopping     bool
}

// New returns an open queue. maxOps stops coalescing further requests into
// a round (the first request of a round is taken whatever its size);
// maxDelay > 0 lets a round wait that long from its collection start for
// more requests.
func New[R any](maxOps int, maxDelay time.Duration, ops func(R) int) *Queue[R] {
	return &Queue[R]{maxOps: maxOps, maxDelay: maxDelay, ops: ops, wake: make(chan struct{}, 1), acceptPublic: true}
}

func (q *Queue[R]) size(r R) int { return max(q.ops(r), 1) }

// Submit queues r. It returns false, queuing nothing, once the queue
// stopped, or for a public request once RefusePublic was called.
func (q *Queue[R]) Submit(r R, public bool) bool {
	q.mu.Lock()
	if (public && !q.acceptPublic) || q.stopping {
		q.mu.Unlock()
		return false
	}
	wasEmpty := len(q.queue) == 0
	q.queue = append(q.queue, r)
	q.queuedOps += q.size(r)
	full := q.queuedOps >= q.maxOps
	q.mu.Unlock()
	// The committer sleeps only on an empty queue or while waiting for the
	// batch delay; wake it for the first request and when the batch is full.
	if wasEmpty || full {
		q.kick()
	}
	return true
}

func (q *Queue[R]) kick() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// RefusePublic makes Submit refuse public requests from now on.
func (q *Queue[R]) RefusePublic() {
	q.mu.Lock()
	q.acceptPublic = false
	q.mu.Unlock()
}

// Stop refuses every request from now on and wakes the committer, whose
// Collect returns nil once the queue is empty.
func (q *Queue[R]) Stop() {
	q.mu.Lock()
	q.stopping = true
	q.mu.Unlock()
	q.kick()
}

// Collect waits for queued requests, lets the batch delay run (from now;
// under load the oldest request has long been waiting), and takes whole
// requests up to maxOps. It returns nil when stopped with an empty queue.
// timer is the caller's, reused across rounds.
func (q *Queue[R]) Collect(timer *time.Timer) []R {
	q.mu.Lock()
	for len(q.queue) == 0 {
		if q.stopping {
			q.mu.Unlock()
			return nil
		}
		q.mu.Unlock()
		<-q.wake
		q.mu.Lock()
	}
	if q.maxDelay > 0 {
		deadline := time.Now().Add(q.maxDelay)
		for q.queuedOps < q.maxOps && !q.stopping {
			wait := time.Until(deadline)
			if wait <= 0 {
				break
			}
			q.mu.Unlock()
			timer.Reset(wait)
			select {
			case <-q.wake:
				timer.Stop()
			case <-timer.C:
			}
			q.mu.Lock()
		}
	}
	n, ops := 0, 0
	for n < len(q.queue) {
		k := q.size(q.queue[n])
		if n > 0 && ops+k > q.maxOps {
			break
		}
		ops += k
		n++
	}
	batch := make([]R, n)
	copy(batch, q.queue[:n])
	clear(q.queue[:n])
	q.queue = q.queue[n:]
	q.queuedOps -= ops
	q.mu.Unlock()
	return batch
}

// Len is the number of requests queued and not yet collected.
func (q *Queue[R]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}
