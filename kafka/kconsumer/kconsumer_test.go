package kconsumer

import (
	"fmt"
	"testing"
	"time"
)

var topicA = Topic{Name: "a", ID: TopicID{1}, Partitions: 6}

func resolver(ts ...Topic) Resolver {
	return func(names []string, regex string) ([]Topic, error) {
		var out []Topic
		for _, t := range ts {
			for _, n := range names {
				if n == t.Name {
					out = append(out, t)
				}
			}
		}
		return out, nil
	}
}

func hb(id string, epoch int32, owned Assignment) Heartbeat {
	h := Heartbeat{MemberID: id, Epoch: epoch, RebalanceTimeout: -1}
	if epoch == 0 {
		h.Subscribed = []string{"a"}
	}
	if owned != nil {
		h.Owned, h.OwnedSet = owned, true
	}
	return h
}

// owners checks that no partition is assigned to two members at once.
func owners(t *testing.T, g *Group) {
	t.Helper()
	seen := map[string]string{}
	for id, m := range g.Members {
		for _, a := range []Assignment{m.Assigned, m.Revoking} {
			for tid, ps := range a {
				for _, p := range ps {
					k := fmt.Sprint(tid[0], p)
					if o, dup := seen[k]; dup {
						t.Fatalf("partition %s owned by %s and %s", k, o, id)
					}
					seen[k] = id
				}
			}
		}
	}
}

func TestIncrementalRebalance(t *testing.T) {
	g := NewGroup("g")
	now := time.Unix(0, 0)
	lim := Limits{SessionTimeout: time.Minute}
	res := resolver(topicA)
	a := g.Handle(hb("m1", 0, nil), now, lim, res)
	if a.Code != 0 || a.Assignment.Size() != 6 || a.Epoch != 1 {
		t.Fatalf("first join %+v", a)
	}
	owners(t, g)
	m1Owned := a.Assignment
	// m2 joins: m1 must revoke 3 before m2 gets them.
	b := g.Handle(hb("m2", 0, nil), now, lim, res)
	if b.Code != 0 || b.Assignment.Size() != 0 || b.Epoch != 2 {
		t.Fatalf("second join %+v (nothing is free yet)", b)
	}
	owners(t, g)
	a = g.Handle(hb("m1", 1, nil), now, lim, res)
	if a.Epoch != 1 || a.Assignment.Size() != 3 || g.Members["m1"].State != UnrevokedPartitions {
		t.Fatalf("m1 revoke step %+v state %s", a, g.Members["m1"].State)
	}
	// m2 heartbeats: still nothing (m1 has not confirmed).
	if b = g.Handle(hb("m2", 2, Assignment{}), now, lim, res); b.Assignment != nil && b.Assignment.Size() != 0 {
		t.Fatalf("m2 got partitions m1 still owns: %+v", b)
	}
	owners(t, g)
	// m1 confirms by reporting only what it kept.
	a = g.Handle(hb("m1", 1, a.Assignment), now, lim, res)
	if a.Epoch != 2 || g.Members["m1"].State != Stable {
		t.Fatalf("m1 after revocation %+v state %s", a, g.Members["m1"].State)
	}
	kept := 0
	for tid, ps := range m1Owned {
		for _, p := range ps {
			if g.Members["m1"].Assigned.has(tid, p) {
				kept++
			}
		}
	}
	if kept != 3 {
		t.Fatalf("m1 kept %d of its partitions, want 3 (sticky)", kept)
	}
	b = g.Handle(hb("m2", 2, Assignment{}), now, lim, res)
	if b.Assignment.Size() != 3 || g.Members["m2"].State != Stable {
		t.Fatalf("m2 after release %+v", b)
	}
	owners(t, g)
	if g.StateName() != "Stable" {
		t.Fatalf("group %s", g.StateName())
	}
	// Stale epoch from m2 with a subset: accepted; a bogus epoch: fenced.
	if x := g.Handle(hb("m2", 1, Assignment{}), now, lim, res); x.Code != 0 {
		t.Fatalf("stale epoch with subset: %+v", x)
	}
	if x := g.Handle(hb("m2", 9, nil), now, lim, res); x.Code == 0 {
		t.Fatal("future epoch accepted")
	}
	if code := g.CheckCommit("m1", 2); code != 0 {
		t.Fatalf("commit check %d", code)
	}
	if code := g.CheckCommit("m1", 1); code == 0 {
		t.Fatal("stale commit accepted")
	}
	// m1 leaves; m2 gets everything.
	g.Handle(Heartbeat{MemberID: "m1", Epoch: -1, RebalanceTimeout: -1}, now, lim, res)
	b = g.Handle(hb("m2", g.Members["m2"].Epoch, b.Assignment), now, lim, res)
	if b.Assignment.Size() != 6 {
		t.Fatalf("after leave %+v", b)
	}
	// Session expiry.
	if !g.Expire(now.Add(2*time.Minute), time.Minute) || !g.Empty() {
		t.Fatal("expired member kept")
	}
}

func TestAssignors(t *testing.T) {
	b := Topic{Name: "b", ID: TopicID{2}, Partitions: 4}
	subs := map[string][]Topic{"x": {topicA, b}, "y": {topicA, b}, "z": {topicA}}
	u := assignUniform(subs, nil)
	total := 0
	for _, a := range u {
		total += a.Size()
	}
	if total != 10 {
		t.Fatalf("uniform assigned %d of 10", total)
	}
	for id, a := range u {
		if n := a.Size(); n < 3 || n > 4 {
			t.Fatalf("uniform: %s has %d", id, n)
		}
		if id == "z" && len(a[b.ID]) > 0 {
			t.Fatal("z got a topic it does not subscribe to")
		}
	}
	// Sticky: same members, same result.
	u2 := assignUniform(subs, u)
	for id := range u {
		if !u[id].Equal(u2[id]) {
			t.Fatalf("uniform not sticky for %s: %v -> %v", id, u[id], u2[id])
		}
	}
	r := assignRange(map[string][]Topic{"x": {topicA}, "y": {topicA}, "z": {topicA}})
	if fmt.Sprint(r["x"][topicA.ID], r["y"][topicA.ID], r["z"][topicA.ID]) != "[0 1] [2 3] [4 5]" {
		t.Fatalf("range %v", r)
	}
}

func TestStaticMemberRestart(t *testing.T) {
	g := NewGroup("g")
	now := time.Unix(0, 0)
	lim := Limits{SessionTimeout: time.Minute}
	res := resolver(topicA)
	inst := "instance-1"
	join := func(id string) Answer {
		h := hb(id, 0, nil)
		h.InstanceID = &inst
		return g.Handle(h, now, lim, res)
	}
	a := join("m1")
	other := g.Handle(hb("m2", 0, nil), now, lim, res)
	_ = other
	a = g.Handle(hb("m1", a.Epoch, nil), now, lim, res)
	a = g.Handle(hb("m1", a.Epoch, a.Assignment), now, lim, res)
	before := g.Members["m1"].Assigned.clone()
	epochBefore := g.Epoch
	if dup := join("m1-again"); dup.Code == 0 {
		t.Fatal("a second live incarnation of the instance was accepted")
	}
	g.Handle(Heartbeat{MemberID: "m1", Epoch: -2, RebalanceTimeout: -1}, now, lim, res)
	back := join("m1-restarted")
	if back.Code != 0 || !back.Assignment.Equal(before) || g.Epoch != epochBefore {
		t.Fatalf("restart: %+v (group epoch %d -> %d), want the old assignment %v without a rebalance", back, epochBefore, g.Epoch, before)
	}
	owners(t, g)
}
