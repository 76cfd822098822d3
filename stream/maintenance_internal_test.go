package stream

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// tickRuntime is the real runtime with a hand-driven clock and timers: a
// test fires the armed timers itself, so it decides exactly where a
// maintenance tick falls relative to Close.
type tickRuntime struct {
	realRuntime
	mu      sync.Mutex
	at      time.Time
	timers  []*tickTimer
	started int // goFunc calls: retention passes (this test has no owners, so no committer runs)
}

type tickTimer struct {
	f       func()
	stopped bool
	fired   bool
}

func (r *tickRuntime) now() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at
}

func (r *tickRuntime) advance(d time.Duration) {
	r.mu.Lock()
	r.at = r.at.Add(d)
	r.mu.Unlock()
}

func (r *tickRuntime) afterFunc(d time.Duration, f func()) func() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &tickTimer{f: f}
	r.timers = append(r.timers, t)
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if t.fired || t.stopped {
			return false
		}
		t.stopped = true
		return true
	}
}

func (r *tickRuntime) goFunc(f func()) {
	r.mu.Lock()
	r.started++
	r.mu.Unlock()
	go f()
}

// fire runs every armed timer once (including ones a stop came too late
// for, as a real timer whose goroutine already started) and reports how
// many were still armed.
func (r *tickRuntime) fire(evenStopped bool) (armed int) {
	r.mu.Lock()
	ts := r.timers
	r.timers = nil
	r.mu.Unlock()
	for _, t := range ts {
		if t.stopped && !evenStopped {
			continue
		}
		if !t.stopped {
			armed++
		}
		t.fired = true
		t.f()
	}
	return armed
}

func (r *tickRuntime) startedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

func (r *tickRuntime) pending() (armed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.timers {
		if !t.stopped && !t.fired {
			armed++
		}
	}
	return armed
}

// TestNoBackgroundWorkOnceCloseBegan is the regression test for the
// Close/maintenance race (TestExpiredSessionTakeover failed ~1 in 40 under
// -race): a tick that came due while Close was draining started a
// retention pass (c.background.Add from zero) concurrently with Close's
// c.background.Wait — a sync.WaitGroup misuse that the race detector
// reports and that let Wait return before the pass started, so a retention
// pass could run on a closed Core. Once Close has begun, a tick may still
// renew leases but must start no background work; after Close no tick is
// armed, and a timer that fires anyway arms no other.
func TestNoBackgroundWorkOnceCloseBegan(t *testing.T) {
	rt := &tickRuntime{at: time.Unix(1_700_000_000, 0)}
	c, err := Open(context.Background(), Config{Metadata: memstore.New(), ObjectWAL: memprovider.New(1, memprovider.Faults{}),
		WriterID: "b1", RetentionInterval: time.Minute, runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	rt.advance(2 * time.Minute) // a retention pass is due at the next tick

	// Close has begun (the first thing it does, before draining): the tick
	// that fires now must not start the due retention pass.
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	if n := rt.fire(false); n != 1 {
		t.Fatalf("%d maintenance ticks armed, want 1", n)
	}
	if n := rt.startedCount(); n != 0 {
		t.Fatalf("a tick started %d retention passes after Close began", n)
	}

	// Let Close run for real.
	c.mu.Lock()
	c.closed = false
	c.mu.Unlock()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := rt.pending(); n != 0 {
		t.Fatalf("%d maintenance ticks still armed after Close", n)
	}
	rt.advance(2 * time.Minute)
	rt.fire(true) // a timer whose stop came too late
	if n, started := rt.pending(), rt.startedCount(); n != 0 || started != 0 {
		t.Fatalf("after Close a late tick armed %d ticks and started %d passes", n, started)
	}
}
