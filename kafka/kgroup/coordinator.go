package kgroup

import (
	"crypto/rand"
	"encoding/hex"
	"sort"
	"sync"
	"time"
)

// Coordinator drives the Group state machines of one broker: it owns the
// clock and a timer per group, and serialises every operation on a group
// behind that group's mutex. Lock order: Coordinator.mu before entry.mu is
// never held together (the map lock is released before a group lock is
// taken).
type Coordinator struct {
	limits Limits
	now    func() time.Time

	mu     sync.Mutex
	groups map[string]*entry
	closed bool
}

type entry struct {
	mu    sync.Mutex
	g     *Group
	timer *time.Timer
}

// Config configures a Coordinator.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound member session
	// timeouts (defaults 6s and 30m, Kafka's group.min/max.session.timeout.ms).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
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
	return &Coordinator{
		limits: Limits{MinSessionTimeout: cfg.MinSessionTimeout, MaxSessionTimeout: cfg.MaxSessionTimeout},
		now:    cfg.Now,
		groups: map[string]*entry{},
	}
}

// Do runs fn on the group (created Empty if create is set and it does not
// exist) under its lock, then re-arms its timer. fn receives nil when the
// group does not exist and create is false.
func (c *Coordinator) Do(id string, create bool, fn func(g *Group, now time.Time)) {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		e, ok := c.groups[id]
		if !ok && create && !c.closed {
			e = &entry{g: NewGroup(id, c.limits)}
			c.groups[id] = e
			ok = true
		}
		c.mu.Unlock()
		if !ok {
			fn(nil, c.now())
			return
		}
		e.mu.Lock()
		if e.g.state == Dead && attempt < 3 {
			// Deleted while we waited for its lock; Delete already
			// removed it from the map, so the next lookup finds or
			// creates the current group.
			e.mu.Unlock()
			continue
		}
		fn(e.g, c.now())
		c.arm(e)
		e.mu.Unlock()
		return
	}
}

// arm (re)schedules the group's timer at its next deadline. Caller holds e.mu.
func (c *Coordinator) arm(e *entry) {
	next := e.g.NextDeadline()
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if next.IsZero() || e.g.state == Dead {
		return
	}
	d := max(next.Sub(c.now()), 0)
	e.timer = time.AfterFunc(d, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.g.Tick(c.now())
		c.arm(e)
	})
}

// NewMemberID returns a fresh member id in Kafka's "clientid-uuid" shape.
func NewMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return clientID + "-" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Delete removes the group if it has no members, returning false if it has
// members (NON_EMPTY_GROUP). A group not in memory counts as deleted.
func (c *Coordinator) Delete(id string) bool {
	c.mu.Lock()
	e, ok := c.groups[id]
	c.mu.Unlock()
	if !ok {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.g.NumMembers() > 0 {
		return false
	}
	e.g.Kill(c.now())
	c.arm(e)
	c.mu.Lock()
	if c.groups[id] == e {
		delete(c.groups, id)
	}
	c.mu.Unlock()
	return true
}

// Summary is one group as ListGroups reports it.
type Summary struct {
	ID           string
	ProtocolType string
	State        State
}

// List returns every group in memory, sorted by id.
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
		if e.g.state != Dead {
			out = append(out, Summary{ID: e.g.ID, ProtocolType: e.g.protocolType, State: e.g.state})
		}
		e.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Close kills every group (waiters are answered with
// COORDINATOR_NOT_AVAILABLE so clients rediscover) and stops the timers.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	es := c.groups
	c.groups = map[string]*entry{}
	c.mu.Unlock()
	for _, e := range es {
		e.mu.Lock()
		e.g.Kill(c.now())
		if e.timer != nil {
			e.timer.Stop()
		}
		e.mu.Unlock()
	}
}
