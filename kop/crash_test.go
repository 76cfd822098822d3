package kop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/internal/testserver"
)

// TestOffsetsStableAcrossSIGKILL: Kafka and Pulsar producers write to one
// Pulsar topic; after a SIGKILL and a restart on the same data dir a Kafka
// reader sees the same records at the same dense offsets, new records
// continue the sequence, and the group's committed offset (its Pulsar
// subscription) survived.
func TestOffsetsStableAcrossSIGKILL(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{})
	topic := newTopic("kop-crash")
	group := "crash-group"

	kc := kafkaClient(t, ts, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(2*time.Millisecond), kgo.AllowAutoTopicCreation())
	var recs []*kgo.Record
	for i := 0; i < 30; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i % 3)), Value: []byte(fmt.Sprintf("kafka-%d", i))})
	}
	if err := kc.ProduceSync(ctxT(t, time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pc := pulsarClient(t, ts)
	prod, err := pc.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 5, BatchingMaxPublishDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		prod.SendAsync(ctxT(t, time.Minute), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("pulsar-%d", i))}, nil)
	}
	if err := prod.FlushWithCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := readAll(t, ts, topic, 50)
	// The group commits offset 42 before the crash.
	gc := kafkaClient(t, ts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	if err := gc.CommitRecords(ctxT(t, time.Minute), &kgo.Record{Topic: topic, Partition: 0, Offset: 41, LeaderEpoch: -1}); err != nil {
		t.Fatal(err)
	}
	gc.Close()

	ts.Kill()
	ts.Restart()

	after := readAll(t, ts, topic, 50)
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("offset %d was %q before the crash, %q after", i, before[i], after[i])
		}
	}
	kc2 := kafkaClient(t, ts, kgo.DefaultProduceTopic(topic))
	res := kc2.ProduceSync(ctxT(t, time.Minute), &kgo.Record{Value: []byte("after-crash")})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	if off := res[0].Record.Offset; off != 50 {
		t.Fatalf("first offset after the restart %d, want 50", off)
	}
	if b, ok := backlog(t, ts, topic, group); !ok || b != 51-42 {
		t.Fatalf("group subscription after the crash: present %v backlog %d, want %d", ok, b, 51-42)
	}
}

// readAll reads offsets [0, n) of partition 0 with a direct (group-less)
// Kafka consumer and checks that they are dense.
func readAll(t *testing.T, ts *testserver.Server, topic string, n int) []string {
	t.Helper()
	kc := kafkaClient(t, ts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer kc.Close()
	ctx := ctxT(t, time.Minute)
	out := make([]string, 0, n)
	for len(out) < n {
		fs := kc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(out), n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(len(out)) {
				t.Fatalf("offset %d, want %d", r.Offset, len(out))
			}
			out = append(out, string(r.Value))
		})
	}
	return out
}
