package cluster

import (
	"sync/atomic"
	"time"
)

// MoveBounds are the upper bounds of the ownership-move duration
// histograms (Stats.AcquireBuckets, Stats.ReleaseBuckets); the last bucket
// is unbounded.
var MoveBounds = []time.Duration{
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

type histogram struct {
	nanos   atomic.Int64
	buckets [12]atomic.Int64 // len(MoveBounds)+1
}

func (h *histogram) observe(d time.Duration) {
	h.nanos.Add(int64(d))
	for i, b := range MoveBounds {
		if d <= b {
			h.buckets[i].Add(1)
			return
		}
	}
	h.buckets[len(MoveBounds)].Add(1)
}

func (h *histogram) snapshot() (float64, []int64) {
	out := make([]int64, len(MoveBounds)+1)
	for i := range out {
		out[i] = h.buckets[i].Load()
	}
	return time.Duration(h.nanos.Load()).Seconds(), out
}

type stats struct {
	acquired, preempted, handoffWaits     atomic.Int64
	released, releaseFailed, lost         atomic.Int64
	viewChanges, sessionsLost, isolations atomic.Int64
	peersExpired                          atomic.Int64
	acquireSeconds, releaseSeconds        histogram
}

// Stats are the node's cumulative counters (for metrics).
type Stats struct {
	// Acquired counts ownership taken (append sessions acquired through
	// Writer); Preempted those taken from a dead holder, HandoffWaits those
	// that first waited for a live holder's release.
	Acquired, Preempted, HandoffWaits int64
	// Released counts ownership handed over (sessions released), of which
	// ReleaseFailed could not reach the store; Lost counts sessions another
	// writer fenced.
	Released, ReleaseFailed, Lost int64
	// ViewChanges counts registry changes observed; SessionsLost registry
	// sessions that ended and were replaced; Isolations times the node lost
	// contact with the store for a whole TTL.
	ViewChanges, SessionsLost, Isolations int64
	// PeersExpired counts peers this node found dead (connection closed,
	// address refused) before their registry TTL.
	PeersExpired int64
	// Held is the number of streams whose session the node holds now.
	Held int
	// Brokers and ActiveBrokers count the registered brokers in the view.
	Brokers, ActiveBrokers int
	// AcquireSeconds / ReleaseSeconds are the summed durations of ownership
	// moves; the bucket counts use MoveBounds.
	AcquireSeconds, ReleaseSeconds float64
	AcquireBuckets, ReleaseBuckets []int64
}

// Stats returns a snapshot of the counters.
func (n *Node) Stats() Stats {
	s := Stats{
		Acquired: n.stats.acquired.Load(), Preempted: n.stats.preempted.Load(), HandoffWaits: n.stats.handoffWaits.Load(),
		Released: n.stats.released.Load(), ReleaseFailed: n.stats.releaseFailed.Load(), Lost: n.stats.lost.Load(),
		ViewChanges: n.stats.viewChanges.Load(), SessionsLost: n.stats.sessionsLost.Load(), Isolations: n.stats.isolations.Load(),
		PeersExpired: n.stats.peersExpired.Load(),
		Held:         len(n.Held()),
	}
	v := n.View()
	s.Brokers, s.ActiveBrokers = len(v.Brokers), len(v.Active())
	s.AcquireSeconds, s.AcquireBuckets = n.stats.acquireSeconds.snapshot()
	s.ReleaseSeconds, s.ReleaseBuckets = n.stats.releaseSeconds.snapshot()
	return s
}
