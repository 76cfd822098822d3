package kconsumer

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// snapshotVersion is the Snapshot format; Restore refuses others.
const snapshotVersion = 1

// Snapshot is the persisted form of a group: what Kafka keeps in
// __consumer_offsets for a consumer group (the group epoch, the target
// assignment and its epoch, every member's subscription, epoch, state,
// assigned and revoking partitions), so that a restarted coordinator
// resumes the group without a rebalance. Session timers are not state:
// Restore starts every member's session afresh, as Kafka does on load.
type Snapshot struct {
	V               int              `json:"v"`
	ID              string           `json:"id"`
	Epoch           int32            `json:"epoch"`
	AssignmentEpoch int32            `json:"assignmentEpoch"`
	AssignorName    string           `json:"assignor,omitempty"`
	TopicsHash      []byte           `json:"topicsHash,omitempty"`
	Members         []MemberSnapshot `json:"members,omitempty"`
}

// MemberSnapshot is one member of a Snapshot.
type MemberSnapshot struct {
	ID                 string            `json:"id"`
	InstanceID         string            `json:"instance,omitempty"`
	RackID             string            `json:"rack,omitempty"`
	ClientID           string            `json:"client,omitempty"`
	ClientHost         string            `json:"host,omitempty"`
	Epoch              int32             `json:"epoch"`
	State              MemberState       `json:"state"`
	Subscribed         []string          `json:"subscribed,omitempty"`
	Regex              string            `json:"regex,omitempty"`
	Assignor           string            `json:"assignor,omitempty"`
	RebalanceTimeoutMs int64             `json:"rebalanceTimeoutMs,omitempty"`
	StaticLeft         bool              `json:"staticLeft,omitempty"`
	Assigned           []TopicPartitions `json:"assigned,omitempty"`
	Revoking           []TopicPartitions `json:"revoking,omitempty"`
	Target             []TopicPartitions `json:"target,omitempty"`
}

// TopicPartitions is one topic of an Assignment (the topic id in hex).
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

func snapAssignment(a Assignment) []TopicPartitions {
	out := make([]TopicPartitions, 0, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			out = append(out, TopicPartitions{Topic: hex.EncodeToString(t[:]), Partitions: append([]int32(nil), ps...)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

func restoreAssignment(tps []TopicPartitions) (Assignment, error) {
	a := Assignment{}
	for _, tp := range tps {
		b, err := hex.DecodeString(tp.Topic)
		if err != nil || len(b) != len(TopicID{}) {
			return nil, fmt.Errorf("kconsumer: bad topic id %q in snapshot", tp.Topic)
		}
		var id TopicID
		copy(id[:], b)
		for _, p := range tp.Partitions {
			a.add(id, p)
		}
	}
	return a, nil
}

// Snapshot returns the group's persistent state. Equal groups give equal
// snapshots (members and topics are ordered), so comparing the encodings
// tells whether anything worth storing changed.
func (g *Group) Snapshot() Snapshot {
	s := Snapshot{V: snapshotVersion, ID: g.ID, Epoch: g.Epoch, AssignmentEpoch: g.AssignmentEpoch,
		AssignorName: g.AssignorName, TopicsHash: []byte(g.topicsHash)}
	ids := make([]string, 0, len(g.Members))
	for id := range g.Members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.Members[id]
		s.Members = append(s.Members, MemberSnapshot{ID: m.ID, InstanceID: m.InstanceID, RackID: m.RackID,
			ClientID: m.ClientID, ClientHost: m.ClientHost, Epoch: m.Epoch, State: m.State,
			Subscribed: append([]string(nil), m.Subscribed...), Regex: m.Regex, Assignor: m.Assignor,
			RebalanceTimeoutMs: m.RebalanceTimeout.Milliseconds(), StaticLeft: m.staticLeft,
			Assigned: snapAssignment(m.Assigned), Revoking: snapAssignment(m.Revoking), Target: snapAssignment(g.Target[id])})
	}
	return s
}

// MarshalSnapshot encodes a snapshot.
func MarshalSnapshot(s Snapshot) ([]byte, error) { return json.Marshal(s) }

// UnmarshalSnapshot decodes a snapshot, refusing unknown versions.
func UnmarshalSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return Snapshot{}, fmt.Errorf("kconsumer: undecodable group snapshot: %w", err)
	}
	if s.V != snapshotVersion {
		return Snapshot{}, fmt.Errorf("kconsumer: group snapshot version %d, want %d", s.V, snapshotVersion)
	}
	return s, nil
}

// Restore rebuilds a group from its snapshot at now: every member's
// session (and revocation deadline) starts at now, and the next answer to
// each member carries its full assignment (what it was last sent is not
// state; resending an unchanged assignment changes nothing for the client).
func Restore(s Snapshot, now time.Time) (*Group, error) {
	g := NewGroup(s.ID)
	g.Epoch, g.AssignmentEpoch, g.AssignorName, g.topicsHash = s.Epoch, s.AssignmentEpoch, s.AssignorName, string(s.TopicsHash)
	for _, ms := range s.Members {
		m := &Member{ID: ms.ID, InstanceID: ms.InstanceID, RackID: ms.RackID, ClientID: ms.ClientID, ClientHost: ms.ClientHost,
			Epoch: ms.Epoch, State: ms.State, Subscribed: ms.Subscribed, Regex: ms.Regex, Assignor: ms.Assignor,
			RebalanceTimeout: time.Duration(ms.RebalanceTimeoutMs) * time.Millisecond, staticLeft: ms.StaticLeft,
			lastSeen: now, revokeSince: now}
		var err error
		if m.Assigned, err = restoreAssignment(ms.Assigned); err != nil {
			return nil, err
		}
		if m.Revoking, err = restoreAssignment(ms.Revoking); err != nil {
			return nil, err
		}
		target, err := restoreAssignment(ms.Target)
		if err != nil {
			return nil, err
		}
		if m.State == "" {
			m.State = Stable
		}
		g.Members[m.ID] = m
		if len(ms.Target) > 0 {
			g.Target[m.ID] = target
		}
	}
	return g, nil
}
