package kgroup

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Snapshot is the persisted form of a group in a settled state (Stable or
// Empty): what a new coordinator needs to resume the group after a
// failover without a rebalance — its generation, protocol, leader and each
// member's subscription and assignment. It is plain data; the Coordinator's
// Store persists it (encoded with MarshalSnapshot).
//
// Members that are mid-join or mid-sync are not part of it: a group is
// only snapshotted when settled, and a group restored from an older
// snapshot than its members know answers their requests with
// ILLEGAL_GENERATION, which makes them rejoin (never lets a member of a
// newer generation commit under an older one).
type Snapshot struct {
	V            int              `json:"v"` // format version, 1
	ID           string           `json:"id"`
	State        string           `json:"state"` // "Stable" or "Empty"
	Generation   int32            `json:"generation"`
	ProtocolType string           `json:"protocolType,omitempty"`
	Protocol     string           `json:"protocol,omitempty"`
	Leader       string           `json:"leader,omitempty"`
	Seq          uint64           `json:"seq"`
	Members      []MemberSnapshot `json:"members,omitempty"`
}

// MemberSnapshot is one member of a Snapshot.
type MemberSnapshot struct {
	ID                 string             `json:"id"`
	InstanceID         string             `json:"instanceId,omitempty"`
	ClientID           string             `json:"clientId"`
	ClientHost         string             `json:"clientHost"`
	Protocols          []ProtocolSnapshot `json:"protocols"`
	SessionTimeoutMs   int64              `json:"sessionTimeoutMs"`
	RebalanceTimeoutMs int64              `json:"rebalanceTimeoutMs"`
	Assignment         []byte             `json:"assignment,omitempty"`
	JoinSeq            uint64             `json:"joinSeq"`
}

// ProtocolSnapshot is one (name, metadata) a member joined with.
type ProtocolSnapshot struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

const snapshotVersion = 1

// Settled reports whether the group is in a state worth persisting:
// Stable (an assignment every member has) or Empty.
func (g *Group) Settled() bool { return g.state == Stable || g.state == Empty }

// Snapshot returns the group's persistent state. Only meaningful when
// Settled.
func (g *Group) Snapshot() Snapshot {
	s := Snapshot{V: snapshotVersion, ID: g.ID, State: g.state.String(), Generation: g.generation,
		ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader, Seq: g.seq}
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.members[id]
		ms := MemberSnapshot{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			SessionTimeoutMs: m.sessionTimeout.Milliseconds(), RebalanceTimeoutMs: m.rebalanceTimeout.Milliseconds(),
			Assignment: append([]byte(nil), m.assignment...), JoinSeq: m.joinSeq}
		for _, p := range m.protocols {
			ms.Protocols = append(ms.Protocols, ProtocolSnapshot{Name: p.Name, Metadata: append([]byte(nil), p.Metadata...)})
		}
		s.Members = append(s.Members, ms)
	}
	return s
}

// Restore rebuilds a group from its snapshot at now: members are
// considered alive as of now (their session timers restart) and the group
// resumes in the snapshot's state and generation, so members keep
// heartbeating and committing without a rebalance.
func Restore(s Snapshot, limits Limits, now time.Time) (*Group, error) {
	if s.V != snapshotVersion {
		return nil, fmt.Errorf("kgroup: snapshot version %d not supported", s.V)
	}
	g := NewGroup(s.ID, limits)
	g.generation, g.protocolType, g.protocol, g.leader, g.seq = s.Generation, s.ProtocolType, s.Protocol, s.Leader, s.Seq
	for _, ms := range s.Members {
		m := &member{id: ms.ID, instanceID: ms.InstanceID, clientID: ms.ClientID, clientHost: ms.ClientHost,
			sessionTimeout:   time.Duration(ms.SessionTimeoutMs) * time.Millisecond,
			rebalanceTimeout: time.Duration(ms.RebalanceTimeoutMs) * time.Millisecond,
			assignment:       ms.Assignment, joinSeq: ms.JoinSeq, lastSeen: now}
		for _, p := range ms.Protocols {
			m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		g.members[m.id] = m
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
	}
	switch {
	case s.State == Stable.String() && len(g.members) > 0:
		g.state = Stable
		if _, ok := g.members[g.leader]; !ok {
			g.leader = g.firstJoined()
		}
	default:
		g.toEmpty()
		g.members = map[string]*member{}
		g.static = map[string]string{}
	}
	return g, nil
}

// MarshalSnapshot encodes a snapshot (JSON).
func MarshalSnapshot(s Snapshot) ([]byte, error) { return json.Marshal(s) }

// UnmarshalSnapshot decodes MarshalSnapshot's output.
func UnmarshalSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return Snapshot{}, fmt.Errorf("kgroup: corrupt snapshot: %w", err)
	}
	if s.V != snapshotVersion {
		return Snapshot{}, fmt.Errorf("kgroup: snapshot version %d not supported", s.V)
	}
	return s, nil
}

// persistKey identifies what a snapshot would record: a settled group is
// persisted again only when it changes.
type persistKey struct {
	state      State
	generation int32
	members    int
	memberIDs  string // a static member's restart changes an id, nothing else
}

func (g *Group) persistKey() persistKey {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return persistKey{state: g.state, generation: g.generation, members: len(g.members), memberIDs: strings.Join(ids, "\x00")}
}
