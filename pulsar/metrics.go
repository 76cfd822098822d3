package pulsar

import (
	"context"
	"sort"
	"time"
)

// TopicMetrics is one loaded topic's counters and gauges, in the units of
// Apache Pulsar's topic-level Prometheus metrics (package pulsarprom gives
// them Pulsar's names).
type TopicMetrics struct {
	Topic, Namespace                 string
	InMessages, InBytes              int64 // pulsar_in_messages_total, pulsar_in_bytes_total
	OutMessages, OutBytes            int64 // pulsar_out_messages_total, pulsar_out_bytes_total
	RateIn, RateOut, TputIn, TputOut float64
	Producers, Consumers             int
	StorageSize                      int64 // bytes committed to the topic's stream
	Entries                          int64 // readable entries
	Backlog                          int64 // pulsar_msg_backlog: sum of the subscriptions' backlogs
	Subscriptions                    []SubscriptionMetrics
}

// SubscriptionMetrics is one subscription's dispatch and cursor state.
type SubscriptionMetrics struct {
	Name            string
	Backlog         int64 // pulsar_subscription_back_log
	Consumers       int
	Unacked         int   // delivered, not yet acknowledged
	Redeliveries    int64 // entries queued for redelivery (nacks, timeouts, consumer loss)
	Dispatched      int64 // entries sent to consumers
	NonContiguous   int   // brk_ml_cursor_nonContiguousDeletedMessagesRange
	PersistOK       int64 // cursor state writes applied to metadata
	PersistFailures int64 // cursor state writes that failed
}

// Metrics snapshots every loaded topic (a topic is loaded while clients
// use it). It reads each topic's stream head once.
func (s *Server) Metrics(ctx context.Context) []TopicMetrics {
	s.mu.Lock()
	ts := make([]*topic, 0, len(s.topics))
	for _, tl := range s.topics {
		select {
		case <-tl.done:
			if tl.t != nil {
				ts = append(ts, tl.t)
			}
		default:
		}
	}
	s.mu.Unlock()
	out := make([]TopicMetrics, 0, len(ts))
	for _, t := range ts {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := t.ledger.Info(ctx)
		cancel()
		if err != nil {
			continue
		}
		st := &t.stats
		st.mu.Lock()
		m := TopicMetrics{Topic: t.name.String(), Namespace: t.name.NamespaceName(),
			RateIn: st.rateIn, RateOut: st.rateOut, TputIn: st.tputIn, TputOut: st.tputOut}
		st.mu.Unlock()
		m.InMessages, m.InBytes = st.msgIn.Load(), st.bytesIn.Load()
		m.OutMessages, m.OutBytes = st.msgOut.Load(), st.bytesOut.Load()
		m.StorageSize, m.Entries = info.CommittedBytes, info.EndOffset-info.StartOffset
		t.mu.Lock()
		m.Producers = len(t.producers)
		t.mu.Unlock()
		for _, sub := range t.subscriptionList() {
			sm := SubscriptionMetrics{Name: sub.name, Backlog: sub.cursor.Backlog(info.EndOffset),
				Redeliveries: sub.redelivered.Load(), Dispatched: sub.dispatched.Load()}
			snap := sub.cursor.Snapshot()
			sm.NonContiguous = len(snap.Deleted)
			sm.PersistOK, sm.PersistFailures = sub.cursor.PersistStats()
			sub.call(func() {
				sm.Consumers = len(sub.consumers)
				for _, c := range sub.consumers {
					sm.Unacked += c.unacked
				}
			})
			m.Consumers += sm.Consumers
			m.Backlog += sm.Backlog
			m.Subscriptions = append(m.Subscriptions, sm)
		}
		sort.Slice(m.Subscriptions, func(i, j int) bool { return m.Subscriptions[i].Name < m.Subscriptions[j].Name })
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}
