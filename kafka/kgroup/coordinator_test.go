package kgroup

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memStore is a Store fake: a map with compare-and-set versions.
type memStore struct {
	mu    sync.Mutex
	v     map[string]int64
	data  map[string][]byte
	next  int64
	saves int
}

func newMemStore() *memStore { return &memStore{v: map[string]int64{}, data: map[string][]byte{}} }

func (m *memStore) LoadGroup(_ context.Context, id string) ([]byte, int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.v[id]
	return append([]byte(nil), m.data[id]...), v, ok, nil
}

func (m *memStore) SaveGroup(_ context.Context, id string, snap []byte, expected int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.v[id] != expected {
		return 0, ErrStale
	}
	m.next++
	m.v[id], m.data[id] = m.next, append([]byte(nil), snap...)
	m.saves++
	return m.next, nil
}

func (m *memStore) DeleteGroup(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.v, id)
	delete(m.data, id)
	return nil
}

func join(t *testing.T, c *Coordinator, member string) chan *kmsg.JoinGroupResponse {
	t.Helper()
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	err := c.Do("g", true, func(g *Group, now time.Time) {
		if r := g.Join(now, joinReq(member), "c", "/h", "m-"+time.Now().Format("150405.000000000"), ch); r != nil {
			ch <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func recv[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no response")
	}
	var zero T
	return zero
}

// TestGroupResumesOnNewCoordinator: a group that settled on one
// coordinator is stored; a second coordinator over the same store resumes
// it (same generation, members, assignment: no rebalance), claims it, and
// the first coordinator's next write loses, so it gives the group up.
func TestGroupResumesOnNewCoordinator(t *testing.T) {
	store := newMemStore()
	limits := Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Hour, Store: store}
	owner := "old"
	var mu sync.Mutex
	ownsFor := func(name string) func(string) bool {
		return func(string) bool { mu.Lock(); defer mu.Unlock(); return owner == name }
	}
	cfgOld, cfgNew := limits, limits
	cfgOld.Owns, cfgNew.Owns = ownsFor("old"), ownsFor("new")
	old, next := NewCoordinator(cfgOld), NewCoordinator(cfgNew)
	defer old.Close()
	defer next.Close()

	jr := recv(t, join(t, old, ""))
	if jr.ErrorCode != 0 || jr.Generation != 1 {
		t.Fatalf("join %+v", jr)
	}
	sync := make(chan *kmsg.SyncGroupResponse, 1)
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.Generation, sr.MemberID = "g", 1, jr.MemberID
	sr.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("p0,p1")}}
	if err := old.Do("g", false, func(g *Group, now time.Time) {
		if r := g.Sync(now, sr, sync); r != nil {
			sync <- r
		}
	}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, sync); r.ErrorCode != 0 || string(r.MemberAssignment) != "p0,p1" {
		t.Fatalf("sync %+v", r)
	}
	if store.saves != 1 {
		t.Fatalf("%d saves after the group settled, want 1", store.saves)
	}
	// Heartbeats of a stable group store nothing.
	for i := 0; i < 3; i++ {
		_ = old.Do("g", false, func(g *Group, now time.Time) { g.Heartbeat(now, jr.MemberID, 1) })
	}
	if store.saves != 1 {
		t.Fatalf("%d saves after heartbeats", store.saves)
	}

	// Ownership moves: the old coordinator refuses, the new one resumes.
	mu.Lock()
	owner = "new"
	mu.Unlock()
	if err := old.Do("g", false, func(*Group, time.Time) { t.Fatal("old coordinator still serves") }); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("old coordinator: %v", err)
	}
	var code int16 = -1
	var state State
	if err := next.Do("g", false, func(g *Group, now time.Time) {
		code, state = g.Heartbeat(now, jr.MemberID, 1), g.State()
	}); err != nil {
		t.Fatal(err)
	}
	if code != 0 || state != Stable {
		t.Fatalf("resumed group: heartbeat %d, state %v", code, state)
	}
	var d kmsg.DescribeGroupsResponseGroup
	_ = next.Do("g", false, func(g *Group, _ time.Time) { g.Describe(&d) })
	if len(d.Members) != 1 || string(d.Members[0].MemberAssignment) != "p0,p1" || d.Protocol != "range" {
		t.Fatalf("resumed description %+v", d)
	}
	// A member of the resumed generation may commit; an older one may not.
	_ = next.Do("g", false, func(g *Group, _ time.Time) {
		if c := g.CommitCheck(jr.MemberID, 1); c != 0 {
			t.Fatalf("commit check %d", c)
		}
		if c := g.CommitCheck(jr.MemberID, 0); c != kerr.IllegalGeneration.Code {
			t.Fatalf("old generation commit check %d", c)
		}
	})
}

// TestStaleCoordinatorGivesUp: a coordinator whose view has not noticed
// the move yet keeps the group in memory; the new coordinator's claim makes
// its next write lose, and it evicts the group (waiters: NOT_COORDINATOR).
func TestStaleCoordinatorGivesUp(t *testing.T) {
	store := newMemStore()
	cfg := Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Hour, Store: store}
	stale, next := NewCoordinator(cfg), NewCoordinator(cfg) // both think they own "g"
	defer stale.Close()
	defer next.Close()
	a := recv(t, join(t, stale, "")) // Empty → generation 1, CompletingRebalance
	sync := make(chan *kmsg.SyncGroupResponse, 1)
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.Generation, sr.MemberID = "g", 1, a.MemberID
	_ = stale.Do("g", false, func(g *Group, now time.Time) { g.Sync(now, sr, sync) })
	recv(t, sync) // Stable, stored
	_ = next.Do("g", false, func(g *Group, _ time.Time) {
		if g == nil || g.State() != Stable {
			t.Fatalf("new coordinator did not resume the group: %v", g)
		}
	})
	// The stale coordinator changes the group: its save loses the
	// compare-and-set against the new coordinator's claim.
	_ = stale.Do("g", false, func(g *Group, now time.Time) { g.Leave(now, a.MemberID) }) // Empty: saved
	if got := stale.List(); len(got) != 0 {
		t.Fatalf("stale coordinator still lists %+v", got)
	}
	// The store holds what the new coordinator resumed, not the stale write.
	raw, _, _, _ := store.LoadGroup(context.Background(), "g")
	snap, err := UnmarshalSnapshot(raw)
	if err != nil || snap.State != "Stable" || len(snap.Members) != 1 {
		t.Fatalf("stored snapshot %+v %v", snap, err)
	}
}

// TestDeleteRemovesStoredState: deleting an empty group removes its
// stored snapshot, so it does not come back on a new coordinator.
func TestDeleteRemovesStoredState(t *testing.T) {
	store := newMemStore()
	c := NewCoordinator(Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Hour, Store: store})
	defer c.Close()
	jr := recv(t, join(t, c, ""))
	_ = c.Do("g", false, func(g *Group, now time.Time) { g.Leave(now, jr.MemberID) })
	if _, _, found, _ := store.LoadGroup(context.Background(), "g"); !found {
		t.Fatal("an empty group is stored")
	}
	if ok, err := c.Delete("g"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if _, _, found, _ := store.LoadGroup(context.Background(), "g"); found {
		t.Fatal("deleted group still stored")
	}
	c2 := NewCoordinator(Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Hour, Store: store})
	defer c2.Close()
	_ = c2.Do("g", false, func(g *Group, _ time.Time) {
		if g != nil {
			t.Fatal("deleted group came back")
		}
	})
}
