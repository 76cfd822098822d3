package pulsar

// Backlog quotas, as Apache Pulsar 4.0.7 applies them (checked against a
// standalone broker with pulsar-client-go, docs/notes/issue-13.md):
//
//   - A topic's backlog is what its slowest durable subscription has not
//     acknowledged: its size (destination_storage quota, bytes; estimated
//     from the stream's retained bytes per offset, as Pulsar estimates it
//     from ledger sizes) and the age of its oldest message (message_age
//     quota, seconds, from the entry's publish time).
//   - producer_request_hold and producer_exception: every
//     BacklogQuotaCheckInterval the broker closes the producers of a topic
//     over quota (CLOSE_PRODUCER); while it stays over quota a producer is
//     refused at creation with ProducerBlockedQuotaExceededError (hold:
//     pulsar-client-go keeps retrying and its pending sends wait, up to
//     their send timeout) or ProducerBlockedQuotaExceededException
//     (exception: the client fails its pending sends and new ones with
//     "producer blocked", and keeps reconnecting). Once the backlog is
//     under quota, the next reconnect succeeds.
//   - consumer_backlog_eviction: at the check the slowest subscriptions
//     are moved forward (their oldest messages are dropped) until the
//     backlog is back under quota; producers are not affected.
//
// The quota is the topic's (pulsar-admin topics set-backlog-quota), else
// the namespace's.

import (
	"context"
	"fmt"
	"time"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
)

const (
	quotaStorage = "destination_storage"
	quotaAge     = "message_age"

	policyHold      = "producer_request_hold"
	policyException = "producer_exception"
	policyEviction  = "consumer_backlog_eviction"
)

// backlogQuotas is the quota map that applies to topic.
func (s *Server) backlogQuotas(ctx context.Context, topic managedledger.TopicName) (map[string]managedledger.BacklogQuota, error) {
	tp, err := s.ml.GetTopicPolicies(ctx, topic)
	if err != nil {
		return nil, err
	}
	if len(tp.BacklogQuota) > 0 {
		return tp.BacklogQuota, nil
	}
	ns, err := s.ml.GetNamespace(ctx, topic.NamespaceName())
	if err != nil {
		return nil, err
	}
	return ns.BacklogQuota, nil
}

// backlogInfo is a topic's backlog as the quota check sees it.
type backlogInfo struct {
	floor, start, end int64
	bytes             int64 // estimated size of [floor, end)
	ageSeconds        int64 // of the message at floor; -1 when no backlog
	bytesPerOffset    float64
}

// backlog measures the topic's backlog: from the lowest first-unacknowledged
// offset over its durable subscriptions (loaded ones as the dispatcher
// sees them, the others as persisted) to its end.
func (t *topic) backlog(ctx context.Context) (backlogInfo, error) {
	info, err := t.ledger.Info(ctx)
	if err != nil {
		return backlogInfo{}, err
	}
	floor, err := subscriptionFloor(ctx, t.ledger, info.EndOffset)
	if err != nil {
		return backlogInfo{}, err
	}
	for _, sub := range t.subscriptionList() {
		if sub.durable {
			floor = min(floor, sub.cursor.AckedBelow())
		}
	}
	floor = max(floor, info.StartOffset)
	b := backlogInfo{floor: floor, start: info.StartOffset, end: info.EndOffset, ageSeconds: -1}
	if n := info.EndOffset - info.StartOffset; n > 0 {
		b.bytesPerOffset = float64(info.RetainedBytes) / float64(n)
		b.bytes = int64(b.bytesPerOffset * float64(info.EndOffset-floor))
	}
	if floor < info.EndOffset {
		if e, ok, err := t.ledger.EntryContaining(ctx, floor); err != nil {
			return b, err
		} else if ok {
			b.ageSeconds = max(time.Since(time.UnixMilli(e.Timestamp)).Milliseconds()/1000, 0)
		}
	}
	return b, nil
}

// exceeded returns the first quota of qs the backlog is over.
func (b backlogInfo) exceeded(qs map[string]managedledger.BacklogQuota) (string, managedledger.BacklogQuota, bool) {
	if q, ok := qs[quotaStorage]; ok && q.LimitSize > 0 && b.bytes > q.LimitSize {
		return quotaStorage, q, true
	}
	if q, ok := qs[quotaAge]; ok && q.LimitTime > 0 && b.ageSeconds > q.LimitTime {
		return quotaAge, q, true
	}
	return "", managedledger.BacklogQuota{}, false
}

// checkProducerQuota refuses a new producer while the topic is over a
// producer_request_hold or producer_exception quota.
func (t *topic) checkProducerQuota(ctx context.Context) error {
	qs, err := t.s.backlogQuotas(ctx, t.name)
	if err != nil || len(qs) == 0 {
		return err
	}
	b, err := t.backlog(ctx)
	if err != nil {
		return err
	}
	kind, q, over := b.exceeded(qs)
	if !over {
		return nil
	}
	msg := fmt.Sprintf("Cannot create producer on topic with backlog quota exceeded (%s)", kind)
	switch q.Policy {
	case policyHold:
		return newError(pb.ServerError_ProducerBlockedQuotaExceededError, msg)
	case policyException:
		return newError(pb.ServerError_ProducerBlockedQuotaExceededException, msg)
	}
	return nil
}

// checkBacklogQuota is the periodic check of one loaded topic.
func (t *topic) checkBacklogQuota(ctx context.Context) {
	qs, err := t.s.backlogQuotas(ctx, t.name)
	if err != nil || len(qs) == 0 {
		return
	}
	b, err := t.backlog(ctx)
	if err != nil {
		return
	}
	kind, q, over := b.exceeded(qs)
	if !over {
		return
	}
	switch q.Policy {
	case policyHold, policyException:
		t.mu.Lock()
		ps := make([]*producer, 0, len(t.producers))
		for _, p := range t.producers {
			ps = append(ps, p)
		}
		t.mu.Unlock()
		if len(ps) > 0 {
			t.s.log.Info("pulsar backlog quota exceeded: disconnecting producers", "topic", t.name.String(), "quota", kind,
				"policy", q.Policy, "backlogBytes", b.bytes, "ageSeconds", b.ageSeconds)
		}
		for _, p := range ps {
			p.closeByBroker()
		}
	case policyEviction:
		target := b.floor
		switch kind {
		case quotaStorage:
			keep := b.end - b.floor
			if b.bytesPerOffset > 0 {
				keep = int64(float64(q.LimitSize) / b.bytesPerOffset)
			}
			target = b.end - keep
		case quotaAge:
			off, err := t.ledger.OffsetForTimestamp(ctx, time.Now().Add(-time.Duration(q.LimitTime)*time.Second).UnixMilli())
			if err != nil {
				return
			}
			target = off
		}
		t.evictBelow(ctx, target)
	}
}

// evictBelow moves every durable subscription behind target to target
// (consumer_backlog_eviction): the messages below it count as
// acknowledged; connected consumers keep going from there.
func (t *topic) evictBelow(ctx context.Context, target int64) {
	names, err := t.ledger.ListCursors(ctx)
	if err != nil {
		return
	}
	for _, name := range names {
		off, ok, err := t.ledger.CursorPosition(ctx, name)
		if err != nil || !ok || off >= target {
			if sub := t.loadedSubscription(name); sub == nil || sub.cursor.AckedBelow() >= target {
				continue
			}
		}
		sub, err := t.openSubscription(ctx, &pb.CommandSubscribe{Subscription: &name, Durable: boolPtr(true),
			InitialPosition: pb.CommandSubscribe_Latest.Enum()})
		if err != nil {
			continue
		}
		sub.call(func() { sub.skipBelow(target) })
		if err := sub.cursor.Flush(ctx); err != nil {
			t.s.log.Warn("pulsar backlog eviction: cursor flush failed", "topic", t.name.String(), "sub", name, "err", err)
			continue
		}
		t.s.log.Info("pulsar backlog quota exceeded: evicted the oldest messages", "topic", t.name.String(), "sub", name, "below", target)
	}
}

func (t *topic) loadedSubscription(name string) *subscription {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.subs[name]
}

// skipBelow (on the dispatcher) acknowledges everything below off and
// forgets deliveries and redeliveries there.
func (s *subscription) skipBelow(off int64) {
	s.cursor.AckBelow(off)
	for o := range s.pending {
		if o < off {
			s.settle(o)
		}
	}
	for o := range s.replay {
		if o < off {
			s.removeReplay(o)
		}
	}
	for o := range s.redeliveries {
		if o < off {
			delete(s.redeliveries, o)
		}
	}
	s.delayed.removeBelow(off)
	s.readPos = max(s.readPos, off)
}

// backlogQuotaLoop runs the periodic check on this broker's loaded topics.
func (s *Server) backlogQuotaLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.BacklogQuotaCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
			for _, t := range s.loadedTopics() {
				ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
				t.checkBacklogQuota(ctx)
				cancel()
			}
		}
	}
}

// loadedTopics lists the topics loaded on this broker.
func (s *Server) loadedTopics() []*topic {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	return ts
}
