package kconsumer

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicSource resolves subscriptions against the topics that exist.
type TopicSource interface {
	// Topics returns the named topics that exist plus every topic whose
	// name the regex (RE2 syntax, as KIP-848 specifies; "" = none) matches.
	Topics(ctx context.Context, names []string, regex string) ([]Topic, error)
}

// Store persists groups (MarshalSnapshot bytes) so that a group survives a
// restart of its coordinator or a move to another broker, as Kafka's
// __consumer_offsets does. Versions are opaque compare-and-set tokens; 0
// means absent.
type Store interface {
	// LoadConsumerGroup returns the group's snapshot and version; found
	// is false when none is stored.
	LoadConsumerGroup(ctx context.Context, id string) (snap []byte, version int64, found bool, err error)
	// SaveConsumerGroup stores snap if the stored version is still
	// expected (0: absent) and returns the new version. A lost
	// compare-and-set returns an error matching ErrStale.
	SaveConsumerGroup(ctx context.Context, id string, snap []byte, expected int64) (int64, error)
	// DeleteConsumerGroup removes the stored group if its version is
	// still expected (absent is not an error; a lost compare-and-set
	// returns an error matching ErrStale).
	DeleteConsumerGroup(ctx context.Context, id string, expected int64) error
	// ListConsumerGroups returns the ids of every stored group.
	ListConsumerGroups(ctx context.Context) ([]string, error)
}

// ErrStale (from Store.SaveConsumerGroup) means another coordinator wrote
// the group since this one loaded it: this one must give the group up.
var ErrStale = errors.New("kconsumer: group written by another coordinator")

// Config configures a Coordinator.
type Config struct {
	// SessionTimeout is how long a member may go without a heartbeat
	// (Kafka's group.consumer.session.timeout.ms, default 45s).
	SessionTimeout time.Duration
	// HeartbeatInterval is what members are told (Kafka's
	// group.consumer.heartbeat.interval.ms, default 5s).
	HeartbeatInterval time.Duration
	// DefaultAssignor when no member names one (default "uniform").
	DefaultAssignor string
	// Owns reports whether this broker coordinates a group (cluster
	// placement; nil: every group). Heartbeats for other groups get
	// NOT_COORDINATOR; Reconcile forgets groups that moved away.
	Owns func(group string) bool
	// Store persists groups (nil: in memory only, lost on restart).
	Store Store
	// Logger (default slog.Default()).
	Logger *slog.Logger
	Now    func() time.Time
}

// storeTimeout bounds one load or save of a group.
const storeTimeout = 10 * time.Second

// Coordinator holds this broker's consumer groups. Every operation on a
// group runs under that group's lock; the map lock is never held with it.
//
// With a Store, a heartbeat is answered only once the state it produced is
// stored (Kafka answers once its records are committed): an answer never
// tells a member an epoch or an assignment that a restart could forget. A
// save that fails puts the group back to its stored state and the member
// is told COORDINATOR_NOT_AVAILABLE (it retries); a lost compare-and-set
// means another coordinator took the group: it is evicted here
// (NOT_COORDINATOR). A coordinator claims a group it loads by writing it
// back, so a previous owner that has not noticed the move fails its next
// save instead of overwriting the state the new one resumed.
type Coordinator struct {
	cfg    Config
	topics TopicSource
	log    *slog.Logger

	mu     sync.Mutex
	groups map[string]*entry
	stop   chan struct{}
	done   chan struct{}
}

type entry struct {
	// loaded is closed once the stored state (if any) is known; loadErr
	// is set (and the entry removed from the map) when loading failed.
	loaded  chan struct{}
	loadErr error

	mu sync.Mutex
	g  *Group
	// version and stored are the stored record's version and bytes (0,
	// nil: none stored).
	version int64
	stored  []byte
	evicted bool
}

// New returns a coordinator and starts its session-expiry loop. With a
// Store, call Load before serving.
func New(topics TopicSource, cfg Config) *Coordinator {
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 45 * time.Second
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 5 * time.Second
	}
	if cfg.DefaultAssignor == "" {
		cfg.DefaultAssignor = "uniform"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Owns == nil {
		cfg.Owns = func(string) bool { return true }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Coordinator{cfg: cfg, topics: topics, log: cfg.Logger, groups: map[string]*entry{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

// HeartbeatInterval is the interval members are told to heartbeat at.
func (c *Coordinator) HeartbeatInterval() time.Duration { return c.cfg.HeartbeatInterval }

// Close stops the expiry loop.
func (c *Coordinator) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

// Load loads every stored group this broker coordinates and does not hold
// yet (at start-up, and after a placement change), so that ListGroups,
// offset commits and session expiry see them before their members'
// first heartbeat.
func (c *Coordinator) Load(ctx context.Context) error {
	if c.cfg.Store == nil {
		return nil
	}
	ids, err := c.cfg.Store.ListConsumerGroups(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !c.cfg.Owns(id) {
			continue
		}
		if _, err := c.entry(ctx, id, true); err != nil {
			return err
		}
	}
	return nil
}

func (c *Coordinator) loop() {
	defer close(c.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.mu.Lock()
			es := make(map[string]*entry, len(c.groups))
			for id, e := range c.groups {
				es[id] = e
			}
			c.mu.Unlock()
			now := c.cfg.Now()
			for id, e := range es {
				select {
				case <-e.loaded:
				default:
					continue // still loading
				}
				e.mu.Lock()
				if e.g != nil && !e.evicted {
					e.g.Expire(now, c.cfg.SessionTimeout)
					// Also retries a save that failed earlier.
					if err := c.persistLocked(id, e); err != nil && !errors.Is(err, ErrStale) {
						c.log.Warn("kafka consumer group state not persisted; will retry", "group", id, "err", err)
					}
				}
				e.mu.Unlock()
			}
		}
	}
}

// entry returns the group's entry once its stored state is loaded. Without
// load it only looks in memory (the read paths: every stored group was
// loaded by Load); with it the group is read from the Store the first time
// this coordinator sees it, or created empty. nil: unknown group.
func (c *Coordinator) entry(ctx context.Context, id string, load bool) (*entry, error) {
	c.mu.Lock()
	e := c.groups[id]
	if e == nil && load {
		e = &entry{loaded: make(chan struct{})}
		c.groups[id] = e
		c.mu.Unlock()
		e.loadErr = c.load(ctx, id, e)
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
	if e == nil {
		return nil, nil
	}
	<-e.loaded
	return e, e.loadErr
}

// load reads the stored group and claims it by writing it back (see
// Coordinator). A group with nothing stored starts empty.
func (c *Coordinator) load(ctx context.Context, id string, e *entry) error {
	if c.cfg.Store == nil {
		e.g = NewGroup(id)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	for attempt := 0; attempt < 3; attempt++ {
		raw, v, found, err := c.cfg.Store.LoadConsumerGroup(ctx, id)
		if err != nil {
			return err
		}
		if !found {
			e.g = NewGroup(id)
			return nil
		}
		snap, err := UnmarshalSnapshot(raw)
		if err != nil {
			return err
		}
		g, err := Restore(snap, c.cfg.Now())
		if err != nil {
			return err
		}
		nv, err := c.cfg.Store.SaveConsumerGroup(ctx, id, raw, v)
		if errors.Is(err, ErrStale) {
			continue // written meanwhile: read again
		}
		if err != nil {
			return err
		}
		e.g, e.version, e.stored = g, nv, raw
		c.log.Info("kafka consumer group resumed from its stored state", "group", id, "epoch", g.Epoch,
			"state", g.StateName(), "members", len(g.Members))
		return nil
	}
	return ErrStale
}

// persistLocked stores the group if its persistent state changed since it
// was last stored. Caller holds e.mu. A lost compare-and-set evicts the
// group (another coordinator holds it) and returns ErrStale.
func (c *Coordinator) persistLocked(id string, e *entry) error {
	if c.cfg.Store == nil {
		return nil
	}
	raw, err := MarshalSnapshot(e.g.Snapshot())
	if err != nil {
		return err
	}
	if e.stored != nil && string(raw) == string(e.stored) {
		return nil
	}
	if e.stored == nil && e.g.Empty() && e.g.Epoch == 0 {
		return nil // never used: nothing worth a record
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	v, err := c.cfg.Store.SaveConsumerGroup(ctx, id, raw, e.version)
	if errors.Is(err, ErrStale) {
		c.log.Warn("kafka consumer group written by another coordinator; giving it up", "group", id)
		c.evictLocked(id, e)
		return err
	}
	if err != nil {
		return err
	}
	e.version, e.stored = v, raw
	return nil
}

// rollbackLocked puts the group back to its stored state (after a save
// failed: the change is forgotten, the member retries). Caller holds e.mu.
func (c *Coordinator) rollbackLocked(id string, e *entry) {
	g := NewGroup(id)
	if e.stored != nil {
		if snap, err := UnmarshalSnapshot(e.stored); err == nil {
			if rg, err := Restore(snap, c.cfg.Now()); err == nil {
				g = rg
			}
		}
	}
	e.g = g
}

// evictLocked drops the group from this coordinator. Caller holds e.mu.
func (c *Coordinator) evictLocked(id string, e *entry) {
	e.evicted = true
	c.mu.Lock()
	if c.groups[id] == e {
		delete(c.groups, id)
	}
	c.mu.Unlock()
}

// Heartbeat handles one ConsumerGroupHeartbeat.
func (c *Coordinator) Heartbeat(ctx context.Context, group string, hb Heartbeat) Answer {
	if !c.cfg.Owns(group) {
		return Answer{Code: kerr.NotCoordinator.Code, Message: "another broker coordinates group " + group}
	}
	for attempt := 0; ; attempt++ {
		e, err := c.entry(ctx, group, true)
		if err != nil {
			c.log.Warn("kafka consumer group state could not be loaded", "group", group, "err", err)
			return Answer{Code: kerr.CoordinatorNotAvailable.Code, Message: "group state could not be loaded"}
		}
		e.mu.Lock()
		if e.evicted {
			// Given up while we waited for its lock; the next lookup
			// loads the current state.
			e.mu.Unlock()
			if attempt < 3 {
				continue
			}
			return Answer{Code: kerr.NotCoordinator.Code, Message: "group moved to another coordinator"}
		}
		resolve := func(names []string, regex string) ([]Topic, error) {
			return c.topics.Topics(ctx, names, regex)
		}
		ans := e.g.Handle(hb, c.cfg.Now(), Limits{SessionTimeout: c.cfg.SessionTimeout, DefaultAssignor: c.cfg.DefaultAssignor}, resolve)
		if err := c.persistLocked(group, e); err != nil {
			if errors.Is(err, ErrStale) {
				e.mu.Unlock()
				return Answer{Code: kerr.NotCoordinator.Code, Message: "group moved to another coordinator"}
			}
			c.rollbackLocked(group, e)
			e.mu.Unlock()
			c.log.Warn("kafka consumer group state not persisted; heartbeat refused", "group", group, "err", err)
			return Answer{Code: kerr.CoordinatorNotAvailable.Code, Message: "group state could not be stored"}
		}
		e.mu.Unlock()
		return ans
	}
}

// held returns the group's entry if this coordinator holds it (loaded,
// not evicted), locked; nil otherwise.
func (c *Coordinator) held(group string) *entry {
	e, err := c.entry(context.Background(), group, false)
	if e == nil || err != nil {
		return nil
	}
	e.mu.Lock()
	if e.evicted || e.g == nil {
		e.mu.Unlock()
		return nil
	}
	return e
}

// Exists reports whether the group is a consumer group with members.
func (c *Coordinator) Exists(group string) bool {
	e := c.held(group)
	if e == nil {
		return false
	}
	defer e.mu.Unlock()
	return !e.g.Empty()
}

// CheckCommit validates an offset commit or fetch of a member. ok is false
// when the group is not a consumer group with members (the caller applies
// the classic rules).
func (c *Coordinator) CheckCommit(group, member string, epoch int32) (code int16, ok bool) {
	e := c.held(group)
	if e == nil {
		return 0, false
	}
	defer e.mu.Unlock()
	if e.g.Empty() {
		return 0, false
	}
	return e.g.CheckCommit(member, epoch), true
}

// Describe returns a copy of the group (ok false if unknown).
func (c *Coordinator) Describe(group string) (Group, bool) {
	e := c.held(group)
	if e == nil {
		return Group{}, false
	}
	defer e.mu.Unlock()
	g := *e.g
	g.Members = make(map[string]*Member, len(e.g.Members))
	for id, m := range e.g.Members {
		mc := *m
		mc.Assigned, mc.Revoking = m.Assigned.clone(), m.Revoking.clone()
		g.Members[id] = &mc
	}
	g.Target = make(map[string]Assignment, len(e.g.Target))
	for id, a := range e.g.Target {
		g.Target[id] = a.clone()
	}
	return g, true
}

// Summary is one group for ListGroups.
type Summary struct {
	ID, State string
}

// List returns every known consumer group, by id.
func (c *Coordinator) List() []Summary {
	c.mu.Lock()
	ids := make([]string, 0, len(c.groups))
	for id := range c.groups {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	out := make([]Summary, 0, len(ids))
	for _, id := range ids {
		if e := c.held(id); e != nil {
			out = append(out, Summary{ID: e.g.ID, State: e.g.StateName()})
			e.mu.Unlock()
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Reconcile follows a placement change: groups this broker no longer
// coordinates are forgotten (their members get NOT_COORDINATOR on their
// next heartbeat and find the new coordinator, which resumes the stored
// group: same epochs, same assignments), and stored groups it now
// coordinates are loaded.
func (c *Coordinator) Reconcile(ctx context.Context) error {
	c.mu.Lock()
	var gone []*entry
	for id, e := range c.groups {
		if !c.cfg.Owns(id) {
			delete(c.groups, id)
			gone = append(gone, e)
		}
	}
	c.mu.Unlock()
	for _, e := range gone {
		<-e.loaded
		e.mu.Lock()
		e.evicted = true
		e.mu.Unlock()
	}
	return c.Load(ctx)
}

// Delete forgets an empty group and its stored state; false if it has
// members.
func (c *Coordinator) Delete(ctx context.Context, group string) (bool, error) {
	e := c.held(group)
	if e == nil {
		return true, nil
	}
	defer e.mu.Unlock()
	if !e.g.Empty() {
		return false, nil
	}
	if c.cfg.Store != nil && e.stored != nil {
		if err := c.cfg.Store.DeleteConsumerGroup(ctx, group, e.version); err != nil {
			if errors.Is(err, ErrStale) {
				c.evictLocked(group, e)
			}
			return false, err
		}
	}
	c.evictLocked(group, e)
	return true, nil
}
