package kgroup

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func staticJoin(member, instance string) *kmsg.JoinGroupRequest {
	r := joinReq(member)
	r.Version = 9
	r.InstanceID = &instance
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte(instance + "-meta")}}
	return r
}

// TestStaticMemberRestart: KIP-345. A static instance that restarts (joins
// without a member id) takes over its member without a rebalance — the
// generation stays, it keeps its assignment and leadership — and its old
// member id is fenced; a snapshot keeps the instance.
func TestStaticMemberRestart(t *testing.T) {
	g := newG()
	a := make(chan *kmsg.JoinGroupResponse, 1)
	if r := g.Join(t0, staticJoin("", "ia"), "c", "/h", "ia-1", a); r != nil {
		t.Fatalf("immediate %+v", r)
	}
	ra := mustRecv(t, a)
	s := make(chan *kmsg.SyncGroupResponse, 1)
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Version = 5
	sr.Group, sr.Generation, sr.MemberID = "g", ra.Generation, "ia-1"
	sr.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "ia-1", MemberAssignment: []byte("p0")}}
	if r := g.Sync(t0, sr, s); r != nil {
		t.Fatalf("immediate %+v", r)
	}
	mustRecv(t, s)
	gen := g.Generation()

	// Restart: a join without a member id, same instance and metadata.
	r := g.Join(t0, staticJoin("", "ia"), "c", "/h", "ia-2", make(chan *kmsg.JoinGroupResponse, 1))
	if r == nil || r.ErrorCode != 0 || r.MemberID != "ia-2" || r.Generation != gen || r.LeaderID != "ia-2" || !r.SkipAssignment {
		t.Fatalf("restart join %+v", r)
	}
	if g.State() != Stable || g.Generation() != gen {
		t.Fatalf("state %s generation %d (was %d): rebalanced", g.State(), g.Generation(), gen)
	}
	sr.MemberID = "ia-2"
	if r := g.Sync(t0, sr, nil); r == nil || string(r.MemberAssignment) != "p0" {
		t.Fatalf("sync after restart %+v", r)
	}
	inst := "ia"
	if c := g.CheckInstance("ia-1", &inst); c != kerr.FencedInstanceID.Code {
		t.Fatalf("old member id not fenced: %d", c)
	}
	if c := g.CheckInstance("ia-2", &inst); c != 0 {
		t.Fatalf("current member fenced: %d", c)
	}
	if r := g.Join(t0, staticJoin("ia-1", "ia"), "c", "/h", "x", make(chan *kmsg.JoinGroupResponse, 1)); r == nil || r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation rejoin %+v", r)
	}
	// Failover keeps the instance.
	g2, err := Restore(g.Snapshot(), g.limits, t0)
	if err != nil {
		t.Fatal(err)
	}
	if c := g2.CheckInstance("ia-1", &inst); c != kerr.FencedInstanceID.Code {
		t.Fatal("restored group forgot the static instance")
	}
	// Leaving by instance.
	if c := g.LeaveInstance(t0, "", "ia"); c != 0 || g.NumMembers() != 0 {
		t.Fatalf("leave by instance: %d, %d members", c, g.NumMembers())
	}
}
