package stream

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// simWorld is one deterministic simulation: a simulated clock, one seeded
// random source, and one event queue from which every callback of every
// simulated process, store and client runs, one at a time. Nothing in a
// simulated run reads the wall clock or starts a goroutine, so a seed
// replays exactly.
type simWorld struct {
	seed  int64
	rng   *rand.Rand
	now   int64 // simulated nanoseconds
	q     eventQueue
	seq   uint64
	steps int
	trace *strings.Builder // nil unless -sim.trace
	// faults are the current fault rates (zeroed for the final quiet phase).
	faults simFaults
	// coroutines (sim_coro_test.go)
	// coroutines: background work and reads run as simulated goroutines
	// (seeds with materialization, retention and GC)
	coroutines bool
	current    *simCoro
	coros      []*simCoro
	waiters    []*simWaiter
	watchdog   *time.Timer
}

type simFaults struct {
	metaFail, metaLoss float64 // metadata call fails before applying / applies and loses its response
	walFail, walLost   float64 // WAL write fails / lands but reports failure
	probeFail          float64 // an index scan fails
	slowMeta           float64 // a commit round's request takes far longer than usual
	maxMetaLat         time.Duration
	maxWALLat          time.Duration
}

type simEvent struct {
	at       int64
	seq      uint64
	proc     *simProc // nil: the world (stores, the network, clients)
	inc      int      // proc incarnation the event belongs to
	fn       func()
	canceled bool
	ran      bool
	// lib: network traffic of a client library the process owns (the
	// simulated BookKeeper client's bookie answers and resends), which
	// Core.Close does not own (closeLeftovers)
	lib bool
	// from: who scheduled it (with -sim.trace only: closeLeftovers says)
	from string
}

type eventQueue []*simEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

const simEpoch = int64(1_700_000_000) * int64(time.Second)

func newSimWorld(seed int64) *simWorld {
	return &simWorld{seed: seed, rng: rand.New(rand.NewSource(seed)), now: simEpoch}
}

// at schedules fn at simulated time t on behalf of proc (nil: the world).
// An event of a process incarnation that has crashed never runs.
func (w *simWorld) at(t int64, p *simProc, fn func()) *simEvent {
	w.seq++
	e := &simEvent{at: max(t, w.now), seq: w.seq, proc: p, fn: fn}
	if p != nil {
		e.inc = p.inc
		if w.trace != nil {
			e.from = callers()
		}
	}
	heap.Push(&w.q, e)
	return e
}

// callers names the functions that scheduled an event (debugging aid).
func callers() string {
	var pcs [10]uintptr
	frames := goruntime.CallersFrames(pcs[:goruntime.Callers(3, pcs[:])])
	var b strings.Builder
	for {
		f, more := frames.Next()
		fmt.Fprintf(&b, " %s:%d", f.Function[strings.LastIndexByte(f.Function, '/')+1:], f.Line)
		if !more {
			return b.String()
		}
	}
}

func (w *simWorld) after(d time.Duration, p *simProc, fn func()) *simEvent {
	return w.at(w.now+int64(d), p, fn)
}

// jitter is a random duration in [0, maxD).
func (w *simWorld) jitter(maxD time.Duration) time.Duration {
	if maxD <= 0 {
		return 0
	}
	return time.Duration(w.rng.Int63n(int64(maxD)))
}

func (w *simWorld) chance(p float64) bool { return p > 0 && w.rng.Float64() < p }

// step runs the next event; false when the queue is empty or the next
// event lies beyond until.
func (w *simWorld) step(until int64) bool {
	for w.q.Len() > 0 {
		e := w.q[0]
		if e.at > until {
			return false
		}
		heap.Pop(&w.q)
		if e.canceled || (e.proc != nil && (!e.proc.alive || e.proc.inc != e.inc)) {
			continue
		}
		w.now = e.at
		e.ran = true
		w.steps++
		e.fn()
		w.wakeWaiters()
		return true
	}
	return false
}

func (w *simWorld) tracef(format string, args ...any) {
	if w.trace != nil {
		fmt.Fprintf(w.trace, "%9.3fms ", float64(w.now-simEpoch)/1e6)
		fmt.Fprintf(w.trace, format, args...)
		w.trace.WriteByte('\n')
	}
}

// ---- The runtime of one simulated process ----

// simProc is one simulated broker process incarnation's view of the world:
// it implements the core's runtime on the world's clock and queue.
type simProc struct {
	w     *simWorld
	name  string // WriterID
	inc   int    // incarnation; bumps at every restart
	alive bool
	core  *Core
	wals  []*simWAL
	ow    *objectwal.Provider // the real Object WAL (seeds with realWAL), or nil
	// quietStart: started in the quiet phase (no faults: it must come up)
	quietStart bool
	// closing: Core.Close is running (sim_close_test.go; not up for the
	// harness any more); closed: it returned and the process is down
	closing, closed bool
	// clientReads: harness reads running as simulated goroutines of p
	clientReads int
	meta        *simMeta
	broker      int
}

var _ runtime = (*simProc)(nil)

func (p *simProc) now() time.Time { return time.Unix(0, p.w.now) }

func (p *simProc) afterFunc(d time.Duration, f func()) func() bool {
	e := p.w.after(d, p, f)
	return func() bool {
		if e.ran || e.canceled {
			return false
		}
		e.canceled = true
		return true
	}
}

// goFunc runs f as a simulated goroutine of p (sim_coro_test.go), or —
// in seeds without materialization, retention and GC, where nothing the
// core starts blocks — as a plain event, which costs far less.
func (p *simProc) goFunc(f func()) {
	if !p.w.coroutines {
		p.w.after(p.w.jitter(50*time.Microsecond), p, f)
		return
	}
	p.w.spawn(p.w.jitter(50*time.Microsecond), p, f)
}

// sleep returns at once, on the event loop and in a simulated goroutine
// alike: retry loops run atomically within one event, and end because
// injected faults are drawn afresh on every call. (Parking a simulated
// goroutine here would deadlock: the core sleeps in some retry loops while
// holding a mutex — a lease's writing lock — that another of its
// goroutines may take; a parked coroutine never releases it.)
func (p *simProc) sleep(ctx context.Context, d time.Duration) error { return ctx.Err() }

// batch sends a commit round to the simulated store: the request is applied
// (or lost before applying) after one random latency, as a world event that
// happens even if the sender has crashed meanwhile; its response reaches
// the sender after another, unless it is lost.
func (p *simProc) batch(ctx context.Context, meta metadata.Store, ops []metadata.Op, done func([]metadata.Result, error)) bool {
	sm := meta.(*simMeta)
	w := p.w
	ops = append([]metadata.Op(nil), ops...)
	lat := w.jitter(w.faults.maxMetaLat)
	if w.chance(w.faults.slowMeta) {
		lat += 5*time.Millisecond + w.jitter(80*time.Millisecond) // stuck in a queue, a GC pause
	}
	w.after(lat, nil, func() {
		var res []metadata.Result
		var err error
		if w.chance(w.faults.metaFail) {
			err = fmt.Errorf("sim: batch lost before applying: %w", metadata.ErrUnavailable)
		} else {
			res, err = sm.inner.Batch(context.Background(), ops)
			sm.afterWrite(ops, res, err)
			if w.chance(w.faults.metaLoss) {
				res, err = nil, fmt.Errorf("sim: batch applied, response lost: %w", metadata.ErrUnavailable)
			}
		}
		w.after(w.jitter(w.faults.maxMetaLat), p, func() { done(res, err) })
	})
	return false
}

func (p *simProc) scan(ctx context.Context, meta metadata.Store, min, max string, limit int, done func([]metadata.Record, error)) {
	sm := meta.(*simMeta)
	w := p.w
	w.after(w.jitter(w.faults.maxMetaLat), p, func() {
		if w.chance(w.faults.probeFail) {
			done(nil, fmt.Errorf("sim: index scan failed: %w", metadata.ErrUnavailable))
			return
		}
		done(sm.inner.RangeScan(context.Background(), min, max, limit))
	})
}

func (p *simProc) random() uint64 { return p.w.rng.Uint64() }

// ---- The simulated metadata store ----

// simMeta is the metadata cluster of a simulation: memstore's semantics
// (per-key versions, independent batch ops) with injected failures and lost
// responses on every call. Synchronous calls (the blocking paths) apply at
// once; the commit rounds go through simProc.batch.
type simMeta struct {
	w     *simWorld
	inner *memstore.Store
	// onHeadWrite is called after every applied head write (invariant
	// checks that need the store's history).
	onHeadWrite func(key string)
	// oracle sees every applied write (sim_oracle_test.go).
	oracle *simOracle
}

var _ metadata.Store = (*simMeta)(nil)

func newSimMeta(w *simWorld) *simMeta {
	return &simMeta{w: w, inner: memstore.New(), oracle: newSimOracle()}
}

func (s *simMeta) unavailable(what string) error {
	return fmt.Errorf("sim: %s: %w", what, metadata.ErrUnavailable)
}

func (s *simMeta) afterWrite(ops []metadata.Op, res []metadata.Result, err error) {
	s.oracle.observeOps(ops, res, err)
	if s.onHeadWrite == nil || err != nil {
		return
	}
	for i, op := range ops {
		if op.Kind == metadata.OpPut && res[i].Err == nil && strings.HasPrefix(op.Key, headKeyPrefix) {
			s.onHeadWrite(op.Key)
		}
	}
}

func (s *simMeta) Get(ctx context.Context, key string) (metadata.Record, error) {
	if s.w.chance(s.w.faults.metaFail) {
		return metadata.Record{}, s.unavailable("get")
	}
	return s.inner.Get(ctx, key)
}

func (s *simMeta) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	if s.w.chance(s.w.faults.metaFail) {
		return 0, s.unavailable("put")
	}
	v, err := s.inner.Put(ctx, key, value, expected)
	if err == nil {
		s.oracle.observe(key, value)
	}
	if err == nil && s.onHeadWrite != nil && strings.HasPrefix(key, headKeyPrefix) {
		s.onHeadWrite(key)
	}
	if s.w.chance(s.w.faults.metaLoss) {
		return 0, s.unavailable("put response")
	}
	return v, err
}

func (s *simMeta) PutEphemeral(ctx context.Context, key string, value []byte, expected metadata.Version, session metadata.SessionID) (metadata.Version, error) {
	return 0, fmt.Errorf("sim: ephemeral records are not simulated: %w", metadata.ErrInvalidArgument)
}

func (s *simMeta) Delete(ctx context.Context, key string, expected metadata.Version) error {
	if s.w.chance(s.w.faults.metaFail) {
		return s.unavailable("delete")
	}
	err := s.inner.Delete(ctx, key, expected)
	if s.w.chance(s.w.faults.metaLoss) {
		return s.unavailable("delete response")
	}
	return err
}

func (s *simMeta) RangeScan(ctx context.Context, min, max string, limit int) ([]metadata.Record, error) {
	if s.w.chance(s.w.faults.metaFail) {
		return nil, s.unavailable("scan")
	}
	return s.inner.RangeScan(ctx, min, max, limit)
}

func (s *simMeta) Batch(ctx context.Context, ops []metadata.Op) ([]metadata.Result, error) {
	if s.w.chance(s.w.faults.metaFail) {
		return nil, s.unavailable("batch")
	}
	res, err := s.inner.Batch(ctx, ops)
	s.afterWrite(ops, res, err)
	if s.w.chance(s.w.faults.metaLoss) {
		return nil, s.unavailable("batch response")
	}
	return res, err
}

func (s *simMeta) NewSession(ctx context.Context, ttl time.Duration) (metadata.Session, error) {
	return nil, fmt.Errorf("sim: sessions are not simulated: %w", metadata.ErrInvalidArgument)
}

// Watch returns a channel that is already closed: simulated readers never
// long-poll, and an open watch would need a goroutine.
func (s *simMeta) Watch(ctx context.Context, prefix string) (<-chan metadata.Event, error) {
	ch := make(chan metadata.Event)
	close(ch)
	return ch, nil
}

func (s *simMeta) Close() error { return nil }
