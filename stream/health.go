package stream

import (
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// ComponentHealth says whether one part of the storage under the core can
// currently make appends durable.
type ComponentHealth struct {
	// Component is "metadata", or the provider name ("objectwal",
	// "bookkeeper").
	Component string
	// Degraded is set while appends through the component fail for a cause
	// that outlives one request. Reads of committed data may still work.
	// Providers and the core recover by themselves once the cause clears.
	Degraded bool
	// Reason says why (empty when healthy).
	Reason string
	// Since is when the degraded period began (zero when healthy).
	Since time.Time
	// Recoveries counts the degraded periods that have ended.
	Recoveries int64
}

// Health reports, per component, whether the core can currently commit
// appends: the metadata store (degraded while commit rounds keep failing)
// and each configured WAL provider that reports its own health. It never
// does I/O.
func (c *Core) Health() []ComponentHealth {
	out := []ComponentHealth{c.metaHealth.snapshot("metadata")}
	for _, p := range c.providers() {
		h := ComponentHealth{Component: p.Name()}
		if r, ok := p.(provider.HealthReporter); ok {
			ph := r.Health()
			h.Degraded, h.Reason, h.Since, h.Recoveries = ph.Degraded, ph.Reason, ph.Since, ph.Recoveries
		}
		out = append(out, h)
	}
	return out
}

// healthTracker turns a stream of round-trip outcomes into a degraded
// period: it starts at the first failure after a success and ends at the
// next success. One failed round is already a degraded period: the committer
// retries failed rounds continuously, so a single failure that the next
// round fixes lasts milliseconds.
type healthTracker struct {
	mu         sync.Mutex
	since      time.Time
	reason     string
	recoveries int64
}

func (t *healthTracker) fail(now time.Time, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since.IsZero() {
		t.since = now
	}
	t.reason = reason
}

func (t *healthTracker) ok() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.since.IsZero() {
		t.since, t.reason = time.Time{}, ""
		t.recoveries++
	}
}

func (t *healthTracker) snapshot(component string) ComponentHealth {
	t.mu.Lock()
	defer t.mu.Unlock()
	return ComponentHealth{Component: component, Degraded: !t.since.IsZero(), Reason: t.reason, Since: t.since, Recoveries: t.recoveries}
}

// msgWALWriteFailed is the machine's log line for a failed WAL write; the
// driver rate-limits it (logLimiter).
const msgWALWriteFailed = "WAL write failed; failing it and every later append of the stream"

// logLimiter lets one log line through per interval and counts the ones it
// held back, so a fault that fails every append (a full disk) does not
// also flood the log.
type logLimiter struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow reports whether to log now and how many lines were held back since
// the last one that was let through.
func (l *logLimiter) allow(now time.Time, interval time.Duration) (suppressed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.last) >= interval {
		n := l.suppressed
		l.last, l.suppressed = now, 0
		return n, true
	}
	l.suppressed++
	return 0, false
}
