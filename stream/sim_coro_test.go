package stream

import (
	"context"
	"fmt"
	"time"
)

// Simulated goroutines (coroutines) for the blocking code the core runs in
// the background — materialization tasks, retention and GC passes, reads
// that span other events — so it interleaves with the commit pipeline,
// other processes and faults at I/O granularity while the simulation stays
// deterministic.
//
// A coroutine is a real goroutine that runs only while the event loop
// waits for it: the loop hands it control (resume) and blocks until it
// parks or ends (yield). Exactly one of them runs at any moment, so the
// order of everything is decided by the event queue alone. A coroutine
// parks where real code would block on the world: a simulated sleep, a
// store call with latency, a wait for the commit pipeline (runtime.await).
// When its process crashes it is resumed once more with `killed` set and
// unwinds by panicking with simKilled from the park point (deferred
// clean-ups run, as they would not in a real crash; they only touch the
// dead process's memory).
type simCoro struct {
	w      *simWorld
	p      *simProc // nil: a world coroutine (a client of the harness)
	inc    int
	resume chan struct{}
	yield  chan struct{}
	done   bool
	killed bool
	parked bool
	panic  any // a panic other than simKilled, re-raised on the event loop
}

type simKilled struct{}

// simWaiter is a coroutine parked in await: it is woken (at the current
// simulated time) once one of its channels is closed.
type simWaiter struct {
	c    *simCoro
	chs  []<-chan struct{}
	cond func() bool // or, if set, once cond holds (wal.Runtime.Block)
}

// spawn starts fn as a coroutine of p after delay d (p's event: it never
// starts if p crashed meanwhile).
func (w *simWorld) spawn(d time.Duration, p *simProc, fn func()) {
	w.after(d, p, func() {
		c := &simCoro{w: w, p: p, resume: make(chan struct{}), yield: make(chan struct{})}
		if p != nil {
			c.inc = p.inc
		}
		w.coros = append(w.coros, c)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(simKilled); !ok {
						c.panic = fmt.Sprintf("%v", r)
					}
				}
				c.done = true
				c.yield <- struct{}{}
			}()
			<-c.resume
			if !c.killed {
				fn()
			}
		}()
		w.run(c)
	})
}

// run hands control to c until it parks or ends.
func (w *simWorld) run(c *simCoro) {
	prev := w.current
	w.current = c
	c.parked = false
	c.resume <- struct{}{}
	if w.watchdog == nil {
		w.watchdog = time.NewTimer(time.Minute)
	} else {
		w.watchdog.Reset(time.Minute)
	}
	select {
	case <-c.yield:
		w.watchdog.Stop()
	case <-w.watchdog.C:
		// A simulated goroutine blocked on something other than the
		// simulation (a real mutex or channel held by a parked one).
		panic("sim: a simulated goroutine neither parked nor ended within a minute: it is blocked outside the simulation (deadlock)")
	}
	w.current = prev
	if c.panic != nil {
		p := c.panic
		c.panic = nil
		panic(fmt.Sprintf("in a simulated goroutine: %v", p))
	}
}

// park suspends the running coroutine until wake is called for it.
func (c *simCoro) park() {
	if c.killed {
		panic(simKilled{}) // a deferred clean-up of a killed coroutine
	}
	c.parked = true
	c.yield <- struct{}{}
	<-c.resume
	if c.killed {
		panic(simKilled{})
	}
}

// sleepCoro parks the running coroutine for d of simulated time; false if
// no coroutine is running (event context: the caller must not block).
func (w *simWorld) sleepCoro(d time.Duration) bool {
	c := w.current
	if c == nil {
		return false
	}
	w.after(d, c.p, func() { w.run(c) })
	c.park()
	return true
}

// awaitCoro parks the running coroutine until one of chs is closed.
func (w *simWorld) awaitCoro(chs ...<-chan struct{}) {
	c := w.current
	if c == nil {
		panic("sim: a blocking wait outside a simulated goroutine (it would deadlock the event loop)")
	}
	w.waiters = append(w.waiters, &simWaiter{c: c, chs: chs})
	c.park()
}

// blockCoro parks the running coroutine until ready holds (polled after
// every event); in event context (no coroutine running) it returns at once
// and the caller must not block (wal.Runtime.Block's contract).
func (w *simWorld) blockCoro(ready func() bool) {
	c := w.current
	if c == nil {
		return
	}
	for !ready() {
		w.waiters = append(w.waiters, &simWaiter{c: c, cond: ready})
		c.park()
	}
}

// wakeWaiters schedules every waiter whose channel closed (after each
// event, in registration order).
func (w *simWorld) wakeWaiters() {
	if len(w.waiters) == 0 {
		return
	}
	keep := w.waiters[:0]
	for _, wt := range w.waiters {
		if wt.cond != nil && wt.cond() || wt.cond == nil && ready(wt.chs) {
			c := wt.c
			w.after(0, c.p, func() { w.run(c) })
			continue
		}
		keep = append(keep, wt)
	}
	w.waiters = keep
}

func ready(chs []<-chan struct{}) bool {
	for _, ch := range chs {
		select {
		case <-ch:
			return true
		default:
		}
	}
	return false
}

// killCoros ends every parked coroutine of p's incarnation (p nil: every
// coroutine of the world), so no goroutine outlives its process or seed.
func (w *simWorld) killCoros(p *simProc) {
	keep := w.coros[:0]
	for _, c := range w.coros {
		if c.done {
			continue
		}
		if p == nil || c.p == p && c.inc == p.inc {
			c.killed = true
			if c.parked {
				w.run(c)
			}
			continue
		}
		keep = append(keep, c)
	}
	w.coros = keep
	wk := w.waiters[:0]
	for _, wt := range w.waiters {
		if !wt.c.killed {
			wk = append(wk, wt)
		}
	}
	w.waiters = wk
}

// simContext is a context whose deadline passes in simulated time.
func (p *simProc) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	stop := p.afterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return cctx, func() { stop(); cancel(context.Canceled) }
}

// block parks the running coroutine until ready holds (Core.Close's
// waits for its committers and background work).
func (p *simProc) block(ready func() bool) { p.w.blockCoro(ready) }

// await parks the running coroutine until ch is closed or ctx ends.
func (p *simProc) await(ctx context.Context, ch <-chan struct{}) error {
	if ready([]<-chan struct{}{ch}) {
		return nil
	}
	p.w.awaitCoro(ch, ctx.Done())
	if ready([]<-chan struct{}{ch}) {
		return nil
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return ctx.Err()
}
