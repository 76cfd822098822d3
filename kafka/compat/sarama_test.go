package compat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

type saramaHandler struct {
	mu    sync.Mutex
	seen  map[[2]int64]string
	ready chan struct{}
	once  sync.Once
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error {
	h.once.Do(func() { close(h.ready) })
	return nil
}
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.mu.Lock()
		h.seen[[2]int64{int64(msg.Partition), msg.Offset}] = string(msg.Value)
		h.mu.Unlock()
		sess.MarkMessage(msg, "")
	}
	return nil
}

func (h *saramaHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

// TestSaramaProducerConsumerGroup: an idempotent sarama SyncProducer writes
// to a 4-partition topic created by sarama's ClusterAdmin, and two sarama
// consumer-group members consume everything and commit.
func TestSaramaProducerConsumerGroup(t *testing.T) {
	topic := uniqueTopic("sarama")
	group := uniqueTopic("sarama-group")
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "sarama-test"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Compression = sarama.CompressionSnappy
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond

	admin, err := sarama.NewClusterAdmin([]string{broker.Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 4, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}

	prod, err := sarama.NewSyncProducer([]string{broker.Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 400
	for i := 0; i < n; i++ {
		_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint(i % 13)), Value: sarama.StringEncoder(fmt.Sprint(i))})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := &saramaHandler{seen: map[[2]int64]string{}, ready: make(chan struct{})}
	var wg sync.WaitGroup
	var groups []sarama.ConsumerGroup
	for m := 0; m < 2; m++ {
		cg, err := sarama.NewConsumerGroup([]string{broker.Addr}, group, cfg)
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, cg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
					t.Logf("consume: %v", err)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	for h.count() < n {
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", h.count(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // one more auto-commit round
	cancel()
	for _, cg := range groups {
		_ = cg.Close()
	}
	wg.Wait()

	offs, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for p, b := range offs.Blocks[topic] {
		if b.Err != sarama.ErrNoError {
			t.Fatalf("partition %d: %v", p, b.Err)
		}
		sum += b.Offset
	}
	if sum != n {
		t.Fatalf("committed offsets sum to %d, want %d", sum, n)
	}
	t.Logf("sarama: produced and group-consumed %d records; committed offsets sum %d", n, sum)
}
