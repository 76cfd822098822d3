package kgroup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Store persists group snapshots so that a group survives its
// coordinator: a new coordinator (after a failover or an ownership move)
// loads the group and resumes it. Versions are opaque tokens for
// compare-and-set; 0 means "absent".
type Store interface {
	// LoadGroup returns the group's snapshot (MarshalSnapshot bytes) and
	// version; found is false when none is stored.
	LoadGroup(ctx context.Context, id string) (snap []byte, version int64, found bool, err error)
	// SaveGroup stores snap if the stored version is still expected (0:
	// absent) and returns the new version. A lost compare-and-set must
	// return an error matching ErrStale: another coordinator wrote the
	// group since, and this one must give it up.
	SaveGroup(ctx context.Context, id string, snap []byte, expected int64) (int64, error)
	// DeleteGroup removes the stored snapshot (absent is not an error).
	DeleteGroup(ctx context.Context, id string) error
}

// ErrStale (from Store.SaveGroup) means another coordinator wrote the
// group since this one loaded it.
var ErrStale = errors.New("kgroup: group written by another coordinator")

// ErrNotCoordinator: this broker is not the group's coordinator (Config.Owns
// said so, or another coordinator took the group over). Answer
// NOT_COORDINATOR; the client looks the coordinator up again.
var ErrNotCoordinator = errors.New("kgroup: this broker is not the group's coordinator")

// Coordinator drives the Group state machines of one broker: it owns the
// clock and a timer per group, serialises every operation on a group
// behind that group's mutex, and — through the optional Store — loads a
// group when it first sees it and persists every settled state (Stable with
// its assignment, Empty). Groups it no longer owns (Config.Owns) are evicted
// by Reconcile. Lock order: Coordinator.mu and entry.mu are never held
// together (the map lock is released before a group lock is taken).
type Coordinator struct {
	limits Limits
	now    func() time.Time
	store  Store
	owns   func(id string) bool
	log    *slog.Logger

	mu     sync.Mutex
	groups map[string]*entry
	closed bool
}

type entry struct {
	// loaded is closed once the group's stored state (if any) is known;
	// loadErr is set (and the entry removed) when loading failed.
	loaded  chan struct{}
	loadErr error

	mu    sync.Mutex
	g     *Group // nil: no such group (not stored, not created)
	timer *time.Timer
	// version is the stored snapshot's version (0: none); persisted
	// describes what it holds.
	version   int64
	persisted persistKey
	evicted   bool
}

// Config configures a Coordinator.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound member session
	// timeouts (defaults 6s and 30m, Kafka's group.min/max.session.timeout.ms).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// Store persists groups (nil: groups live in memory only).
	Store Store
	// Owns reports whether this broker coordinates a group (nil: all).
	Owns func(id string) bool
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// NewCoordinator returns an empty coordinator.
func NewCoordinator(cfg Config) *Coordinator {
	if cfg.MinSessionTimeout <= 0 {
		cfg.MinSessionTimeout = 6 * time.Second
	}
	if cfg.MaxSessionTimeout <= 0 {
		cfg.MaxSessionTimeout = 30 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Coordinator{
		limits: Limits{MinSessionTimeout: cfg.MinSessionTimeout, MaxSessionTimeout: cfg.MaxSessionTimeout},
		now:    cfg.Now,
		store:  cfg.Store,
		owns:   cfg.Owns,
		log:    cfg.Logger,
		groups: map[string]*entry{},
	}
}

// storeTimeout bounds one load or save of a group.
const storeTimeout = 10 * time.Second

// Owns reports whether this broker coordinates group id.
func (c *Coordinator) Owns(id string) bool { return c.owns == nil || c.owns(id) }

// Do runs fn on the group under its lock, then persists the group if it
// settled into a new state and re-arms its timer. The group is loaded from
// the Store the first time this coordinator sees it; without a stored
// state it is created Empty if create is set, else fn receives nil.
//
// It returns ErrNotCoordinator (fn not called) when this broker does not
// coordinate the group, and a load error (fn not called) when the stored
// state could not be read; answer COORDINATOR_NOT_AVAILABLE then.
func (c *Coordinator) Do(id string, create bool, fn func(g *Group, now time.Time)) error {
	for attempt := 0; ; attempt++ {
		if !c.Owns(id) {
			c.evict(id)
			return ErrNotCoordinator
		}
		e, err := c.entry(id)
		if err != nil {
			return err
		}
		if e == nil { // closed
			fn(nil, c.now())
			return nil
		}
		e.mu.Lock()
		if e.evicted || (e.g != nil && e.g.state == Dead) {
			// Evicted or deleted while we waited for its lock; the next
			// lookup finds (or loads) the current group.
			e.mu.Unlock()
			if attempt < 3 {
				continue
			}
			return ErrNotCoordinator
		}
		if e.g == nil && create {
			e.g = NewGroup(id, c.limits)
		}
		fn(e.g, c.now())
		c.persistLocked(id, e)
		c.arm(id, e)
		e.mu.Unlock()
		return nil
	}
}

// entry returns the group's entry, loading its stored state once.
func (c *Coordinator) entry(id string) (*entry, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, nil
	}
	e, ok := c.groups[id]
	if !ok {
		e = &entry{loaded: make(chan struct{})}
		c.groups[id] = e
		c.mu.Unlock()
		e.loadErr = c.load(id, e)
		if e.loadErr != nil {
			c.mu.Lock()
			if c.groups[id] == e {
				delete(c.groups, id)
			}
			c.mu.Unlock()
		}
		close(e.loaded)
	} else {
		c.mu.Unlock()
	}
	<-e.loaded
	return e, e.loadErr
}

// load reads the stored group and claims it: writing the snapshot back
// under this coordinator makes a stale previous coordinator's next save
// fail (ErrStale) instead of overwriting what we resume from.
func (c *Coordinator) load(id string, e *entry) error {
	if c.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	for attempt := 0; attempt < 3; attempt++ {
		raw, v, found, err := c.store.LoadGroup(ctx, id)
		if err != nil {
			return err
		}
		if !found {
			return nil
		}
		snap, err := UnmarshalSnapshot(raw)
		if err != nil {
			return err
		}
		g, err := Restore(snap, c.limits, c.now())
		if err != nil {
			return err
		}
		nv, err := c.store.SaveGroup(ctx, id, raw, v)
		if errors.Is(err, ErrStale) {
			continue // written meanwhile: read again
		}
		if err != nil {
			return err
		}
		e.g, e.version, e.persisted = g, nv, g.persistKey()
		c.log.Info("kafka group resumed from its stored state", "group", id, "generation", g.generation,
			"state", g.state.String(), "members", len(g.members))
		return nil
	}
	return ErrStale
}

// persistLocked stores the group if it settled into a state not stored
// yet. Caller holds e.mu. A lost compare-and-set evicts the group: another
// coordinator owns it now.
func (c *Coordinator) persistLocked(id string, e *entry) {
	if c.store == nil || e.g == nil || e.g.state == Dead || !e.g.Settled() {
		return
	}
	key := e.g.persistKey()
	if e.version != 0 && key == e.persisted {
		return
	}
	raw, err := MarshalSnapshot(e.g.Snapshot())
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	v, err := c.store.SaveGroup(ctx, id, raw, e.version)
	switch {
	case err == nil:
		e.version, e.persisted = v, key
	case errors.Is(err, ErrStale):
		c.log.Warn("kafka group written by another coordinator; giving it up", "group", id)
		c.evictLocked(id, e)
	default:
		// Kept in memory; the next change (or timer tick) tries again.
		c.log.Warn("kafka group state not persisted", "group", id, "err", err)
	}
}

// arm (re)schedules the group's timer at its next deadline. Caller holds e.mu.
func (c *Coordinator) arm(id string, e *entry) {
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if e.g == nil || e.g.state == Dead || e.evicted {
		return
	}
	next := e.g.NextDeadline()
	if next.IsZero() {
		return
	}
	d := max(next.Sub(c.now()), 0)
	e.timer = time.AfterFunc(d, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.evicted || e.g == nil {
			return
		}
		e.g.Tick(c.now())
		c.persistLocked(id, e)
		c.arm(id, e)
	})
}

// NewMemberID returns a fresh member id in Kafka's "clientid-uuid" shape.
func NewMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return clientID + "-" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Delete removes the group (and its stored state) if it has no members,
// returning false if it has members (NON_EMPTY_GROUP). It returns
// ErrNotCoordinator when another broker coordinates the group.
func (c *Coordinator) Delete(id string) (bool, error) {
	if !c.Owns(id) {
		return false, ErrNotCoordinator
	}
	e, err := c.entry(id)
	if err != nil || e == nil {
		return false, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.g != nil && e.g.NumMembers() > 0 {
		return false, nil
	}
	if c.store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := c.store.DeleteGroup(ctx, id)
		cancel()
		if err != nil {
			return false, err
		}
	}
	if e.g != nil {
		e.g.Kill(c.now())
	}
	c.arm(id, e)
	c.mu.Lock()
	if c.groups[id] == e {
		delete(c.groups, id)
	}
	c.mu.Unlock()
	return true, nil
}

// Summary is one group as ListGroups reports it.
type Summary struct {
	ID           string
	ProtocolType string
	State        State
}

// List returns every group in memory that this broker coordinates, sorted
// by id.
func (c *Coordinator) List() []Summary {
	c.mu.Lock()
	es := make(map[string]*entry, len(c.groups))
	for id, e := range c.groups {
		es[id] = e
	}
	c.mu.Unlock()
	out := make([]Summary, 0, len(es))
	for id, e := range es {
		if !c.Owns(id) {
			continue
		}
		select {
		case <-e.loaded:
		default:
			continue // still loading
		}
		e.mu.Lock()
		if e.g != nil && e.g.state != Dead && !e.evicted {
			out = append(out, Summary{ID: e.g.ID, ProtocolType: e.g.protocolType, State: e.g.state})
		}
		e.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Reconcile evicts every group this broker no longer coordinates: its
// waiters are answered NOT_COORDINATOR and its in-memory state dropped
// (the last settled state is stored; the new coordinator resumes it). Call
// it when ownership changes.
func (c *Coordinator) Reconcile() {
	c.mu.Lock()
	var ids []string
	for id := range c.groups {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		if !c.Owns(id) {
			c.evict(id)
		}
	}
}

func (c *Coordinator) evict(id string) {
	c.mu.Lock()
	e, ok := c.groups[id]
	c.mu.Unlock()
	if !ok {
		return
	}
	select {
	case <-e.loaded:
	default:
		return // a load in progress re-checks ownership in Do
	}
	e.mu.Lock()
	c.evictLocked(id, e)
	e.mu.Unlock()
}

// evictLocked drops the group from memory. Caller holds e.mu.
func (c *Coordinator) evictLocked(id string, e *entry) {
	if e.evicted {
		return
	}
	e.evicted = true
	if e.g != nil {
		e.g.killWith(kerr.NotCoordinator.Code)
	}
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	c.mu.Lock()
	if c.groups[id] == e {
		delete(c.groups, id)
	}
	c.mu.Unlock()
}

// Close kills every group (waiters are answered with
// COORDINATOR_NOT_AVAILABLE so clients rediscover) and stops the timers.
// Stored states are kept.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	es := c.groups
	c.groups = map[string]*entry{}
	c.mu.Unlock()
	for _, e := range es {
		select {
		case <-e.loaded:
		default:
			continue
		}
		e.mu.Lock()
		e.evicted = true
		if e.g != nil {
			e.g.Kill(c.now())
		}
		if e.timer != nil {
			e.timer.Stop()
		}
		e.mu.Unlock()
	}
}
