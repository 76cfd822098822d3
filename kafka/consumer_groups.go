package kafka

// Glue between the KIP-848 consumer group coordinator (package kconsumer)
// and the storage boundary: subscriptions are resolved against the topics
// kstore knows (internal topics never match a regex, as in Kafka).

import (
	"context"
	"regexp"
	"time"

	"github.com/nereusstream/nereus-go/kafka/kconsumer"
	"github.com/nereusstream/nereus-go/kafka/kgroup"
	"github.com/nereusstream/nereus-go/kafka/kstore"
)

type consumerTopics struct{ store *kstore.Store }

func (c consumerTopics) Topics(ctx context.Context, names []string, regex string) ([]kconsumer.Topic, error) {
	var out []kconsumer.Topic
	seen := map[string]bool{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		t, err := c.store.Topic(ctx, name)
		if err != nil {
			return // not (yet) a topic: nothing to assign
		}
		out = append(out, kconsumer.Topic{Name: name, ID: kconsumer.TopicID(t.ID), Partitions: int32(len(t.Partitions))})
	}
	for _, n := range names {
		add(n)
	}
	if regex != "" {
		re, err := regexp.Compile("^(?:" + regex + ")$")
		if err != nil {
			return nil, err
		}
		all, err := c.store.ListTopics(ctx)
		if err != nil {
			return out, nil // the next heartbeat resolves again
		}
		for _, n := range all {
			if !isInternalTopic(n) && re.MatchString(n) {
				add(n)
			}
		}
	}
	return out, nil
}

// classicGroupActive reports whether a classic group with members uses id.
func (s *Server) classicGroupActive(id string) bool {
	active := false
	s.groups.Do(id, false, func(g *kgroup.Group, now time.Time) {
		active = g != nil && g.State() != kgroup.Empty && g.State() != kgroup.Dead
	})
	return active
}
