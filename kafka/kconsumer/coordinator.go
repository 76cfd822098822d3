package kconsumer

import (
	"context"
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
	Now  func() time.Time
}

// Coordinator holds this broker's consumer groups. Every operation on a
// group runs under that group's lock; the map lock is never held with it.
type Coordinator struct {
	cfg    Config
	topics TopicSource

	mu     sync.Mutex
	groups map[string]*entry
	stop   chan struct{}
	done   chan struct{}
}

type entry struct {
	mu sync.Mutex
	g  *Group
}

// New returns a coordinator and starts its session-expiry loop.
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
	c := &Coordinator{cfg: cfg, topics: topics, groups: map[string]*entry{}, stop: make(chan struct{}), done: make(chan struct{})}
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
			es := make([]*entry, 0, len(c.groups))
			for _, e := range c.groups {
				es = append(es, e)
			}
			c.mu.Unlock()
			now := c.cfg.Now()
			for _, e := range es {
				e.mu.Lock()
				e.g.Expire(now, c.cfg.SessionTimeout)
				e.mu.Unlock()
			}
		}
	}
}

func (c *Coordinator) entry(id string, create bool) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.groups[id]
	if e == nil && create {
		e = &entry{g: NewGroup(id)}
		c.groups[id] = e
	}
	return e
}

// Heartbeat handles one ConsumerGroupHeartbeat.
func (c *Coordinator) Heartbeat(ctx context.Context, group string, hb Heartbeat) Answer {
	if !c.cfg.Owns(group) {
		return Answer{Code: kerr.NotCoordinator.Code, Message: "another broker coordinates group " + group}
	}
	e := c.entry(group, true)
	e.mu.Lock()
	defer e.mu.Unlock()
	resolve := func(names []string, regex string) ([]Topic, error) {
		return c.topics.Topics(ctx, names, regex)
	}
	return e.g.Handle(hb, c.cfg.Now(), Limits{SessionTimeout: c.cfg.SessionTimeout, DefaultAssignor: c.cfg.DefaultAssignor}, resolve)
}

// Exists reports whether the group is a consumer group with members.
func (c *Coordinator) Exists(group string) bool {
	e := c.entry(group, false)
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.g.Empty()
}

// CheckCommit validates an offset commit or fetch of a member. ok is false
// when the group is not a consumer group with members (the caller applies
// the classic rules).
func (c *Coordinator) CheckCommit(group, member string, epoch int32) (code int16, ok bool) {
	e := c.entry(group, false)
	if e == nil {
		return 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.g.Empty() {
		return 0, false
	}
	return e.g.CheckCommit(member, epoch), true
}

// Describe returns a copy of the group (ok false if unknown or empty and
// never used).
func (c *Coordinator) Describe(group string) (Group, bool) {
	e := c.entry(group, false)
	if e == nil {
		return Group{}, false
	}
	e.mu.Lock()
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
	es := make([]*entry, 0, len(c.groups))
	for _, e := range c.groups {
		es = append(es, e)
	}
	c.mu.Unlock()
	out := make([]Summary, 0, len(es))
	for _, e := range es {
		e.mu.Lock()
		out = append(out, Summary{ID: e.g.ID, State: e.g.StateName()})
		e.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Reconcile forgets the groups this broker no longer coordinates (after a
// cluster change). Their members get NOT_COORDINATOR on their next
// heartbeat, find the new coordinator and rejoin there (the group state
// is not carried over; committed offsets are in the metadata store).
func (c *Coordinator) Reconcile() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.groups {
		if !c.cfg.Owns(id) {
			delete(c.groups, id)
		}
	}
}

// Delete forgets an empty group; false if it has members.
func (c *Coordinator) Delete(group string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.groups[group]
	if e == nil {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.g.Empty() {
		return false
	}
	delete(c.groups, group)
	return true
}
