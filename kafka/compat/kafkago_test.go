package compat

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// TestKafkaGoWriterReaderGroup: kafka-go's legacy Conn creates the topic,
// its Writer (Transport path) produces with zstd, and a Reader in a
// consumer group (legacy Conn path with old fixed versions) consumes and
// commits.
func TestKafkaGoWriterReaderGroup(t *testing.T) {
	topic := uniqueTopic("kafkago")
	group := uniqueTopic("kafkago-group")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	conn, err := kafkago.DialContext(ctx, "tcp", broker.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.CreateTopics(kafkago.TopicConfig{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()

	w := &kafkago.Writer{Addr: kafkago.TCP(broker.Addr), Topic: topic, Balancer: &kafkago.Hash{},
		RequiredAcks: kafkago.RequireAll, Compression: compress.Zstd, BatchTimeout: 5 * time.Millisecond}
	const n = 300
	msgs := make([]kafkago.Message, n)
	for i := range msgs {
		msgs[i] = kafkago.Message{Key: []byte(strconv.Itoa(i % 11)), Value: []byte(strconv.Itoa(i))}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{broker.Addr}, GroupID: group, Topic: topic,
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond, CommitInterval: 0,
		HeartbeatInterval: 200 * time.Millisecond, SessionTimeout: 6 * time.Second, StartOffset: kafkago.FirstOffset})
	seen := map[string]bool{}
	for len(seen) < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("fetch after %d: %v", len(seen), err)
		}
		seen[fmt.Sprintf("%d/%d", m.Partition, m.Offset)] = true
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// The committed offsets, read back through kafka-go's Client (admin
	// path), cover the topic.
	cl := &kafkago.Client{Addr: kafkago.TCP(broker.Addr)}
	resp, err := cl.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0, 1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			t.Fatal(p.Error)
		}
		sum += p.CommittedOffset
	}
	if sum != n {
		t.Fatalf("committed offsets sum to %d, want %d", sum, n)
	}
	t.Logf("kafka-go: wrote %d zstd records, group reader consumed and committed them", n)
}
