package pulsar

// Retention, as Pulsar defines it: a message is subject to the retention
// policy only once every durable subscription of its topic has
// acknowledged it. Until then no time or size limit removes it.
//
//   - The policy is the topic's (pulsar-admin topics set-retention), else
//     its namespace's, else the broker default (Config.DefaultRetention).
//     It becomes the stream's stream.Retention: minutes -> Time, MB ->
//     Bytes, -1 -> unlimited, and (0, 0) -> "delete acknowledged messages
//     at once" (a 1 ms time limit).
//   - The floor is registered with the core as a stream.RetentionGuard on
//     every Pulsar stream: the lowest first-unacknowledged offset of the
//     topic's durable cursors as persisted in metadata (a flush behind the
//     in-memory state only keeps more), or the end when there are none.
//     Readers (non-durable cursors) do not hold messages back, as in
//     Pulsar.
//   - The core applies it on the stream owner every --retention-interval,
//     trimming whole commits from the front.

import (
	"context"
	"errors"
	"time"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/stream"
)

// guardRegistry is what the core offers to protocol adapters.
type guardRegistry interface {
	RegisterRetentionGuard(match func(stream.Info) bool, g stream.RetentionGuard)
}

func isPulsarStream(in stream.Info) bool {
	return in.Attributes[managedledger.AttrProtocol] == "pulsar"
}

// retentionGuard implements stream.RetentionGuard over the managed ledger.
type retentionGuard struct{ ml *managedledger.Factory }

// RetentionFloor implements stream.RetentionGuard.
func (g retentionGuard) RetentionFloor(ctx context.Context, in stream.Info) (int64, error) {
	name, err := managedledger.ParseTopicName(in.Attributes[managedledger.AttrTopic])
	if err != nil {
		return in.StartOffset, nil // not a topic stream we understand: keep it
	}
	l, err := g.ml.Open(ctx, name, false)
	if errors.Is(err, managedledger.ErrTopicNotFound) {
		return in.StartOffset, nil
	}
	if err != nil {
		return 0, err
	}
	if l.StreamID() != in.ID {
		return in.StartOffset, nil // an older incarnation's stream
	}
	return subscriptionFloor(ctx, l, in.EndOffset)
}

// subscriptionFloor is the lowest first-unacknowledged offset over the
// ledger's durable cursors (end when it has none).
func subscriptionFloor(ctx context.Context, l *managedledger.Ledger, end int64) (int64, error) {
	names, err := l.ListCursors(ctx)
	if err != nil {
		return 0, err
	}
	floor := end
	for _, n := range names {
		off, ok, err := l.CursorPosition(ctx, n)
		if err != nil {
			return 0, err
		}
		if ok {
			floor = min(floor, off)
		}
	}
	return floor, nil
}

// streamRetention maps a Pulsar retention policy onto the core's.
func streamRetention(rp managedledger.RetentionPolicies) stream.Retention {
	if rp.RetentionTimeInMinutes == 0 && rp.RetentionSizeInMB == 0 {
		return stream.Retention{Time: time.Millisecond} // acknowledged messages go at once
	}
	var r stream.Retention
	if rp.RetentionTimeInMinutes > 0 {
		r.Time = time.Duration(rp.RetentionTimeInMinutes) * time.Minute
	}
	if rp.RetentionSizeInMB > 0 {
		r.Bytes = rp.RetentionSizeInMB << 20
	}
	return r
}

// effectiveRetention is the policy that applies to topic: the topic's,
// else its namespace's, else the broker default.
func (s *Server) effectiveRetention(ctx context.Context, topic managedledger.TopicName) (managedledger.RetentionPolicies, error) {
	tp, err := s.ml.GetTopicPolicies(ctx, topic)
	if err != nil {
		return managedledger.RetentionPolicies{}, err
	}
	if tp.Retention != nil {
		return *tp.Retention, nil
	}
	ns, err := s.ml.GetNamespace(ctx, topic.NamespaceName())
	if err != nil {
		return managedledger.RetentionPolicies{}, err
	}
	if ns.Retention != nil {
		return *ns.Retention, nil
	}
	if s.cfg.DefaultRetention != nil {
		return *s.cfg.DefaultRetention, nil
	}
	return managedledger.RetentionPolicies{RetentionTimeInMinutes: -1, RetentionSizeInMB: -1}, nil
}

// applyRetention makes the stream of l carry the retention that applies to
// it (on load and whenever a policy changes).
func (s *Server) applyRetention(ctx context.Context, l *managedledger.Ledger) error {
	rp, err := s.effectiveRetention(ctx, l.Name())
	if err != nil {
		return err
	}
	want := streamRetention(rp)
	info, err := l.Info(ctx)
	if err != nil {
		return err
	}
	if info.Retention == want {
		return nil
	}
	return s.ml.SetRetention(ctx, l, want)
}

// applyRetentionTo re-applies retention to every topic (and partition)
// named: after a namespace or topic policy change.
func (s *Server) applyRetentionTo(ctx context.Context, topics []string) error {
	var first error
	for _, full := range topics {
		n, err := managedledger.ParseTopicName(full)
		if err != nil {
			continue
		}
		parts := []managedledger.TopicName{n}
		if k, err := s.ml.PartitionCount(ctx, n); err == nil && k > 0 {
			parts = parts[:0]
			for i := 0; i < k; i++ {
				parts = append(parts, n.Partition(i))
			}
		}
		for _, pn := range parts {
			l, err := s.ml.Open(ctx, pn, false)
			if errors.Is(err, managedledger.ErrTopicNotFound) {
				continue // a partition not used yet gets it when created
			}
			if err == nil {
				err = s.applyRetention(ctx, l)
			}
			if err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// namespaceTopics lists a namespace's topics and partitioned topics.
func (s *Server) namespaceTopics(ctx context.Context, namespace string) ([]string, error) {
	var out []string
	for _, domain := range []string{"persistent", "non-persistent"} {
		ts, err := s.ml.ListTopics(ctx, domain, namespace)
		if err != nil {
			return nil, err
		}
		ps, err := s.ml.ListPartitioned(ctx, domain, namespace)
		if err != nil {
			return nil, err
		}
		out = append(append(out, ts...), ps...)
	}
	return out, nil
}
