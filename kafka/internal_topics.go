package kafka

// Kafka's internal topics. Kafka lists __consumer_offsets (and, once
// transactions are used, __transaction_state) in Metadata with is_internal
// set; regex-subscribing clients and tools expect to see and skip them.
// Nereus keeps group offsets and transaction state in its metadata store,
// not in these topics, so they exist as ordinary, empty, compacted
// one-partition topics that the server creates at start: Metadata,
// ListOffsets, Fetch and DescribeConfigs answer for them like for any
// topic, while clients may not produce to or delete them.

import (
	"context"
	"errors"
	"fmt"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

const (
	topicConsumerOffsets  = "__consumer_offsets"
	topicTransactionState = "__transaction_state"
)

var errInternalTopic = errors.New("kafka: internal topic")

func isInternalTopic(name string) bool {
	return name == topicConsumerOffsets || name == topicTransactionState
}

// ensureInternalTopics creates the internal topics if they do not exist.
func (s *Server) ensureInternalTopics(ctx context.Context) error {
	for _, name := range []string{topicConsumerOffsets, topicTransactionState} {
		if _, err := s.store.Topic(ctx, name); err == nil {
			continue
		}
		_, err := s.store.CreateTopic(ctx, name, 1, kstore.TopicConfigs{kstore.ConfigCleanupPolicy: "compact"}, false)
		if err != nil && !errors.Is(err, kstore.ErrTopicExists) {
			return fmt.Errorf("kafka: create internal topic %s: %w", name, err)
		}
	}
	return nil
}
