// Package latency is a fixed-bucket, lock-free latency histogram for the
// ack path: Observe is a few atomic adds, so packages that must not depend
// on a metrics library (the stream core, the protocol front ends) can count
// per-stage latencies and let the server export snapshots at scrape time.
//
// It owns only counting. It must never block, allocate on Observe, or know
// metric names.
package latency

import (
	"sync/atomic"
	"time"
)

// Bounds are the upper bounds of every Histogram's buckets: fine enough
// to read a median of a sub-millisecond to few-millisecond stage on a
// local disk, wide enough for a loaded machine's tail.
var Bounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond, 750 * time.Microsecond,
	time.Millisecond, 1500 * time.Microsecond, 2 * time.Millisecond, 2500 * time.Microsecond,
	3 * time.Millisecond, 4 * time.Millisecond, 5 * time.Millisecond, 7500 * time.Microsecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	500 * time.Millisecond, 2 * time.Second,
}

// Histogram counts durations per bucket of Bounds (plus one unbounded
// bucket). The zero value is ready to use.
type Histogram struct {
	nanos   atomic.Int64
	buckets [len(Bounds) + 1]atomic.Int64
}

// Observe counts one duration (negative ones as zero).
func (h *Histogram) Observe(d time.Duration) {
	d = max(d, 0)
	h.nanos.Add(int64(d))
	for i, b := range Bounds {
		if d <= b {
			h.buckets[i].Add(1)
			return
		}
	}
	h.buckets[len(Bounds)].Add(1)
}

// Snapshot is a Histogram read at one moment.
type Snapshot struct {
	// Buckets[i] counts observations <= Bounds[i] and > Bounds[i-1]; the
	// last entry those above every bound.
	Buckets []int64
	Bounds  []time.Duration
	Sum     time.Duration
}

// Snapshot reads h (each counter atomically; the set is not a consistent
// cut, which a scrape does not need).
func (h *Histogram) Snapshot() Snapshot {
	s := Snapshot{Bounds: Bounds[:], Sum: time.Duration(h.nanos.Load()), Buckets: make([]int64, len(h.buckets))}
	for i := range h.buckets {
		s.Buckets[i] = h.buckets[i].Load()
	}
	return s
}

// Count is the number of observations.
func (s Snapshot) Count() int64 {
	var n int64
	for _, b := range s.Buckets {
		n += b
	}
	return n
}

// Cumulative returns Prometheus-style cumulative counts keyed by upper
// bound in seconds (the unbounded bucket is the total, Count).
func (s Snapshot) Cumulative() map[float64]uint64 {
	out := make(map[float64]uint64, len(s.Bounds))
	var cum uint64
	for i, b := range s.Bounds {
		cum += uint64(s.Buckets[i])
		out[b.Seconds()] = cum
	}
	return out
}
