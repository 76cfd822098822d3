// Package faultstore wraps any metadata.Store and injects seeded,
// deterministic faults per operation kind and key prefix: added latency,
// failures that did not apply, and "applied but the response was lost"
// (the write lands; the caller gets an error classified Unknown), for single
// calls and for whole Batch round trips. It counts what it did.
//
// It owns only the decision of which call to fault. It must never change
// what the wrapped store stores, never fault a call it was not told to, and
// never return an error for a lost response that classifies as anything but
// metadata.Unknown: tests use it to prove that callers resolve unknown
// outcomes by re-reading.
//
// Determinism: whether a call is faulted is a pure function of the seed, the
// rule, the call kind, the key, and how many calls of that kind on that key
// the rule has seen, so a single-threaded test replays exactly, and
// concurrent tests replay exactly as long as each key is used by one
// goroutine at a time. Rule.Skip and Rule.Limit count calls across keys, so
// they are deterministic only in single-threaded use.
//
// Tests only.
package faultstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// Kind is a set of call kinds a rule applies to.
type Kind uint16

// Call kinds. Put covers PutEphemeral; Batch is a whole Batch round trip.
const (
	Get Kind = 1 << iota
	Put
	Delete
	RangeScan
	Batch
	NewSession
	Watch

	// AllKinds matches every call kind.
	AllKinds = Get | Put | Delete | RangeScan | Batch | NewSession | Watch
	// Writes matches the mutating single calls and Batch.
	Writes = Put | Delete | Batch
)

var kindNames = []string{"get", "put", "delete", "rangescan", "batch", "newsession", "watch"}

func (k Kind) String() string {
	var parts []string
	for i, n := range kindNames {
		if k&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// Errors returned for injected faults. Both wrap metadata.ErrUnavailable, so
// metadata.Classify says Unknown, as a real timeout would: the caller cannot
// tell them apart and must re-read. Tests can (errors.Is).
var (
	// ErrInjected: the call was not forwarded; nothing was applied.
	ErrInjected = fmt.Errorf("%w (faultstore: injected failure, not applied)", metadata.ErrUnavailable)
	// ErrResponseLost: the call was forwarded and applied; its response was
	// dropped.
	ErrResponseLost = fmt.Errorf("%w (faultstore: applied, response lost)", metadata.ErrUnavailable)
)

// Rule says which calls to fault and how. Zero fields mean "no such fault".
type Rule struct {
	// Kinds the rule applies to (0: AllKinds).
	Kinds Kind
	// Prefix restricts the rule to keys with this prefix: the key of
	// Get/Put/Delete, the min bound of RangeScan, any op key of a Batch, the
	// prefix of a Watch. NewSession has no key and matches only "".
	Prefix string
	// Latency is added before the call is forwarded, plus a uniform extra
	// in [0, Jitter).
	Latency, Jitter time.Duration
	// FailRate is the probability that the call is not forwarded and
	// returns Err.
	FailRate float64
	// Err is returned by failed calls (nil: ErrInjected). A test can set a
	// definite error (e.g. one wrapping metadata.ErrClosed) to model a
	// refusal the caller can classify as NotApplied.
	Err error
	// LoseRate is the probability that a call that was not failed is
	// forwarded and then answered with ErrResponseLost.
	LoseRate float64
	// Skip leaves the first Skip matching calls unfaulted.
	Skip int
	// Limit caps how many calls this rule faults (fails or loses); 0: no cap.
	// Skip 3, Limit 1, LoseRate 1 loses exactly the 4th matching call.
	Limit int
}

// Config is a wrapper's initial setup.
type Config struct {
	Seed  uint64
	Rules []Rule
}

// Counters for one call kind.
type Counters struct {
	Calls   int64 // calls seen
	Delayed int64 // calls that got added latency
	Failed  int64 // calls failed without forwarding
	Lost    int64 // calls forwarded whose response was dropped
}

type ruleState struct {
	Rule
	matched int
	faulted int
	perKey  map[string]uint64
}

// Store is the fault-injecting wrapper.
type Store struct {
	inner metadata.Store
	seed  uint64

	mu    sync.Mutex
	rules []*ruleState
	stats map[Kind]*Counters
}

var _ metadata.Store = (*Store)(nil)

// Wrap returns inner behind fault rules. With no rules it forwards every
// call unchanged.
func Wrap(inner metadata.Store, cfg Config) *Store {
	s := &Store{inner: inner, seed: cfg.Seed, stats: map[Kind]*Counters{}}
	s.SetRules(cfg.Rules...)
	return s
}

// Inner returns the wrapped store (to read the truth behind a lost
// response, or to run faults-free checks).
func (s *Store) Inner() metadata.Store { return s.inner }

// SetRules replaces the rules (their Skip/Limit counts restart).
func (s *Store) SetRules(rules ...Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = s.rules[:0]
	for _, r := range rules {
		if r.Kinds == 0 {
			r.Kinds = AllKinds
		}
		s.rules = append(s.rules, &ruleState{Rule: r, perKey: map[string]uint64{}})
	}
}

// Stats returns a copy of the counters per call kind.
func (s *Store) Stats() map[Kind]Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Kind]Counters, len(s.stats))
	for k, c := range s.stats {
		out[k] = *c
	}
	return out
}

// fate is the decision for one call.
type fate struct {
	delay time.Duration
	fail  error
	lose  bool
}

// uniform maps (seed, rule, kind, key, n, salt) to [0, 1).
func (s *Store) uniform(rule int, kind Kind, key string, n uint64, salt byte) float64 {
	h := fnv.New64a()
	var b [8 + 8 + 2 + 8 + 1]byte
	put := func(off int, v uint64) {
		for i := range 8 {
			b[off+i] = byte(v >> (8 * i))
		}
	}
	put(0, s.seed)
	put(8, uint64(rule))
	b[16], b[17] = byte(kind), byte(kind>>8)
	put(18, n)
	b[26] = salt
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(key))
	// splitmix64 finaliser spreads fnv's weak low bits.
	z := h.Sum64() + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / float64(1<<53)
}

// decide draws the fate of one call of kind on keys (keys[0] names the
// call for determinism; a Batch matches on any of its keys).
func (s *Store) decide(kind Kind, keys ...string) fate {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.stats[kind]
	if c == nil {
		c = &Counters{}
		s.stats[kind] = c
	}
	c.Calls++
	var f fate
	name := ""
	if len(keys) > 0 {
		name = keys[0]
	}
	for i, r := range s.rules {
		if r.Kinds&kind == 0 || !matchAny(r.Prefix, keys) {
			continue
		}
		n := r.perKey[name]
		r.perKey[name] = n + 1
		r.matched++
		if r.Latency > 0 || r.Jitter > 0 {
			d := r.Latency
			if r.Jitter > 0 {
				d += time.Duration(s.uniform(i, kind, name, n, 'j') * float64(r.Jitter))
			}
			f.delay += d
		}
		if f.fail != nil || f.lose || r.matched <= r.Skip || (r.Limit > 0 && r.faulted >= r.Limit) {
			continue
		}
		switch {
		case r.FailRate > 0 && s.uniform(i, kind, name, n, 'f') < r.FailRate:
			f.fail = r.Err
			if f.fail == nil {
				f.fail = ErrInjected
			}
			r.faulted++
		case r.LoseRate > 0 && s.uniform(i, kind, name, n, 'l') < r.LoseRate:
			f.lose = true
			r.faulted++
		}
	}
	if f.delay > 0 {
		c.Delayed++
	}
	if f.fail != nil {
		c.Failed++
	}
	if f.lose {
		c.Lost++
	}
	return f
}

func matchAny(prefix string, keys []string) bool {
	if prefix == "" {
		return true
	}
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// before applies latency and failure; a non-nil error means "do not
// forward".
func (f fate) before(ctx context.Context) error {
	if f.delay > 0 {
		t := time.NewTimer(f.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return f.fail
}

// Get implements metadata.Store.
func (s *Store) Get(ctx context.Context, key string) (metadata.Record, error) {
	f := s.decide(Get, key)
	if err := f.before(ctx); err != nil {
		return metadata.Record{}, err
	}
	r, err := s.inner.Get(ctx, key)
	if f.lose {
		return metadata.Record{}, ErrResponseLost
	}
	return r, err
}

// Put implements metadata.Store.
func (s *Store) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	f := s.decide(Put, key)
	if err := f.before(ctx); err != nil {
		return 0, err
	}
	v, err := s.inner.Put(ctx, key, value, expected)
	if f.lose {
		return 0, ErrResponseLost
	}
	return v, err
}

// PutEphemeral implements metadata.Store (kind Put).
func (s *Store) PutEphemeral(ctx context.Context, key string, value []byte, expected metadata.Version, session metadata.SessionID) (metadata.Version, error) {
	f := s.decide(Put, key)
	if err := f.before(ctx); err != nil {
		return 0, err
	}
	v, err := s.inner.PutEphemeral(ctx, key, value, expected, session)
	if f.lose {
		return 0, ErrResponseLost
	}
	return v, err
}

// Delete implements metadata.Store.
func (s *Store) Delete(ctx context.Context, key string, expected metadata.Version) error {
	f := s.decide(Delete, key)
	if err := f.before(ctx); err != nil {
		return err
	}
	err := s.inner.Delete(ctx, key, expected)
	if f.lose {
		return ErrResponseLost
	}
	return err
}

// RangeScan implements metadata.Store.
func (s *Store) RangeScan(ctx context.Context, min, max string, limit int) ([]metadata.Record, error) {
	f := s.decide(RangeScan, min)
	if err := f.before(ctx); err != nil {
		return nil, err
	}
	recs, err := s.inner.RangeScan(ctx, min, max, limit)
	if f.lose {
		return nil, ErrResponseLost
	}
	return recs, err
}

// Batch implements metadata.Store. A fault hits the whole round trip: a
// failed Batch applied none of its ops, a lost one applied all that the
// wrapped store applied.
func (s *Store) Batch(ctx context.Context, ops []metadata.Op) ([]metadata.Result, error) {
	keys := make([]string, len(ops))
	for i, op := range ops {
		keys[i] = op.Key
	}
	f := s.decide(Batch, keys...)
	if err := f.before(ctx); err != nil {
		return nil, err
	}
	res, err := s.inner.Batch(ctx, ops)
	if f.lose {
		return nil, ErrResponseLost
	}
	return res, err
}

// NewSession implements metadata.Store. A lost NewSession leaves a session
// nobody holds; it is closed so its (empty) ephemeral set cannot leak.
func (s *Store) NewSession(ctx context.Context, ttl time.Duration) (metadata.Session, error) {
	f := s.decide(NewSession, "")
	if err := f.before(ctx); err != nil {
		return nil, err
	}
	sess, err := s.inner.NewSession(ctx, ttl)
	if f.lose {
		if err == nil {
			_ = sess.Close(context.WithoutCancel(ctx))
		}
		return nil, ErrResponseLost
	}
	return sess, err
}

// Watch implements metadata.Store. Only latency and failure apply.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan metadata.Event, error) {
	f := s.decide(Watch, prefix)
	if err := f.before(ctx); err != nil {
		return nil, err
	}
	return s.inner.Watch(ctx, prefix)
}

// Close implements metadata.Store; it is never faulted.
func (s *Store) Close() error { return s.inner.Close() }

// StopKeepAlive forwards to the wrapped store's test hook, if it has one.
func (s *Store) StopKeepAlive(id metadata.SessionID) bool {
	if k, ok := s.inner.(interface {
		StopKeepAlive(metadata.SessionID) bool
	}); ok {
		return k.StopKeepAlive(id)
	}
	return false
}
