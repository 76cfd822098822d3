// Package faultstore wraps any objectstore.ObjectStore with seeded,
// deterministic fault injection, for tests. It owns the choice of which
// calls are delayed, which fail cleanly (nothing happened) and which are
// "applied but the response was lost" (the inner call ran, the caller gets an
// error that objectstore.Classify calls Unknown), and it counts what it did.
// It must never be used outside tests, and never report a clean failure for
// a call that reached the inner store.
//
// Faults are described by Rules, matched by operation and key substring
// (e.g. only the manifest key). Whether a matching rule fires is a pure
// function of (seed, rule index, operation, key, how many times that rule
// has matched that operation on that key), so a run is reproducible from its
// seed regardless of how goroutines working on different keys interleave.
// (Concurrent calls on the same key still race for their attempt numbers.)
package faultstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Op names an ObjectStore method.
type Op uint8

// Operations, one per ObjectStore method.
const (
	OpGet Op = iota
	OpGetRange
	OpHead
	OpPut
	OpDelete
	OpList
	numOps
)

func (o Op) String() string {
	return [...]string{"get", "get-range", "head", "put", "delete", "list"}[o]
}

// Kind is what a rule does when it fires.
type Kind uint8

const (
	// Latency delays the call by a duration in [Latency, MaxLatency] and
	// then lets it (and later rules) proceed.
	Latency Kind = iota
	// FailClean returns an error without calling the inner store: nothing
	// happened. The error wraps ErrInjected and Rule.CleanErr.
	FailClean
	// LoseResponse calls the inner store, then discards its result and
	// returns an error wrapping ErrInjected and ErrResponseLost and no
	// objectstore sentinel, so Classify says Unknown: for a mutation the
	// write may well have landed (it did, if the inner call succeeded).
	LoseResponse
)

func (k Kind) String() string {
	return [...]string{"latency", "fail-clean", "lose-response"}[k]
}

var (
	// ErrInjected marks every error this package makes up.
	ErrInjected = errors.New("faultstore: injected fault")
	// ErrResponseLost marks a LoseResponse fault: the call reached the inner
	// store, the answer did not reach the caller.
	ErrResponseLost = errors.New("faultstore: response lost (outcome unknown)")
)

// Rule is one fault source.
type Rule struct {
	// Ops limits the rule to these operations; empty means all.
	Ops []Op
	// KeySubstring limits the rule to keys containing it (for List, the
	// prefix); empty means all keys.
	KeySubstring string
	// Probability that a matching call fires the rule, in [0, 1].
	Probability float64
	// Kind is what happens when it fires.
	Kind Kind
	// Latency and MaxLatency bound the delay of a Latency rule (MaxLatency
	// <= Latency means exactly Latency).
	Latency, MaxLatency time.Duration
	// CleanErr is what a FailClean fault wraps besides ErrInjected (default
	// objectstore.ErrConflict: not applied, retry with backoff). Set it to a
	// non-sentinel error to simulate a request that failed before reaching
	// the store but is reported as unknown, as a transport error would be.
	CleanErr error
	// Limit caps how often the rule fires in total (0: unlimited).
	Limit int
}

func (r Rule) matches(op Op, key string) bool {
	if len(r.Ops) > 0 {
		found := false
		for _, o := range r.Ops {
			found = found || o == op
		}
		if !found {
			return false
		}
	}
	return strings.Contains(key, r.KeySubstring)
}

// Config configures a Store.
type Config struct {
	// Seed makes every decision reproducible.
	Seed uint64
	// Rules are evaluated in order for every call: each Latency rule that
	// fires adds its delay; the first FailClean or LoseResponse rule that
	// fires decides the call's fate and stops evaluation.
	Rules []Rule
}

// Counts is what happened to the calls of one operation.
type Counts struct {
	// Calls made to the wrapper.
	Calls int64
	// Delayed calls (at least one Latency rule fired).
	Delayed int64
	// FailedClean: calls answered with a clean failure, inner never called.
	FailedClean int64
	// LostResponses: calls that ran on the inner store but whose result was
	// replaced by an unknown-outcome error.
	LostResponses int64
	// LostResponsesApplied: of LostResponses, those whose inner call
	// succeeded (for a mutation: the write landed).
	LostResponsesApplied int64
}

func (c *Counts) add(o Counts) {
	c.Calls += o.Calls
	c.Delayed += o.Delayed
	c.FailedClean += o.FailedClean
	c.LostResponses += o.LostResponses
	c.LostResponsesApplied += o.LostResponsesApplied
}

type counters struct {
	calls, delayed, failedClean, lost, lostApplied atomic.Int64
}

// Store is the fault-injecting wrapper. Safe for concurrent use.
type Store struct {
	inner   objectstore.ObjectStore
	seed    uint64
	rules   []Rule
	enabled atomic.Bool

	mu       sync.Mutex
	attempts map[attemptKey]uint64 // per (rule, op, key) match count
	fired    []int                 // per rule, for Limit

	counts [numOps]counters
}

type attemptKey struct {
	rule int
	op   Op
	key  string
}

var _ objectstore.ObjectStore = (*Store)(nil)

// New wraps inner. Faults are enabled.
func New(inner objectstore.ObjectStore, cfg Config) *Store {
	s := &Store{
		inner:    inner,
		seed:     cfg.Seed,
		rules:    append([]Rule(nil), cfg.Rules...),
		attempts: make(map[attemptKey]uint64),
		fired:    make([]int, len(cfg.Rules)),
	}
	s.enabled.Store(true)
	return s
}

// SetEnabled turns fault injection on or off (e.g. to heal the store for a
// recovery phase). Counting of calls continues either way.
func (s *Store) SetEnabled(on bool) { s.enabled.Store(on) }

// Inner returns the wrapped store (to inspect ground truth in tests).
func (s *Store) Inner() objectstore.ObjectStore { return s.inner }

// Counts returns what happened to calls of op so far.
func (s *Store) Counts(op Op) Counts {
	c := &s.counts[op]
	return Counts{Calls: c.calls.Load(), Delayed: c.delayed.Load(), FailedClean: c.failedClean.Load(),
		LostResponses: c.lost.Load(), LostResponsesApplied: c.lostApplied.Load()}
}

// Total sums Counts over all operations.
func (s *Store) Total() Counts {
	var t Counts
	for op := range numOps {
		t.add(s.Counts(op))
	}
	return t
}

// splitmix64 is a fast, well-mixed 64-bit permutation.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// draw returns a uniform value in [0, 1) for the n-th match of rule on
// (op, key), plus 64 more bits for choosing a latency.
func (s *Store) draw(rule int, op Op, key string, n uint64) (float64, uint64) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	x := splitmix64(s.seed ^ splitmix64(uint64(rule)<<8|uint64(op)) ^ splitmix64(h.Sum64()) ^ splitmix64(n*0x2545f4914f6cdd1d))
	y := splitmix64(x)
	return float64(x>>11) / (1 << 53), y
}

// decision is the plan for one call.
type decision struct {
	delay time.Duration
	fail  *Rule // FailClean or LoseResponse rule that fired, or nil
}

func (s *Store) decide(op Op, key string) decision {
	var d decision
	if !s.enabled.Load() {
		return d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.rules {
		r := &s.rules[i]
		if !r.matches(op, key) {
			continue
		}
		ak := attemptKey{rule: i, op: op, key: key}
		n := s.attempts[ak]
		s.attempts[ak] = n + 1
		if r.Limit > 0 && s.fired[i] >= r.Limit {
			continue
		}
		p, bits := s.draw(i, op, key, n)
		if p >= r.Probability {
			continue
		}
		s.fired[i]++
		if r.Kind == Latency {
			lat := r.Latency
			if r.MaxLatency > r.Latency {
				lat += time.Duration(bits % uint64(r.MaxLatency-r.Latency+1))
			}
			d.delay += lat
			continue
		}
		d.fail = r
		return d
	}
	return d
}

// before counts the call, applies latency and a clean failure. It returns a
// non-nil error if the call must not reach the inner store, and lose=true if
// the inner result must be replaced by a lost-response error.
func (s *Store) before(ctx context.Context, op Op, key string) (lose bool, err error) {
	c := &s.counts[op]
	c.calls.Add(1)
	d := s.decide(op, key)
	if d.delay > 0 {
		c.delayed.Add(1)
		t := time.NewTimer(d.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		}
	}
	if d.fail == nil {
		return false, nil
	}
	if d.fail.Kind == FailClean {
		c.failedClean.Add(1)
		cause := d.fail.CleanErr
		if cause == nil {
			cause = objectstore.ErrConflict
		}
		return false, fmt.Errorf("%w: %s %q failed cleanly: %w", ErrInjected, op, key, cause)
	}
	return true, nil
}

// lost records a LoseResponse fault and returns its error.
func (s *Store) lost(op Op, key string, innerErr error) error {
	c := &s.counts[op]
	c.lost.Add(1)
	if innerErr == nil {
		c.lostApplied.Add(1)
	}
	return fmt.Errorf("%w: %w: %s %q", ErrInjected, ErrResponseLost, op, key)
}

// Get implements objectstore.ObjectStore.
func (s *Store) Get(ctx context.Context, key string) ([]byte, objectstore.UpdateVersion, error) {
	lose, err := s.before(ctx, OpGet, key)
	if err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	data, v, err := s.inner.Get(ctx, key)
	if lose {
		return nil, objectstore.UpdateVersion{}, s.lost(OpGet, key, err)
	}
	return data, v, err
}

// GetRange implements objectstore.ObjectStore.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	lose, err := s.before(ctx, OpGetRange, key)
	if err != nil {
		return nil, err
	}
	data, err := s.inner.GetRange(ctx, key, offset, length)
	if lose {
		return nil, s.lost(OpGetRange, key, err)
	}
	return data, err
}

// Head implements objectstore.ObjectStore.
func (s *Store) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	lose, err := s.before(ctx, OpHead, key)
	if err != nil {
		return objectstore.ObjectInfo{}, err
	}
	info, err := s.inner.Head(ctx, key)
	if lose {
		return objectstore.ObjectInfo{}, s.lost(OpHead, key, err)
	}
	return info, err
}

// Put implements objectstore.ObjectStore.
func (s *Store) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	lose, err := s.before(ctx, OpPut, key)
	if err != nil {
		return objectstore.UpdateVersion{}, err
	}
	v, err := s.inner.Put(ctx, key, data, opts)
	if lose {
		return objectstore.UpdateVersion{}, s.lost(OpPut, key, err)
	}
	return v, err
}

// Delete implements objectstore.ObjectStore.
func (s *Store) Delete(ctx context.Context, key string, ifVersion *objectstore.UpdateVersion) error {
	lose, err := s.before(ctx, OpDelete, key)
	if err != nil {
		return err
	}
	err = s.inner.Delete(ctx, key, ifVersion)
	if lose {
		return s.lost(OpDelete, key, err)
	}
	return err
}

// List implements objectstore.ObjectStore. Rules match the prefix. A
// LoseResponse fault lets the inner listing run to completion and then
// yields only the error.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[objectstore.ObjectInfo, error] {
	return func(yield func(objectstore.ObjectInfo, error) bool) {
		lose, err := s.before(ctx, OpList, prefix)
		if err != nil {
			yield(objectstore.ObjectInfo{}, err)
			return
		}
		if !lose {
			for info, err := range s.inner.List(ctx, prefix) {
				if !yield(info, err) {
					return
				}
			}
			return
		}
		var innerErr error
		for _, err := range s.inner.List(ctx, prefix) {
			if err != nil {
				innerErr = err
				break
			}
		}
		yield(objectstore.ObjectInfo{}, s.lost(OpList, prefix, innerErr))
	}
}
