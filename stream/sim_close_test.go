package stream

import (
	"cmp"
	"flag"
	"math/rand"
	"time"
)

// Graceful shutdown in the simulation: Core.Close (which closes the WAL
// providers — the real Object WAL and BookKeeper WAL on seeds that run
// them) runs as a simulated goroutine of its broker
//
//   - at the end of every seed, on every broker, after the audit; then
//     every broker reopens as a new incarnation (its Recover takes over
//     what Close left: unsettled intents, unreleased ledgers) and a fresh
//     read of every stream must still be exactly what was committed;
//   - on an eighth of the seeds without the lifecycle (chosen from the seed
//     by its own source), in place of every other crash of the active
//     phase: the broker closes while appends, commit rounds and WAL writes
//     are in flight, and restarts later.
//
// After each Close: it returned (without error in a healthy world), every
// append the broker accepted is resolved, no simulated goroutine of the
// broker is left, and no event of it is pending but timers that cannot
// act any more (see closeLeftovers).
var simClose = flag.String("sim.close", "mixed", "graceful shutdowns: mixed (at every seed's end; mid-run on an eighth of the seeds without lifecycle), on (mid-run on every seed), off")

// simCloseMode overrides -sim.close (the replay check sets it).
var simCloseMode string

// chooseClose decides from the seed alone whether this seed closes
// brokers mid-run.
func (h *simHarness) chooseClose() {
	switch cmp.Or(simCloseMode, *simClose) {
	case "on":
		h.closeMidRun = true
	case "off":
	default:
		h.closeMidRun = !h.lifecycle && rand.New(rand.NewSource(h.w.seed^0x0c105e)).Intn(8) == 0
	}
}

// shutdown closes broker b gracefully (a simulated goroutine of it); once
// Close returned the broker is down and restarts later.
func (h *simHarness) shutdown(b int) {
	p := h.brokers[b]
	if !p.up() || p.closing {
		return
	}
	h.stats.closes++
	h.w.tracef("CLOSE broker %s incarnation %d", p.name, p.inc)
	h.closeProc(p, func() {
		h.w.after(time.Duration(2+h.w.rng.Intn(40))*time.Millisecond, nil, func() { h.restart(b) })
	})
}

// closeProc runs p's Core.Close as a simulated goroutine of p, then (as a
// world event) checks what it left and takes p down.
func (h *simHarness) closeProc(p *simProc, then func()) {
	p.closing = true
	h.w.spawn(0, p, func() {
		err := p.core.Close()
		h.w.tracef("broker %s incarnation %d closed: %v", p.name, p.inc, err)
		if err != nil && h.quiet {
			h.violate("broker %s: Close in a healthy world failed: %v", p.name, err)
		}
		h.w.after(0, nil, func() {
			h.closeLeftovers(p)
			p.alive = false
			h.w.killCoros(p)
			p.closed = true
			if then != nil {
				then()
			}
		})
	})
}

// closeLeftovers checks what a returned Close left of p: unresolved
// appends, simulated goroutines, pending events.
func (h *simHarness) closeLeftovers(p *simProc) {
	for _, pa := range h.pending {
		if pa.proc == p && !isResolved(pa.future) {
			h.violate("broker %s: Close returned with append %s unresolved", p.name, pa.req.in.id)
		}
	}
	if p.clientReads > 0 {
		// A harness read is still running on p (a client call Close does
		// not wait for): its goroutine and wake-ups are not the core's.
		return
	}
	n := 0
	for _, c := range h.w.coros {
		if !c.done && c.p == p && c.inc == p.inc {
			n++
		}
	}
	if n > 0 {
		h.violate("broker %s: Close returned with %d simulated goroutines of it still running", p.name, n)
	}
	ev := 0
	for _, e := range h.w.q {
		if !e.canceled && !e.ran && !e.lib && e.proc == p && e.inc == p.inc {
			ev++
			h.w.tracef("left by Close of %s: an event in %v, scheduled by%s", p.name, time.Duration(e.at-h.w.now), e.from)
		}
	}
	h.stats.closeLeftEvents += ev
	if ev > 0 {
		h.violate("broker %s: Close returned with %d events of it still scheduled (timers or goroutines to come)", p.name, ev)
	}
}

// closeAndReopen (the end of a seed): every broker and the auditor close;
// every broker reopens as a new incarnation; a fresh read of every stream
// through the first must be exactly what was committed.
func (h *simHarness) closeAndReopen(audit *simProc) {
	procs := append(h.alive(), audit)
	for _, p := range procs {
		h.closeProc(p, nil)
	}
	deadline := h.w.now + int64(20*time.Second)
	for {
		done := true
		for _, p := range procs {
			done = done && p.closed
		}
		if done {
			break
		}
		if !h.w.step(deadline) {
			for _, p := range procs {
				if !p.closed {
					h.violate("broker %s: Close did not return within 20 s of simulated time", p.name)
				}
			}
			return
		}
		h.poll()
	}
	h.stats.closes += len(procs)
	for b, p := range h.brokers {
		if !p.alive {
			h.brokers[b] = h.startBroker(b, p.inc+1)
		}
	}
	if !h.awaitUp(h.brokers...) {
		return
	}
	for _, st := range h.streams {
		if _, ok := h.oracleLog(h.brokers[0], st); !ok {
			return
		}
	}
}
