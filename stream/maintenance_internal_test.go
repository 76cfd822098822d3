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
	started int // goFunc calls
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

// TestNoBackgroundWorkOnceCloseWaits is the regression test for the
// Close/maintenance race (TestExpiredSessionTakeover failed ~1 in 40 under
// -race): a tick that came due while Close ran started a retention pass
// (c.background.Add from zero) concurrently with Close's
// c.background.Wait — a sync.WaitGroup misuse that the race detector
// reports and that let Wait return before the pass started, so a retention
// pass could run on a closed Core. Once Close waits for background work,
// a tick (or any other starter: lifecycle passes, materialization tasks,
// all through goBackground) must start nothing; after Close no tick is
// armed, and a timer that fires anyway arms no other.
func TestNoBackgroundWorkOnceCloseWaits(t *testing.T) {
	rt := &tickRuntime{at: time.Unix(1_700_000_000, 0)}
	c, err := Open(context.Background(), Config{Metadata: memstore.New(), ObjectWAL: memprovider.New(1, memprovider.Faults{}),
		WriterID: "b1", RetentionInterval: time.Minute, runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	rt.advance(2 * time.Minute) // a retention pass is due at the next tick

	// The point where Close waits for background work (the tick fires in
	// another goroutine at that moment in the failing runs): the tick that
	// fires now must not start the due retention pass.
	c.mu.Lock()
	c.backgroundClosed = true
	c.mu.Unlock()
	started := rt.startedCount()
	rt.fire(false)
	if n := rt.startedCount() - started; n != 0 {
		t.Fatalf("a tick started %d passes while Close waits for background work", n)
	}
	if c.goBackground(func() {}) {
		t.Fatal("goBackground started work while Close waits for background work")
	}

	// Let Close run for real.
	c.mu.Lock()
	c.backgroundClosed = false
	c.mu.Unlock()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rt.fire(false) // lifecycle loops re-armed by the fire above end once c.ctx is cancelled
	if n := rt.pending(); n != 0 {
		t.Fatalf("%d timers still armed after Close", n)
	}
	started = rt.startedCount()
	rt.advance(2 * time.Minute)
	rt.fire(true) // timers whose stop came too late
	if n, s := rt.pending(), rt.startedCount()-started; n != 0 || s != 0 {
		t.Fatalf("after Close late timers armed %d timers and started %d passes", n, s)
	}
}
