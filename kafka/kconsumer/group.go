// Package kconsumer is the KIP-848 consumer group protocol (Kafka's
// "consumer" group type, ConsumerGroupHeartbeat): the coordinator assigns
// partitions with a server-side assignor (uniform or range) and moves each
// member from its current assignment to its target one incrementally —
// a partition is revoked from its old owner, and only once that owner
// confirmed the revocation is it handed to the new one.
//
// The state machine is pure (this file and assign.go): a Group takes a
// heartbeat and the current time and returns the answer; the Coordinator
// (coordinator.go) owns locking, the clock and the topic view.
//
// The Coordinator persists every group through its Store (snapshot.go: the
// group and assignment epochs, target assignment, members with their
// epochs, subscriptions and assigned / revoking partitions) before it
// answers the heartbeat that changed it, so a restarted or new coordinator
// resumes the group: members keep heartbeating with their epochs and no
// rebalance happens. Committed offsets are stored separately (package
// kstore). It must never hand a partition to a member while another member
// may still own it.
package kconsumer

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicID is a Kafka topic UUID.
type TopicID [16]byte

// Assignment maps topic ids to sorted partition lists.
type Assignment map[TopicID][]int32

func (a Assignment) clone() Assignment {
	out := make(Assignment, len(a))
	for t, ps := range a {
		out[t] = append([]int32(nil), ps...)
	}
	return out
}

func (a Assignment) has(t TopicID, p int32) bool {
	for _, x := range a[t] {
		if x == p {
			return true
		}
	}
	return false
}

func (a Assignment) add(t TopicID, p int32) {
	ps := a[t]
	i := sort.Search(len(ps), func(i int) bool { return ps[i] >= p })
	if i < len(ps) && ps[i] == p {
		return
	}
	ps = append(ps, 0)
	copy(ps[i+1:], ps[i:])
	ps[i] = p
	a[t] = ps
}

// Size is the number of partitions.
func (a Assignment) Size() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// Equal reports whether both hold the same partitions.
func (a Assignment) Equal(b Assignment) bool {
	if a.Size() != b.Size() {
		return false
	}
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				return false
			}
		}
	}
	return true
}

// minus returns a without b's partitions.
func (a Assignment) minus(b Assignment) Assignment {
	out := Assignment{}
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				out.add(t, p)
			}
		}
	}
	return out
}

// Topic is what the coordinator knows of a subscribed topic.
type Topic struct {
	Name       string
	ID         TopicID
	Partitions int32
}

// MemberState is a member's reconciliation state (Kafka's names).
type MemberState string

const (
	Stable               MemberState = "STABLE"
	UnrevokedPartitions  MemberState = "UNREVOKED_PARTITIONS"
	UnreleasedPartitions MemberState = "UNRELEASED_PARTITIONS"
)

// Member is one consumer of the group.
type Member struct {
	ID, InstanceID, RackID, ClientID, ClientHost string
	Epoch                                        int32
	State                                        MemberState
	Subscribed                                   []string // sorted topic names
	Regex                                        string
	Assignor                                     string
	RebalanceTimeout                             time.Duration
	// Assigned is what the member may consume now; Revoking is what it
	// must still give up (it owns it until it confirms).
	Assigned, Revoking Assignment
	// sent is the assignment last sent to the member (nil: none yet).
	sent        Assignment
	staticLeft  bool // left with epoch -2; its instance may come back
	lastSeen    time.Time
	revokeSince time.Time
}

// Group is one consumer group.
type Group struct {
	ID              string
	Epoch           int32 // group epoch: bumped on every membership or subscription change
	AssignmentEpoch int32 // epoch of Target
	AssignorName    string
	Members         map[string]*Member
	Target          map[string]Assignment
	topicsHash      string
}

// NewGroup returns an empty group.
func NewGroup(id string) *Group {
	return &Group{ID: id, Members: map[string]*Member{}, Target: map[string]Assignment{}}
}

// Heartbeat is one ConsumerGroupHeartbeat, decoded.
type Heartbeat struct {
	MemberID   string
	Epoch      int32
	InstanceID *string
	RackID     *string
	// RebalanceTimeout < 0: unchanged.
	RebalanceTimeout time.Duration
	Subscribed       []string // nil: unchanged
	Regex            *string  // nil: unchanged
	Assignor         *string  // nil: unchanged
	Owned            Assignment
	OwnedSet         bool // Owned was sent (null: unchanged)
	ClientID, Host   string
}

// Answer is the heartbeat's response.
type Answer struct {
	Code       int16
	Message    string
	MemberID   string
	Epoch      int32
	Assignment Assignment // nil: unchanged since the last answer
}

// Resolver turns a member's subscription into topics (names and a regex
// against the topics that exist).
type Resolver func(names []string, regex string) ([]Topic, error)

// Limits are the coordinator's settings.
type Limits struct {
	SessionTimeout  time.Duration
	DefaultAssignor string
}

// Empty reports whether the group has no members.
func (g *Group) Empty() bool { return len(g.Members) == 0 }

// StateName is the group state as Kafka reports it.
func (g *Group) StateName() string {
	switch {
	case len(g.Members) == 0:
		return "Empty"
	case g.AssignmentEpoch < g.Epoch:
		return "Assigning"
	}
	for _, m := range g.Members {
		if m.Epoch != g.AssignmentEpoch || m.State != Stable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// Handle applies a heartbeat.
func (g *Group) Handle(hb Heartbeat, now time.Time, lim Limits, resolve Resolver) Answer {
	switch {
	case hb.MemberID == "":
		return Answer{Code: kerr.InvalidRequest.Code, Message: "member id is required (ConsumerGroupHeartbeat v1: the client generates it)"}
	case hb.Epoch == -2:
		// A static member leaving to come back: it keeps its assignment
		// (nobody else gets its partitions) until its next incarnation
		// takes over or its session expires.
		if m := g.Members[hb.MemberID]; m != nil {
			if m.InstanceID == "" {
				g.remove(m.ID)
			} else {
				m.staticLeft, m.lastSeen = true, now
			}
		}
		return Answer{MemberID: hb.MemberID, Epoch: hb.Epoch}
	case hb.Epoch == -1:
		if m := g.Members[hb.MemberID]; m != nil {
			g.remove(m.ID)
		}
		return Answer{MemberID: hb.MemberID, Epoch: hb.Epoch}
	case hb.Epoch < -2:
		return Answer{Code: kerr.InvalidRequest.Code, Message: "bad member epoch"}
	}
	m := g.Members[hb.MemberID]
	bump := false // one group epoch bump per heartbeat, whatever changed
	if hb.Epoch == 0 {
		if hb.Subscribed == nil && hb.Regex == nil {
			return Answer{Code: kerr.InvalidRequest.Code, Message: "a joining member must send its subscription"}
		}
		if hb.InstanceID != nil && *hb.InstanceID != "" && m == nil {
			// Static membership: the next incarnation of an instance that
			// left with epoch -2 takes over its member, assignment and
			// epoch without a rebalance; while the old one has not left,
			// the instance id is in use.
			for _, o := range g.Members {
				if o.InstanceID != *hb.InstanceID {
					continue
				}
				if !o.staticLeft {
					return Answer{Code: kerr.UnreleasedInstanceID.Code, Message: "instance id " + o.InstanceID + " is still held by member " + o.ID}
				}
				oldID := o.ID
				delete(g.Members, oldID)
				o.ID, o.staticLeft, o.sent = hb.MemberID, false, nil
				g.Members[o.ID] = o
				g.Target[o.ID] = g.Target[oldID]
				delete(g.Target, oldID)
				m = o
				break
			}
		}
		if m != nil && m.staticLeft {
			m.staticLeft = false
		}
		if m == nil {
			m = &Member{ID: hb.MemberID, State: Stable, Assigned: Assignment{}, Revoking: Assignment{}}
			g.Members[m.ID] = m
			bump = true
		} else if m.sent != nil {
			// A rejoin with epoch 0 of a member we answered before: it lost
			// its state.
			m.Assigned, m.Revoking, m.State, m.Epoch, m.sent = Assignment{}, Assignment{}, Stable, 0, nil
		}
	} else {
		switch {
		case m == nil:
			return Answer{Code: kerr.UnknownMemberID.Code, Message: "unknown member; rejoin with epoch 0"}
		case hb.Epoch != m.Epoch && !(hb.Epoch < m.Epoch && hb.OwnedSet && isSubset(hb.Owned, m.Assigned)):
			return Answer{Code: kerr.FencedMemberEpoch.Code, Message: "member epoch is fenced; rejoin with epoch 0"}
		}
	}
	m.lastSeen = now
	m.ClientID, m.ClientHost = hb.ClientID, hb.Host
	if hb.InstanceID != nil {
		m.InstanceID = *hb.InstanceID
	}
	if hb.RackID != nil {
		m.RackID = *hb.RackID
	}
	if hb.RebalanceTimeout >= 0 {
		m.RebalanceTimeout = hb.RebalanceTimeout
	}
	if hb.Assignor != nil && *hb.Assignor != "" {
		if !validAssignor(*hb.Assignor) {
			return Answer{Code: kerr.UnsupportedAssignor.Code, Message: "assignor " + *hb.Assignor + " is not one of uniform, range"}
		}
		m.Assignor = *hb.Assignor
	}
	if hb.Subscribed != nil {
		s := append([]string(nil), hb.Subscribed...)
		sort.Strings(s)
		if !equalStrings(s, m.Subscribed) {
			m.Subscribed = s
			bump = true
		}
	}
	if hb.Regex != nil && *hb.Regex != m.Regex {
		m.Regex = *hb.Regex
		bump = true
	}
	// Topics changing (created, grown, deleted) changes the target too.
	topics, err := g.topicsOf(resolve)
	if err != nil {
		return Answer{Code: kerr.InvalidRegularExpression.Code, Message: err.Error()}
	}
	if h := hashTopics(topics); h != g.topicsHash {
		g.topicsHash = h
		bump = true
	}
	if bump {
		g.Epoch++
	}
	if g.AssignmentEpoch < g.Epoch {
		g.assign(topics, lim, resolve)
	}
	if hb.OwnedSet && m.State == UnrevokedPartitions && !overlaps(hb.Owned, m.Revoking) {
		m.Revoking = Assignment{} // the member confirmed the revocation
	}
	g.reconcile(m, now)
	ans := Answer{MemberID: m.ID, Epoch: m.Epoch}
	if m.sent == nil || !m.sent.Equal(m.Assigned) || hb.Epoch == 0 {
		ans.Assignment = m.Assigned.clone()
		m.sent = m.Assigned.clone()
	}
	return ans
}

func validAssignor(a string) bool { return a == "uniform" || a == "range" }

// topicsOf resolves every member's subscription.
func (g *Group) topicsOf(resolve Resolver) (map[string]Topic, error) {
	out := map[string]Topic{}
	for _, m := range g.Members {
		ts, err := resolve(m.Subscribed, m.Regex)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			out[t.Name] = t
		}
	}
	return out, nil
}

func hashTopics(ts map[string]Topic) string {
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	b := make([]byte, 0, 32*len(names))
	for _, n := range names {
		t := ts[n]
		b = append(b, n...)
		b = append(b, t.ID[:]...)
		b = append(b, byte(t.Partitions>>24), byte(t.Partitions>>16), byte(t.Partitions>>8), byte(t.Partitions))
	}
	return string(b)
}

// assign computes the target assignment for the group epoch.
func (g *Group) assign(topics map[string]Topic, lim Limits, resolve Resolver) {
	name := lim.DefaultAssignor
	if name == "" {
		name = "uniform"
	}
	// The most common assignor among members wins (ties: name order).
	votes := map[string]int{}
	for _, m := range g.Members {
		if m.Assignor != "" {
			votes[m.Assignor]++
		}
	}
	best := 0
	for _, a := range []string{"range", "uniform"} {
		if votes[a] > best {
			name, best = a, votes[a]
		}
	}
	subs := map[string][]Topic{}
	for _, m := range g.Members {
		ts, _ := resolve(m.Subscribed, m.Regex)
		subs[m.ID] = ts
	}
	prev := map[string]Assignment{}
	for id := range g.Members {
		prev[id] = g.Target[id]
	}
	if name == "range" {
		g.Target = assignRange(subs)
	} else {
		g.Target = assignUniform(subs, prev)
	}
	g.AssignorName = name
	g.AssignmentEpoch = g.Epoch
}

// ownedByOthers is every partition another member holds or still revokes.
func (g *Group) ownedByOthers(self string) Assignment {
	out := Assignment{}
	for id, o := range g.Members {
		if id == self {
			continue
		}
		for t, ps := range o.Assigned {
			for _, p := range ps {
				out.add(t, p)
			}
		}
		for t, ps := range o.Revoking {
			for _, p := range ps {
				out.add(t, p)
			}
		}
	}
	return out
}

// reconcile moves the member toward its target (Kafka's
// CurrentAssignmentBuilder): first it must revoke what it keeps beyond the
// target (its epoch stays); then it takes the new epoch and every target
// partition no other member still owns; partitions still owned elsewhere
// follow on later heartbeats.
func (g *Group) reconcile(m *Member, now time.Time) {
	target := g.Target[m.ID]
	if target == nil {
		target = Assignment{}
	}
	if m.Revoking.Size() > 0 {
		return // waiting for the member to confirm
	}
	revoke := m.Assigned.minus(target)
	if revoke.Size() > 0 {
		m.Assigned = m.Assigned.minus(revoke)
		m.Revoking = revoke
		m.State = UnrevokedPartitions
		m.revokeSince = now
		return
	}
	m.Epoch = g.AssignmentEpoch
	others := g.ownedByOthers(m.ID)
	next := Assignment{}
	pending := 0
	for t, ps := range target {
		for _, p := range ps {
			if m.Assigned.has(t, p) || !others.has(t, p) {
				next.add(t, p)
			} else {
				pending++
			}
		}
	}
	m.Assigned = next
	if pending > 0 {
		m.State = UnreleasedPartitions
	} else {
		m.State = Stable
	}
}

func (g *Group) remove(id string) {
	delete(g.Members, id)
	delete(g.Target, id)
	g.Epoch++
}

// Expire removes members that missed their session or did not revoke in
// their rebalance timeout; it reports whether any was removed.
func (g *Group) Expire(now time.Time, session time.Duration) bool {
	removed := false
	for id, m := range g.Members {
		late := now.Sub(m.lastSeen) > session
		stuck := m.State == UnrevokedPartitions && m.RebalanceTimeout > 0 && now.Sub(m.revokeSince) > m.RebalanceTimeout
		if late || stuck {
			g.remove(id)
			removed = true
		}
	}
	return removed
}

// CheckCommit validates an OffsetCommit / OffsetFetch from a member of this
// group (KIP-848: the generation field carries the member epoch).
func (g *Group) CheckCommit(memberID string, epoch int32) int16 {
	if memberID == "" && epoch < 0 {
		if len(g.Members) > 0 {
			return kerr.UnknownMemberID.Code
		}
		return 0
	}
	m := g.Members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch > m.Epoch:
		return kerr.FencedMemberEpoch.Code
	case epoch < m.Epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

func isSubset(a, b Assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				return false
			}
		}
	}
	return true
}

func overlaps(a, b Assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if b.has(t, p) {
				return true
			}
		}
	}
	return false
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
