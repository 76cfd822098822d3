package stream

import (
	"fmt"
	"math/rand"
	"runtime/debug"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// SimCluster exposes the deterministic simulator's world (simulated
// brokers, each a real Core on the simulated runtime, over the simulated
// metadata store and the simulated WAL providers) to tests outside the
// package: the front-end storage boundaries (managedledger, kafka/kstore)
// import stream, so their simulations live in package stream_test and
// drive the world only through these hooks (issue 14 item 2).
//
// A SimCluster runs the commit pipeline alone (no materialization,
// retention or GC) on the provider models: every event is plain, and the
// boundaries' synchronous calls (metadata reads and writes, session
// acquisition, reads) run atomically within the event that makes them.
type SimCluster struct {
	h *simHarness
}

// NewSimCluster builds the world of one seed with the given number of
// brokers, all up. trace records the event trace (SimCluster.Trace).
func NewSimCluster(seed int64, brokers int, trace bool) *SimCluster {
	w := newSimWorld(seed)
	if trace {
		w.trace = &strings.Builder{}
	}
	h := &simHarness{w: w, meta: newSimMeta(w), disks: map[string]*simDisk{
		"objectwal": newSimDisk("objectwal", 1+w.rng.Intn(4)), "bookkeeper": newSimDisk("bookkeeper", 1+w.rng.Intn(4))}}
	h.objs = newSimObjects(w)
	h.commitShards = 1 + int(uint64(seed)%3)
	h.lc = LifecycleConfig{DisableMaterialization: true, GCDisabled: true}
	h.retain = time.Hour
	rng := w.rng
	w.faults = simFaults{
		metaFail: rng.Float64() * 0.06, metaLoss: rng.Float64() * 0.06,
		walFail: rng.Float64() * 0.04, walLost: rng.Float64() * 0.03, probeFail: rng.Float64() * 0.5, slowMeta: rng.Float64() * 0.05,
		maxMetaLat: time.Duration(100+rng.Intn(3000)) * time.Microsecond,
		maxWALLat:  time.Duration(100+rng.Intn(5000)) * time.Microsecond,
	}
	for b := 0; b < brokers; b++ {
		h.brokers = append(h.brokers, h.startBroker(b, 1))
	}
	return &SimCluster{h: h}
}

// SimProfiles are the profiles a SimCluster's streams may use (the
// BookKeeper SYNC_OBJECT one needs materialization, which a SimCluster
// does not run).
var SimProfiles = simProfiles[:len(simProfiles)-1]

// Rand is the seed's one random source.
func (c *SimCluster) Rand() *rand.Rand { return c.h.w.rng }

// Now is the simulated time.
func (c *SimCluster) Now() time.Time { return time.Unix(0, c.h.w.now) }

// Brokers is the number of brokers.
func (c *SimCluster) Brokers() int { return len(c.h.brokers) }

// Up reports whether broker b is up.
func (c *SimCluster) Up(b int) bool { return c.h.brokers[b].up() }

// Incarnation is broker b's current incarnation (bumps at every restart).
func (c *SimCluster) Incarnation(b int) int { return c.h.brokers[b].inc }

// Storage is broker b's core, or nil while it is down.
func (c *SimCluster) Storage(b int) Storage {
	if p := c.h.brokers[b]; p.up() {
		return p.core
	}
	return nil
}

// Meta is the simulated metadata store (with the seed's injected failures
// and lost responses) the brokers share.
func (c *SimCluster) Meta() metadata.Store { return c.h.meta }

// Truth is the metadata store without injected faults, for the checks.
func (c *SimCluster) Truth() metadata.Store { return c.h.meta.inner }

// After schedules fn after d on behalf of broker b's current incarnation
// (b < 0: the world). A crash of that incarnation drops the event.
func (c *SimCluster) After(d time.Duration, b int, fn func()) {
	var p *simProc
	if b >= 0 {
		p = c.h.brokers[b]
	}
	c.h.w.after(d, p, fn)
}

// AfterFunc is After with a stop function: stop cancels fn if it has not
// run yet (false if it ran or was stopped). kstore.Runtime's AfterFunc.
func (c *SimCluster) AfterFunc(d time.Duration, b int, fn func()) (stop func() bool) {
	var p *simProc
	if b >= 0 {
		p = c.h.brokers[b]
	}
	e := c.h.w.after(d, p, fn)
	return func() bool {
		if e.ran || e.canceled {
			return false
		}
		e.canceled = true
		return true
	}
}

// Crash crashes broker b (un-fsynced WAL writes are dropped, its events and
// timers never run); it restarts as a new incarnation 2–42 ms later.
func (c *SimCluster) Crash(b int) { c.h.crash(b) }

// Step runs the next event up to simulated time until (false: none).
func (c *SimCluster) Step(until time.Time) bool { return c.h.w.step(until.UnixNano()) }

// Quiet stops every injected fault and restarts the crashed brokers.
func (c *SimCluster) Quiet() {
	h := c.h
	h.quiet = true
	h.w.faults = simFaults{maxMetaLat: h.w.faults.maxMetaLat, maxWALLat: h.w.faults.maxWALLat}
	for b, p := range h.brokers {
		if !p.alive {
			h.restart(b)
		}
	}
}

// Violate records an invariant violation (the seed fails).
func (c *SimCluster) Violate(format string, args ...any) { c.h.violate(format, args...) }

// Violations are the violations recorded so far (the harness's own too).
func (c *SimCluster) Violations() []string { return c.h.violations }

// Tracef writes into the trace (when tracing).
func (c *SimCluster) Tracef(format string, args ...any) { c.h.w.tracef(format, args...) }

// Trace is the event trace (empty unless tracing).
func (c *SimCluster) Trace() string {
	if c.h.w.trace == nil {
		return ""
	}
	return c.h.w.trace.String()
}

// Steps is the number of events run.
func (c *SimCluster) Steps() int { return c.h.w.steps }

// Crashes and the like are counted by the caller; Recover turns a panic of
// the caller's seed into a violation with its stack (defer it).
func (c *SimCluster) Recover() {
	if r := recover(); r != nil {
		c.h.violate("panic: %v\n%s", r, debug.Stack())
	}
	c.h.w.current = nil
	c.h.w.killCoros(nil)
}

// SimReplayHint is the flag set that replays a front-end simulation seed.
func SimReplayHint(test string, seed int64, flagName string) string {
	return fmt.Sprintf("go test ./stream -run '%s$' -count=1 -v -%s=%d -sim.trace", test, flagName, seed)
}

// SimTrace reports -sim.trace.
func SimTrace() bool { return *simTrace }

// SimRaceEnabled reports a -race build.
const SimRaceEnabled = raceEnabled
