// Package kgroup is the classic Kafka consumer-group coordinator: the
// JoinGroup/SyncGroup/Heartbeat/LeaveGroup state machine with session and
// rebalance timeouts, and the rules that decide whether an offset commit is
// accepted. Committed offsets themselves are persisted by package kstore.
//
// Group is a pure state machine: every method takes the current time as an
// input, touches no clock, does no I/O and never blocks. Responses to
// requests that must wait (a JoinGroup waiting for the rebalance to finish, a
// SyncGroup waiting for the leader's assignment) are delivered on one-slot
// channels the caller passed in. Coordinator is the thin driver: one mutex
// per group, a timer that feeds Tick at the next deadline.
//
// Group must never persist anything, never talk to the wire, and never let
// a member that is not in the current generation commit offsets; it only
// offers Snapshot/Restore of its settled states. The Coordinator persists
// them through its Store so a new coordinator resumes the group after a
// failover, and evicts groups that another broker coordinates now.
//
// States (Kafka's names): Empty -> PreparingRebalance -> CompletingRebalance
// -> Stable, back to PreparingRebalance on any membership change, Dead once
// deleted. Static membership (group.instance.id, JoinGroup v5+) and the
// KIP-848 protocol are not implemented.
package kgroup

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a group's state.
type State int

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	default:
		return "Dead"
	}
}

// Limits bound member timeouts (Kafka's group.min/max.session.timeout.ms).
type Limits struct {
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
}

type member struct {
	id, clientID, clientHost string
	instanceID               string // static membership (KIP-345); "" for dynamic members
	protocols                []kmsg.JoinGroupRequestProtocol
	sessionTimeout           time.Duration
	rebalanceTimeout         time.Duration
	lastSeen                 time.Time
	// join is set while the member waits for the current rebalance; sync
	// while it waits for the leader's assignment.
	join        chan<- *kmsg.JoinGroupResponse
	joinVersion int16
	sync        chan<- *kmsg.SyncGroupResponse
	syncVersion int16
	assignment  []byte
	joinSeq     uint64 // order of first join, for leader choice
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// Group is one consumer group's state machine.
type Group struct {
	ID           string
	state        State
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	static       map[string]string // instance id -> member id
	seq          uint64
	// Invariant: deadline is set exactly in PreparingRebalance (rebalance
	// timeout) and CompletingRebalance (pending-sync timeout).
	deadline time.Time
	limits   Limits
}

// NewGroup returns an Empty group.
func NewGroup(id string, limits Limits) *Group {
	return &Group{ID: id, members: map[string]*member{}, static: map[string]string{}, limits: limits}
}

// State returns the group's state.
func (g *Group) State() State { return g.state }

// Generation returns the current generation.
func (g *Group) Generation() int32 { return g.generation }

// NumMembers returns the member count.
func (g *Group) NumMembers() int { return len(g.members) }

// ProtocolType returns the group's protocol type ("consumer" for consumers).
func (g *Group) ProtocolType() string { return g.protocolType }

func code(e *kerr.Error) int16 { return e.Code }

func joinErr(version int16, memberID string, c int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.ErrorCode = c
	r.MemberID = memberID
	r.Generation = -1
	return r
}

// Join handles a JoinGroup. It either answers at once (non-nil return) or
// parks the answer on reply (capacity >= 1), delivered when the rebalance
// completes. newMemberID is used for a member joining without an id.
func (g *Group) Join(now time.Time, req *kmsg.JoinGroupRequest, clientID, clientHost, newMemberID string,
	reply chan<- *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
	v := req.Version
	if g.state == Dead {
		return joinErr(v, req.MemberID, code(kerr.CoordinatorNotAvailable))
	}
	st := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if st < g.limits.MinSessionTimeout || st > g.limits.MaxSessionTimeout {
		return joinErr(v, req.MemberID, code(kerr.InvalidSessionTimeout))
	}
	rt := st
	if req.Version >= 1 {
		rt = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if rt <= 0 {
		rt = st
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return joinErr(v, req.MemberID, code(kerr.InconsistentGroupProtocol))
	}
	instance := ""
	if v >= 5 && req.InstanceID != nil {
		instance = *req.InstanceID
	}
	m, known := g.members[req.MemberID]
	replaced := false
	if instance != "" {
		if cur, ok := g.static[instance]; ok && cur != req.MemberID {
			if req.MemberID != "" {
				// An older incarnation of the instance, superseded.
				return joinErr(v, req.MemberID, code(kerr.FencedInstanceID))
			}
			// The instance restarted: its new incarnation takes over the
			// member (assignment, place in the group) under a new id; the
			// old id is fenced.
			m = g.replaceStatic(cur, newMemberID)
			known, replaced = true, true
		}
		if known && m.instanceID != "" && m.instanceID != instance {
			return joinErr(v, req.MemberID, code(kerr.FencedInstanceID))
		}
	}
	if req.MemberID != "" && !known {
		return joinErr(v, req.MemberID, code(kerr.UnknownMemberID))
	}
	if !g.compatible(req, m) {
		return joinErr(v, req.MemberID, code(kerr.InconsistentGroupProtocol))
	}
	if !known {
		g.seq++
		m = &member{id: newMemberID, joinSeq: g.seq, instanceID: instance}
		g.members[m.id] = m
		if instance != "" {
			g.static[instance] = m.id
		}
	}
	changed := !sameProtocols(m.protocols, req.Protocols)
	m.clientID, m.clientHost = clientID, clientHost
	m.protocols = cloneProtocols(req.Protocols)
	m.sessionTimeout, m.rebalanceTimeout = st, rt
	m.lastSeen = now
	if g.protocolType == "" {
		g.protocolType = req.ProtocolType
	}

	// A known member rejoining a settled generation with unchanged
	// metadata gets the current generation back without a rebalance
	// (Kafka does this for followers; the leader always rebalances so it
	// can pick up new subscriptions).
	if known && !changed && m.id != g.leader && (g.state == Stable || g.state == CompletingRebalance) {
		return g.joinResponse(m, v)
	}
	// A restarted static member (KIP-345) with unchanged metadata resumes
	// the current generation without a rebalance, the leader included:
	// it gets the member list with skip_assignment (v9), and its SyncGroup
	// returns the assignment it had.
	if replaced && !changed && g.state == Stable {
		r := g.joinResponse(m, v)
		r.SkipAssignment = m.id == g.leader
		return r
	}
	if m.join != nil && m.join != reply {
		// A duplicate join from the same member supersedes the parked one.
		m.join <- joinErr(m.joinVersion, m.id, code(kerr.RebalanceInProgress))
	}
	m.join, m.joinVersion = reply, v
	if g.state != PreparingRebalance {
		g.prepareRebalance(now)
	}
	g.tryCompleteJoin(now)
	return nil
}

// compatible reports whether the join's protocol type and protocols fit the
// current members (every member must share at least one protocol).
func (g *Group) compatible(req *kmsg.JoinGroupRequest, self *member) bool {
	others := 0
	for _, m := range g.members {
		if m != self {
			others++
		}
	}
	if others == 0 {
		return true
	}
	if req.ProtocolType != g.protocolType {
		return false
	}
	for _, p := range req.Protocols {
		all := true
		for _, m := range g.members {
			if m != self && !hasProtocol(m, p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func hasProtocol(m *member, name string) bool {
	for _, p := range m.protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || string(a[i].Metadata) != string(b[i].Metadata) {
			return false
		}
	}
	return true
}

func cloneProtocols(in []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, len(in))
	for i, p := range in {
		out[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: append([]byte(nil), p.Metadata...)}
	}
	return out
}

func (g *Group) prepareRebalance(now time.Time) {
	// Members waiting for an assignment of the generation being abandoned
	// must rejoin.
	for _, m := range g.members {
		if m.sync != nil {
			r := kmsg.NewPtrSyncGroupResponse()
			r.Version = m.syncVersion
			r.ErrorCode = code(kerr.RebalanceInProgress)
			m.sync <- r
			m.sync = nil
		}
	}
	g.state = PreparingRebalance
	var rt time.Duration
	for _, m := range g.members {
		rt = max(rt, m.rebalanceTimeout)
	}
	g.deadline = now.Add(rt)
}

func (g *Group) tryCompleteJoin(now time.Time) {
	if g.state != PreparingRebalance {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			return
		}
	}
	g.completeJoin(now)
}

// completeJoin ends the join phase: members that did not rejoin are
// removed, a new generation starts and every waiting member is answered.
func (g *Group) completeJoin(now time.Time) {
	for id, m := range g.members {
		if m.join == nil {
			delete(g.members, id)
			if m.instanceID != "" && g.static[m.instanceID] == id {
				delete(g.static, m.instanceID)
			}
		}
	}
	g.generation++
	if len(g.members) == 0 {
		g.toEmpty()
		return
	}
	g.protocol = g.electProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.firstJoined()
	}
	g.state = CompletingRebalance
	var rt time.Duration
	for _, m := range g.members {
		rt = max(rt, m.rebalanceTimeout)
	}
	g.deadline = now.Add(rt)
	for _, m := range g.members {
		m.lastSeen = now
		m.assignment = nil
		m.join <- g.joinResponse(m, m.joinVersion)
		m.join = nil
	}
}

func (g *Group) toEmpty() {
	g.state = Empty
	g.protocol = ""
	g.protocolType = ""
	g.leader = ""
	g.deadline = time.Time{}
}

func (g *Group) firstJoined() string {
	var best *member
	for _, m := range g.members {
		if best == nil || m.joinSeq < best.joinSeq {
			best = m
		}
	}
	return best.id
}

// electProtocol picks the protocol every member supports that most members
// prefer (each member votes for its first supported candidate).
func (g *Group) electProtocol() string {
	var candidates []string
	var any *member
	for _, m := range g.members {
		any = m
		break
	}
	for _, p := range any.protocols {
		all := true
		for _, m := range g.members {
			if !hasProtocol(m, p.Name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func (g *Group) joinResponse(m *member, version int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = g.generation
	pt, p := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.LeaderID = g.leader
	r.MemberID = m.id
	if m.id == g.leader {
		ids := make([]string, 0, len(g.members))
		for id := range g.members {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return g.members[ids[i]].joinSeq < g.members[ids[j]].joinSeq })
		for _, id := range ids {
			mm := kmsg.NewJoinGroupResponseMember()
			mm.MemberID = id
			mm.ProtocolMetadata = g.members[id].metadataFor(g.protocol)
			r.Members = append(r.Members, mm)
		}
	}
	return r
}

// Sync handles a SyncGroup, answering at once or parking on reply.
func (g *Group) Sync(now time.Time, req *kmsg.SyncGroupRequest, reply chan<- *kmsg.SyncGroupResponse) *kmsg.SyncGroupResponse {
	errResp := func(c int16) *kmsg.SyncGroupResponse {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version = req.Version
		r.ErrorCode = c
		return r
	}
	if g.state == Dead {
		return errResp(code(kerr.CoordinatorNotAvailable))
	}
	m, ok := g.members[req.MemberID]
	if !ok {
		return errResp(code(kerr.UnknownMemberID))
	}
	if req.Generation != g.generation {
		return errResp(code(kerr.IllegalGeneration))
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol) {
		return errResp(code(kerr.InconsistentGroupProtocol))
	}
	m.lastSeen = now
	switch g.state {
	case PreparingRebalance:
		return errResp(code(kerr.RebalanceInProgress))
	case Stable:
		return g.syncResponse(m, req.Version)
	case CompletingRebalance:
	default:
		return errResp(code(kerr.UnknownMemberID))
	}
	if m.sync != nil && m.sync != reply {
		m.sync <- errResp(code(kerr.RebalanceInProgress))
	}
	m.sync, m.syncVersion = reply, req.Version
	if m.id == g.leader {
		for _, a := range req.GroupAssignment {
			if mm, ok := g.members[a.MemberID]; ok {
				mm.assignment = append([]byte(nil), a.MemberAssignment...)
			}
		}
		g.state = Stable
		g.deadline = time.Time{}
		for _, mm := range g.members {
			if mm.sync != nil {
				mm.sync <- g.syncResponse(mm, mm.syncVersion)
				mm.sync = nil
			}
		}
	}
	return nil
}

func (g *Group) syncResponse(m *member, version int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	pt, p := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.MemberAssignment = m.assignment
	if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	return r
}

// replaceStatic moves the member of a restarted static instance to newID:
// the old id is fenced (its parked join/sync get FENCED_INSTANCE_ID), the
// member keeps its assignment, join order and leadership.
func (g *Group) replaceStatic(oldID, newID string) *member {
	m := g.members[oldID]
	if m.join != nil {
		m.join <- joinErr(m.joinVersion, m.id, code(kerr.FencedInstanceID))
		m.join = nil
	}
	if m.sync != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version = m.syncVersion
		r.ErrorCode = code(kerr.FencedInstanceID)
		m.sync <- r
		m.sync = nil
	}
	delete(g.members, oldID)
	m.id = newID
	g.members[newID] = m
	g.static[m.instanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	return m
}

// CheckInstance is KIP-345's fencing: a request naming a static instance
// with a member id that is not the instance's current one gets
// FENCED_INSTANCE_ID (0 otherwise, and for requests without an instance).
func (g *Group) CheckInstance(memberID string, instanceID *string) int16 {
	if instanceID == nil || *instanceID == "" {
		return 0
	}
	if cur, ok := g.static[*instanceID]; ok && cur != memberID {
		return code(kerr.FencedInstanceID)
	}
	return 0
}

// LeaveInstance removes the member of a static instance (LeaveGroup v3+
// naming an instance, possibly without its member id).
func (g *Group) LeaveInstance(now time.Time, memberID, instanceID string) int16 {
	cur, ok := g.static[instanceID]
	switch {
	case !ok:
		return code(kerr.UnknownMemberID)
	case memberID != "" && memberID != cur:
		return code(kerr.FencedInstanceID)
	}
	return g.Leave(now, cur)
}

// Heartbeat handles a Heartbeat and returns its error code.
func (g *Group) Heartbeat(now time.Time, memberID string, generation int32) int16 {
	switch {
	case g.state == Dead:
		return code(kerr.CoordinatorNotAvailable)
	case g.state == Empty:
		return code(kerr.UnknownMemberID)
	}
	m, ok := g.members[memberID]
	if !ok {
		return code(kerr.UnknownMemberID)
	}
	if generation != g.generation {
		return code(kerr.IllegalGeneration)
	}
	m.lastSeen = now
	if g.state == PreparingRebalance {
		return code(kerr.RebalanceInProgress)
	}
	return 0
}

// Leave removes a member and returns the error code for it.
func (g *Group) Leave(now time.Time, memberID string) int16 {
	if g.state == Dead {
		return code(kerr.CoordinatorNotAvailable)
	}
	m, ok := g.members[memberID]
	if !ok {
		return code(kerr.UnknownMemberID)
	}
	g.remove(now, m)
	return 0
}

// remove drops a member (left or expired) and re-plans the group.
func (g *Group) remove(now time.Time, m *member) {
	if m.join != nil {
		m.join <- joinErr(m.joinVersion, m.id, code(kerr.UnknownMemberID))
		m.join = nil
	}
	if m.sync != nil {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version = m.syncVersion
		r.ErrorCode = code(kerr.UnknownMemberID)
		m.sync <- r
		m.sync = nil
	}
	delete(g.members, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	switch g.state {
	case Stable, CompletingRebalance:
		g.prepareRebalance(now)
		g.tryCompleteJoin(now)
	case PreparingRebalance:
		g.tryCompleteJoin(now)
	}
}

// Tick applies timeouts at now: members whose session expired are removed,
// a join phase past its rebalance timeout completes without the missing
// members, and members that never synced within the pending-sync timeout
// are removed. It returns the next time Tick must run (zero: none).
func (g *Group) Tick(now time.Time) time.Time {
	if g.state == Dead {
		return time.Time{}
	}
	if g.state == PreparingRebalance && !now.Before(g.deadline) {
		g.completeJoin(now)
	}
	if g.state == CompletingRebalance && !now.Before(g.deadline) {
		var late []*member
		for _, m := range g.members {
			if m.sync == nil {
				late = append(late, m)
			}
		}
		for _, m := range late {
			g.remove(now, m)
		}
	}
	for _, m := range g.members {
		if m.join == nil && m.sync == nil && now.Sub(m.lastSeen) > m.sessionTimeout {
			g.remove(now, m)
		}
	}
	return g.NextDeadline()
}

// NextDeadline is the earliest time at which Tick has work to do.
func (g *Group) NextDeadline() time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if g.state == PreparingRebalance || g.state == CompletingRebalance {
		consider(g.deadline)
	}
	for _, m := range g.members {
		if m.join == nil && m.sync == nil {
			consider(m.lastSeen.Add(m.sessionTimeout + time.Millisecond))
		}
	}
	return next
}

// CommitCheck decides whether an OffsetCommit from (memberID, generation)
// may be applied, returning a Kafka error code (0: commit). A negative
// generation with no member id is an admin ("simple") commit, allowed only
// while the group has no members.
func (g *Group) CommitCheck(memberID string, generation int32) int16 {
	switch {
	case g.state == Dead:
		return code(kerr.CoordinatorNotAvailable)
	case generation < 0 && memberID == "" && g.state == Empty:
		return 0
	case g.state == CompletingRebalance:
		return code(kerr.RebalanceInProgress)
	}
	if _, ok := g.members[memberID]; !ok {
		return code(kerr.UnknownMemberID)
	}
	if generation != g.generation {
		return code(kerr.IllegalGeneration)
	}
	return 0
}

// Kill marks the group Dead (deleted); every waiter gets
// COORDINATOR_NOT_AVAILABLE-style errors and must rediscover.
func (g *Group) Kill(now time.Time) { g.killWith(code(kerr.CoordinatorNotAvailable)) }

// killWith marks the group Dead and answers every waiter with errCode.
func (g *Group) killWith(errCode int16) {
	for _, m := range g.members {
		if m.join != nil {
			m.join <- joinErr(m.joinVersion, m.id, errCode)
			m.join = nil
		}
		if m.sync != nil {
			r := kmsg.NewPtrSyncGroupResponse()
			r.Version = m.syncVersion
			r.ErrorCode = errCode
			m.sync <- r
			m.sync = nil
		}
	}
	g.members = map[string]*member{}
	g.static = map[string]string{}
	g.state = Dead
}

// Describe fills a DescribeGroups entry.
func (g *Group) Describe(d *kmsg.DescribeGroupsResponseGroup) {
	d.Group = g.ID
	d.State = g.state.String()
	d.ProtocolType = g.protocolType
	if g.state == Stable || g.state == CompletingRebalance {
		d.Protocol = g.protocol
	}
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.members[id]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		if m.instanceID != "" {
			inst := m.instanceID
			dm.InstanceID = &inst
		}
		dm.ClientID = m.clientID
		dm.ClientHost = m.clientHost
		dm.ProtocolMetadata = m.metadataFor(g.protocol)
		dm.MemberAssignment = m.assignment
		d.Members = append(d.Members, dm)
	}
}
