package cluster

import (
	"context"
	"time"
)

// BrokerStatus is one registered broker as cluster status reports it.
type BrokerStatus struct {
	Broker
	// Self marks the node that answered.
	Self bool
	// SessionAge is how long the broker's current registry session has
	// existed (a restart or a lost session starts a new one).
	SessionAge time.Duration
	// Assigned counts the scanned streams the ownership policy assigns to
	// the broker; Held those whose append session the broker holds now
	// (by the stream heads).
	Assigned, Held int
}

// Status is the cluster as one node sees it.
type Status struct {
	Self     string
	Isolated bool
	Leaving  bool
	Brokers  []BrokerStatus
	// Streams is how many streams were scanned (at most the limit given to
	// Status); Truncated is set when there were more. Unowned counts
	// scanned streams without a live session.
	Streams   int
	Truncated bool
	Unowned   int
}

// Status reports the registered brokers and, over up to limit streams
// (limit <= 0: 100000), how many each is assigned and holds.
func (n *Node) Status(ctx context.Context, limit int) (Status, error) {
	if limit <= 0 {
		limit = 100000
	}
	v := n.View()
	n.mu.Lock()
	st := Status{Self: n.cfg.NodeID, Leaving: n.leaving}
	n.mu.Unlock()
	st.Isolated = n.Isolated()
	now := time.Now()
	idx := map[string]int{}
	for _, b := range v.Brokers {
		idx[b.NodeID] = len(st.Brokers)
		st.Brokers = append(st.Brokers, BrokerStatus{Broker: b, Self: b.NodeID == n.cfg.NodeID,
			SessionAge: now.Sub(b.Registered()).Round(time.Millisecond)})
	}
	exclude := ""
	if n.excludedSelf() {
		exclude = n.cfg.NodeID
	}
	after := ""
	for st.Streams < limit {
		infos, err := n.cfg.Storage.List(ctx, "", after, min(512, limit-st.Streams))
		if err != nil {
			return st, err
		}
		if len(infos) == 0 {
			break
		}
		for _, in := range infos {
			after = in.Name
			st.Streams++
			if i := pick(in.Name, v.Brokers, exclude); i >= 0 {
				st.Brokers[idx[v.Brokers[i].NodeID]].Assigned++
			}
			s := in.Session
			if s.WriterID != "" && now.Before(s.Expires) {
				if i, ok := idx[s.WriterID]; ok {
					st.Brokers[i].Held++
					continue
				}
			}
			st.Unowned++
		}
	}
	if st.Streams >= limit {
		if more, err := n.cfg.Storage.List(ctx, "", after, 1); err == nil && len(more) > 0 {
			st.Truncated = true
		}
	}
	return st, nil
}
