package kgroup

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var t0 = time.Unix(1000, 0)

func joinReq(member string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 4
	r.Group = "g"
	r.MemberID = member
	r.ProtocolType = "consumer"
	r.SessionTimeoutMillis = 10000
	r.RebalanceTimeoutMillis = 30000
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte(member + "-meta")}}
	return r
}

func newG() *Group {
	return NewGroup("g", Limits{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Hour})
}

func mustRecv[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	default:
		t.Fatal("no response delivered")
	}
	var zero T
	return zero
}

func TestJoinSyncStable(t *testing.T) {
	g := newG()
	a := make(chan *kmsg.JoinGroupResponse, 1)
	if r := g.Join(t0, joinReq(""), "c", "/h", "m1", a); r != nil {
		t.Fatalf("immediate %+v", r)
	}
	ra := mustRecv(t, a)
	if ra.ErrorCode != 0 || ra.Generation != 1 || ra.LeaderID != "m1" || len(ra.Members) != 1 || *ra.Protocol != "range" {
		t.Fatalf("%+v", ra)
	}
	if g.State() != CompletingRebalance {
		t.Fatal(g.State())
	}
	s := make(chan *kmsg.SyncGroupResponse, 1)
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.Generation, sr.MemberID = "g", 1, "m1"
	sr.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "m1", MemberAssignment: []byte("all")}}
	if r := g.Sync(t0, sr, s); r != nil {
		t.Fatalf("immediate %+v", r)
	}
	if got := mustRecv(t, s); string(got.MemberAssignment) != "all" || g.State() != Stable {
		t.Fatalf("%+v %v", got, g.State())
	}
	if ec := g.Heartbeat(t0, "m1", 1); ec != 0 {
		t.Fatal(ec)
	}
	if ec := g.Heartbeat(t0, "m1", 0); ec != kerr.IllegalGeneration.Code {
		t.Fatal(ec)
	}
	if ec := g.Heartbeat(t0, "zz", 1); ec != kerr.UnknownMemberID.Code {
		t.Fatal(ec)
	}
	if ec := g.CommitCheck("m1", 1); ec != 0 {
		t.Fatal(ec)
	}
	if ec := g.CommitCheck("", -1); ec != kerr.UnknownMemberID.Code {
		t.Fatalf("admin commit to active group: %d", ec)
	}
}

// TestSecondMemberRebalance: a second member's join starts a rebalance;
// the first learns of it by heartbeat, rejoins, and both get generation 2
// with the leader seeing both members.
func TestSecondMemberRebalance(t *testing.T) {
	g := newG()
	a := make(chan *kmsg.JoinGroupResponse, 1)
	g.Join(t0, joinReq(""), "c", "/h", "m1", a)
	mustRecv(t, a)
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.Generation, sr.MemberID = "g", 1, "m1"
	g.Sync(t0, sr, make(chan *kmsg.SyncGroupResponse, 1))

	b := make(chan *kmsg.JoinGroupResponse, 1)
	if r := g.Join(t0, joinReq(""), "c", "/h", "m2", b); r != nil {
		t.Fatal(r)
	}
	if g.State() != PreparingRebalance {
		t.Fatal(g.State())
	}
	if ec := g.Heartbeat(t0, "m1", 1); ec != kerr.RebalanceInProgress.Code {
		t.Fatal(ec)
	}
	if ec := g.CommitCheck("m1", 1); ec != 0 {
		t.Fatalf("commit during PreparingRebalance should be allowed: %d", ec)
	}
	g.Join(t0, joinReq("m1"), "c", "/h", "unused", a)
	ra, rb := mustRecv(t, a), mustRecv(t, b)
	if ra.Generation != 2 || rb.Generation != 2 || ra.LeaderID != "m1" || len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("a %+v b %+v", ra, rb)
	}
	// Follower syncs first and waits for the leader.
	sb := make(chan *kmsg.SyncGroupResponse, 1)
	sr2 := kmsg.NewPtrSyncGroupRequest()
	sr2.Group, sr2.Generation, sr2.MemberID = "g", 2, "m2"
	if r := g.Sync(t0, sr2, sb); r != nil {
		t.Fatal(r)
	}
	if ec := g.CommitCheck("m2", 2); ec != kerr.RebalanceInProgress.Code {
		t.Fatalf("commit during CompletingRebalance: %d", ec)
	}
	sr.Generation = 2
	sr.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "m1", MemberAssignment: []byte("p0")}, {MemberID: "m2", MemberAssignment: []byte("p1")}}
	sa := make(chan *kmsg.SyncGroupResponse, 1)
	g.Sync(t0, sr, sa)
	if string(mustRecv(t, sa).MemberAssignment) != "p0" || string(mustRecv(t, sb).MemberAssignment) != "p1" {
		t.Fatal("assignments")
	}
}

// TestTimeouts: a member that stops heartbeating is evicted after its
// session timeout; a member that does not rejoin within the rebalance
// timeout is dropped from the new generation.
func TestTimeouts(t *testing.T) {
	g := newG()
	a := make(chan *kmsg.JoinGroupResponse, 1)
	b := make(chan *kmsg.JoinGroupResponse, 1)
	g.Join(t0, joinReq(""), "c", "/h", "m1", a)
	mustRecv(t, a)
	g.Join(t0, joinReq(""), "c", "/h", "m2", b) // starts a rebalance; m1 never rejoins
	// The earliest deadline is m1's session (10s), then the rebalance (30s).
	if next, want := g.NextDeadline(), t0.Add(10*time.Second+time.Millisecond); !next.Equal(want) {
		t.Fatalf("deadline %v want %v", next, want)
	}
	for _, at := range []time.Duration{5, 14, 23} { // m1 keeps its session alive but never rejoins
		if ec := g.Heartbeat(t0.Add(at*time.Second), "m1", 1); ec != kerr.RebalanceInProgress.Code {
			t.Fatal(ec)
		}
		g.Tick(t0.Add(at * time.Second))
	}
	g.Tick(t0.Add(30 * time.Second))
	rb := mustRecv(t, b)
	if rb.Generation != 2 || rb.LeaderID != "m2" || len(rb.Members) != 1 || g.NumMembers() != 1 {
		t.Fatalf("%+v members %d", rb, g.NumMembers())
	}
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.Generation, sr.MemberID = "g", 2, "m2"
	g.Sync(t0.Add(30*time.Second), sr, make(chan *kmsg.SyncGroupResponse, 1))
	// m2 stops heartbeating: evicted after 10s, the group becomes Empty.
	g.Tick(t0.Add(39 * time.Second))
	if g.NumMembers() != 1 {
		t.Fatal("evicted too early")
	}
	g.Tick(t0.Add(41 * time.Second))
	g.Tick(t0.Add(41 * time.Second))
	if g.NumMembers() != 0 || g.State() != Empty {
		t.Fatalf("members %d state %v", g.NumMembers(), g.State())
	}
	if ec := g.CommitCheck("", -1); ec != 0 {
		t.Fatalf("admin commit to empty group: %d", ec)
	}
}

func TestJoinValidation(t *testing.T) {
	g := newG()
	r := joinReq("")
	r.SessionTimeoutMillis = 10
	if got := g.Join(t0, r, "c", "/h", "m", make(chan *kmsg.JoinGroupResponse, 1)); got == nil || got.ErrorCode != kerr.InvalidSessionTimeout.Code {
		t.Fatalf("%+v", got)
	}
	if got := g.Join(t0, joinReq("ghost"), "c", "/h", "m", make(chan *kmsg.JoinGroupResponse, 1)); got == nil || got.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("%+v", got)
	}
	a := make(chan *kmsg.JoinGroupResponse, 1)
	g.Join(t0, joinReq(""), "c", "/h", "m1", a)
	mustRecv(t, a)
	other := joinReq("")
	other.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "roundrobin"}}
	if got := g.Join(t0, other, "c", "/h", "m2", make(chan *kmsg.JoinGroupResponse, 1)); got == nil || got.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("%+v", got)
	}
	// Leave: the group empties.
	if ec := g.Leave(t0, "m1"); ec != 0 || g.State() != Empty {
		t.Fatalf("%d %v", ec, g.State())
	}
}
