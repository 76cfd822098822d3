package kconsumer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// memStore is a Store in memory with versions (kstore.ConsumerGroupStore
// is the real one; the end-to-end test runs it through `nereus serve`).
type memStore struct {
	mu   sync.Mutex
	recs map[string]memRec
	next int64
	fail error // Save fails with this while set
}

type memRec struct {
	val []byte
	ver int64
}

func newMemStore() *memStore { return &memStore{recs: map[string]memRec{}} }

func (s *memStore) LoadConsumerGroup(_ context.Context, id string) ([]byte, int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[id]
	return append([]byte(nil), r.val...), r.ver, ok, nil
}

func (s *memStore) SaveConsumerGroup(_ context.Context, id string, snap []byte, expected int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	if s.recs[id].ver != expected {
		return 0, fmt.Errorf("%w: version %d, expected %d", ErrStale, s.recs[id].ver, expected)
	}
	s.next++
	s.recs[id] = memRec{append([]byte(nil), snap...), s.next}
	return s.next, nil
}

func (s *memStore) DeleteConsumerGroup(_ context.Context, id string, expected int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.recs[id]; ok && r.ver != expected {
		return ErrStale
	}
	delete(s.recs, id)
	return nil
}

func (s *memStore) ListConsumerGroups(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.recs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

func (s *memStore) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

type topicList []Topic

func (ts topicList) Topics(_ context.Context, names []string, regex string) ([]Topic, error) {
	return resolver(ts...)(names, regex)
}

func newCoordinator(t *testing.T, st Store) *Coordinator {
	t.Helper()
	c := New(topicList{topicA}, Config{SessionTimeout: time.Minute, Store: st})
	t.Cleanup(c.Close)
	if err := c.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// settle joins members and heartbeats them, reporting what they were last
// given as owned, until the group is Stable; it returns each member's epoch
// and assignment.
func settle(t *testing.T, c *Coordinator, ids ...string) (map[string]int32, map[string]Assignment) {
	t.Helper()
	return settleFrom(t, c, map[string]int32{}, map[string]Assignment{}, ids...)
}

// settleFrom is settle with members already in the group (epochs, owned).
func settleFrom(t *testing.T, c *Coordinator, epochs map[string]int32, owned map[string]Assignment, join ...string) (map[string]int32, map[string]Assignment) {
	t.Helper()
	ctx := context.Background()
	for _, id := range join {
		a := c.Heartbeat(ctx, "g", hb(id, 0, nil))
		if a.Code != 0 {
			t.Fatalf("%s join: %+v", id, a)
		}
		epochs[id], owned[id] = a.Epoch, a.Assignment
	}
	ids := make([]string, 0, len(epochs))
	for id := range epochs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for round := 0; round < 20; round++ {
		for _, id := range ids {
			a := c.Heartbeat(ctx, "g", hb(id, epochs[id], owned[id]))
			if a.Code != 0 {
				t.Fatalf("%s heartbeat: %+v", id, a)
			}
			epochs[id] = a.Epoch
			if a.Assignment != nil {
				owned[id] = a.Assignment
			}
		}
		if g, _ := c.Describe("g"); g.StateName() == "Stable" {
			return epochs, owned
		}
	}
	t.Fatal("group never became Stable")
	return nil, nil
}

// TestRestartResumesGroup: a new coordinator over the same store resumes
// the group (group epoch, member epochs, assignments, target): members
// heartbeating with their epochs are accepted, nothing is re-assigned and
// the group epoch does not move — what a Kafka broker restart looks like to
// a KIP-848 consumer.
func TestRestartResumesGroup(t *testing.T) {
	st := newMemStore()
	c1 := newCoordinator(t, st)
	epochs, owned := settle(t, c1, "m1", "m2")
	before, _ := c1.Describe("g")
	c1.Close()

	c2 := newCoordinator(t, st)
	after, ok := c2.Describe("g")
	if !ok || after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch || after.StateName() != "Stable" {
		t.Fatalf("resumed group %+v, was %+v", after, before)
	}
	if list := c2.List(); len(list) != 1 || list[0].State != "Stable" {
		t.Fatalf("list after restart %+v", list)
	}
	ctx := context.Background()
	for _, id := range []string{"m1", "m2"} {
		if code, ok := c2.CheckCommit("g", id, epochs[id]); !ok || code != 0 {
			t.Fatalf("%s offset commit with its epoch after restart: %d %v", id, code, ok)
		}
		a := c2.Heartbeat(ctx, "g", hb(id, epochs[id], owned[id]))
		if a.Code != 0 || a.Epoch != epochs[id] {
			t.Fatalf("%s after restart: %+v (epoch was %d)", id, a, epochs[id])
		}
		if a.Assignment != nil && !a.Assignment.Equal(owned[id]) {
			t.Fatalf("%s re-assigned after restart: %v, owned %v", id, a.Assignment, owned[id])
		}
		if !after.Target[id].Equal(before.Target[id]) {
			t.Fatalf("%s target %v, was %v", id, after.Target[id], before.Target[id])
		}
	}
	if g, _ := c2.Describe("g"); g.Epoch != before.Epoch {
		t.Fatalf("group epoch moved after restart: %d -> %d", before.Epoch, g.Epoch)
	}
	// A third member after the restart rebalances incrementally from the
	// resumed assignment (nobody gets a partition someone else owns).
	settleFrom(t, c2, epochs, owned, "m3")
	g, _ := c2.Describe("g")
	owners(t, &g)
	if g.Members["m3"].Assigned.Size() != 2 {
		t.Fatalf("m3 assigned %v", g.Members["m3"].Assigned)
	}
}

// TestSaveFailureIsNotAnswered: a heartbeat whose state could not be
// stored is refused (COORDINATOR_NOT_AVAILABLE) and the group stays as
// stored; a lost compare-and-set (another coordinator wrote the group)
// gives the group up (NOT_COORDINATOR) and the next heartbeat loads it
// afresh.
func TestSaveFailureIsNotAnswered(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	c := newCoordinator(t, st)
	settle(t, c, "m1")
	before, _ := c.Describe("g")
	st.setFail(errors.New("store unreachable"))
	if a := c.Heartbeat(ctx, "g", hb("m2", 0, nil)); a.Code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join with a failing store: %+v", a)
	}
	st.setFail(nil)
	if g, _ := c.Describe("g"); g.Epoch != before.Epoch || len(g.Members) != 1 {
		t.Fatalf("unstored join kept: epoch %d members %d", g.Epoch, len(g.Members))
	}
	// Another coordinator takes the group over.
	other := newCoordinator(t, st)
	if _, ok := other.Describe("g"); !ok {
		t.Fatal("other coordinator did not load the group")
	}
	if a := c.Heartbeat(ctx, "g", hb("m2", 0, nil)); a.Code != kerr.NotCoordinator.Code {
		t.Fatalf("stale coordinator answered %+v", a)
	}
	if _, ok := c.Describe("g"); ok {
		t.Fatal("stale coordinator still holds the group")
	}
}

// TestDeleteRemovesStoredGroup: Delete refuses a group with members and
// removes an empty group's record.
func TestDeleteRemovesStoredGroup(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	c := newCoordinator(t, st)
	settle(t, c, "m1")
	if ok, err := c.Delete(ctx, "g"); ok || err != nil {
		t.Fatalf("deleted a group with members: %v %v", ok, err)
	}
	if a := c.Heartbeat(ctx, "g", hb("m1", -1, nil)); a.Code != 0 {
		t.Fatalf("leave: %+v", a)
	}
	if ids, _ := st.ListConsumerGroups(ctx); len(ids) != 1 {
		t.Fatalf("empty group not stored: %v", ids)
	}
	if ok, err := c.Delete(ctx, "g"); !ok || err != nil {
		t.Fatalf("delete empty: %v %v", ok, err)
	}
	if ids, _ := st.ListConsumerGroups(ctx); len(ids) != 0 {
		t.Fatalf("deleted group still stored: %v", ids)
	}
}
