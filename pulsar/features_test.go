package pulsar

// Client features that rest on broker behaviour, each with pulsar-client-go
// against the broker under test (a real nereus serve by default; Apache
// Pulsar standalone with NEREUS_PULSAR_URL / NEREUS_PULSAR_HTTP_URL, which
// is how these tests were checked against the reference broker).

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/nereusstream/nereus-go/internal/testserver"
)

func partitionedTopic(t *testing.T, b *broker, prefix string, n int) string {
	t.Helper()
	topic := newTopic(prefix)
	mustHTTP(t, "PUT", b.HTTPURL+"/admin/v2/persistent/"+strings.TrimPrefix(topic, "persistent://")+"/partitions", fmt.Sprint(n))
	return topic
}

func recvN(t *testing.T, c pulsar.Consumer, n int, d time.Duration) []pulsar.Message {
	t.Helper()
	ctx := ctxT(t, d)
	var out []pulsar.Message
	for len(out) < n {
		m, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", len(out), n, err)
		}
		out = append(out, m)
	}
	return out
}

// TestDeadLetterWithInitialSubscription: a message nacked MaxDeliveries
// times goes to the dead-letter topic, whose producer (created by the
// client) makes the initial subscription, so a consumer subscribing to it
// afterwards finds the message.
func TestDeadLetterWithInitialSubscription(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("dlq-src")
	dlq := topic + "-DLQ"
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "work", Type: pulsar.Shared,
		NackRedeliveryDelay: 100 * time.Millisecond,
		DLQ:                 &pulsar.DLQPolicy{MaxDeliveries: 2, DeadLetterTopic: dlq, InitialSubscriptionName: "dlq-init"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic})
	produceN(t, p, 1, "poison")
	ctx := ctxT(t, 30*time.Second)
	for i := 0; i < 2; i++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.RedeliveryCount() != uint32(i) {
			t.Fatalf("delivery %d has redelivery count %d", i, m.RedeliveryCount())
		}
		cons.Nack(m)
	}
	// The client now publishes it to the DLQ; its producer created the
	// initial subscription, which keeps it for a later consumer.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := httpDo(t, "GET", b.HTTPURL+"/admin/v2/persistent/"+strings.TrimPrefix(dlq, "persistent://")+"/subscriptions", "")
		if strings.Contains(body, "dlq-init") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DLQ initial subscription not created: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dc, err := c.Subscribe(pulsar.ConsumerOptions{Topic: dlq, SubscriptionName: "dlq-init"})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	m := recvN(t, dc, 1, 30*time.Second)[0]
	if string(m.Payload()) != "poison-0" {
		t.Fatalf("DLQ got %q", m.Payload())
	}
	if m.Properties()["REAL_TOPIC"] == "" || m.Properties()["ORIGIN_MESSAGE_ID"] == "" {
		t.Fatalf("DLQ message properties %v", m.Properties())
	}
}

// TestNackBackoffRedelivers: with a nack backoff policy each redelivery
// carries the next redelivery count.
func TestNackBackoffRedelivers(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("nack-backoff")
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		NackBackoffPolicy: constantBackoff(150 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	produceN(t, producerT(t, c, pulsar.ProducerOptions{Topic: topic}), 1, "n")
	ctx := ctxT(t, 30*time.Second)
	for want := uint32(0); want < 3; want++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.RedeliveryCount() != want {
			t.Fatalf("redelivery count %d, want %d", m.RedeliveryCount(), want)
		}
		cons.Nack(m)
	}
}

type constantBackoff time.Duration

func (d constantBackoff) Next(uint32) time.Duration { return time.Duration(d) }

// TestReaderSeekByTime: a reader repositioned by publish time starts at the
// first message published at or after it.
func TestReaderSeekByTime(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("reader-seek-time")
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	produceN(t, p, 5, "early")
	time.Sleep(50 * time.Millisecond)
	mid := time.Now()
	time.Sleep(50 * time.Millisecond)
	produceN(t, p, 5, "late")
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.SeekByTime(mid); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	m, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload()) != "late-0" {
		t.Fatalf("after SeekByTime the reader got %q, want late-0", m.Payload())
	}
}

// TestReaderOnPartitionedTopic reads every partition.
func TestReaderOnPartitionedTopic(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := partitionedTopic(t, b, "reader-parted", 3)
	produceN(t, producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), 12, "r")
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seen := map[string]bool{}
	ctx := ctxT(t, 30*time.Second)
	for len(seen) < 12 {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("after %d: %v", len(seen), err)
		}
		seen[string(m.Payload())] = true
	}
	if r.HasNext() {
		t.Fatal("HasNext after every message")
	}
}

// TestZeroQueueConsumerOnPartitionedTopic: pulsar-client-go refuses a
// zero-queue consumer on a partitioned topic (Apache Pulsar's behaviour
// too), and serves one per partition.
func TestZeroQueueConsumerOnPartitionedTopic(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := partitionedTopic(t, b, "zq-parted", 2)
	produceN(t, producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), 6, "z")
	zq, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "zq", EnableZeroQueueConsumer: true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err == nil {
		// A client version that supports it must then receive everything.
		defer zq.Close()
		if got := recvN(t, zq, 6, 30*time.Second); len(got) != 6 {
			t.Fatalf("zero-queue consumer got %d", len(got))
		}
		return
	}
	part := topic + "-partition-1"
	zq, err = c.Subscribe(pulsar.ConsumerOptions{Topic: part, SubscriptionName: "zq", EnableZeroQueueConsumer: true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatalf("zero-queue consumer on one partition: %v", err)
	}
	defer zq.Close()
	ctx := ctxT(t, 30*time.Second)
	m, err := zq.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	zq.Ack(m)
}

// TestLastMessageIDsOfMultiTopicConsumers: partitioned, multi-topic and
// regex consumers report the last message id of every topic they read.
func TestLastMessageIDsOfMultiTopicConsumers(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	parted := partitionedTopic(t, b, "lmid-parted", 2)
	p := producerT(t, c, pulsar.ProducerOptions{Topic: parted, DisableBatching: true})
	produceN(t, p, 4, "p")
	pc, err := c.Subscribe(pulsar.ConsumerOptions{Topic: parted, SubscriptionName: "lm"})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ids, err := pc.GetLastMessageIDs()
	if err != nil || len(ids) != 2 {
		t.Fatalf("partitioned consumer last ids %v %v", ids, err)
	}
	for _, id := range ids {
		if id.EntryID() < 0 || !strings.Contains(id.Topic(), "-partition-") {
			t.Fatalf("last id %v of %s", id, id.Topic())
		}
	}
	prefix := newTopic("lmid-multi")
	t1, t2 := prefix+"-a", prefix+"-b"
	produceN(t, producerT(t, c, pulsar.ProducerOptions{Topic: t1}), 2, "a")
	produceN(t, producerT(t, c, pulsar.ProducerOptions{Topic: t2}), 3, "b")
	mc, err := c.Subscribe(pulsar.ConsumerOptions{Topics: []string{t1, t2}, SubscriptionName: "lm-multi"})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if ids, err := mc.GetLastMessageIDs(); err != nil || len(ids) != 2 {
		t.Fatalf("multi-topic consumer last ids %v %v", ids, err)
	}
	rc, err := c.Subscribe(pulsar.ConsumerOptions{TopicsPattern: strings.TrimPrefix(prefix, "persistent://") + "-.*", SubscriptionName: "lm-regex"})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if ids, err := rc.GetLastMessageIDs(); err != nil || len(ids) != 2 {
		t.Fatalf("regex consumer last ids %v %v", ids, err)
	}
}

// TestReconsumeLaterOnRegexConsumer: a regex consumer with retry enabled
// gets a reconsumed message again from the retry topic, with its
// RECONSUMETIMES property, after the delay (a delayed delivery: delays
// within the broker's tick, 1s, are not held, as in Apache Pulsar).
func TestReconsumeLaterOnRegexConsumer(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	prefix := newTopic("retry-regex")
	topic := prefix + "-x"
	produceN(t, producerT(t, c, pulsar.ProducerOptions{Topic: topic}), 1, "again")
	// The regex consumer's retry topic is named after the subscription
	// ("<ns>/-<sub>-RETRY"): a unique name keeps runs apart.
	rc, err := c.Subscribe(pulsar.ConsumerOptions{TopicsPattern: strings.TrimPrefix(prefix, "persistent://") + "-.*",
		SubscriptionName: fmt.Sprintf("re-%d", topicSeq.Add(1)), Type: pulsar.Shared, RetryEnable: true, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		DLQ: &pulsar.DLQPolicy{MaxDeliveries: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	m := recvN(t, rc, 1, 30*time.Second)[0]
	start := time.Now()
	rc.ReconsumeLater(m, 2*time.Second)
	m2 := recvN(t, rc, 1, 30*time.Second)[0]
	t.Logf("first from %s, reconsumed from %s after %v", m.Topic(), m2.Topic(), time.Since(start))
	if string(m2.Payload()) != "again-0" || m2.Properties()["RECONSUMETIMES"] != "1" {
		t.Fatalf("reconsumed %q props %v", m2.Payload(), m2.Properties())
	}
	if waited := time.Since(start); waited < 1900*time.Millisecond {
		t.Fatalf("redelivered after %v, before its 2s delay", waited)
	}
	rc.Ack(m2)
}

// TestDelayedDelivery: DeliverAfter / DeliverAt messages on a Shared
// subscription arrive no earlier than asked; others are not held up. (As
// in Apache Pulsar, a delay that ends within the broker's tick, 1s, is not
// held: the delays here are longer.)
func TestDelayedDelivery(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("delayed")
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sent := time.Now()
	ctx := ctxT(t, 30*time.Second)
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("later"), DeliverAfter: 2500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("at"), DeliverAt: sent.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("now")}); err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Duration{}
	for len(got) < 3 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("received %v: %v", got, err)
		}
		got[string(m.Payload())] = time.Since(sent)
		cons.Ack(m)
	}
	if got["later"] < 2400*time.Millisecond || got["at"] < 1900*time.Millisecond {
		t.Fatalf("delayed messages arrived too early: %v", got)
	}
	if got["now"] > got["at"] {
		t.Fatalf("an undelayed message waited behind delayed ones: %v", got)
	}
}

// TestDelayedDeliverySurvivesRestart: a delayed message is neither lost nor
// delivered early when the broker is SIGKILLed and restarted before its
// time (the delay is in the stored entry; the index is rebuilt from the
// mark-delete position).
func TestDelayedDeliverySurvivesRestart(t *testing.T) {
	if isolateClientRace(t) {
		return
	}
	ts := testserver.Start(t, testserver.Options{DisableKafka: true})
	b := &broker{URL: "pulsar://" + ts.PulsarAddr(), HTTPURL: ts.URL(), external: true, proc: ts}
	c := b.client(t)
	topic := newTopic("delayed-restart")
	// Acks with receipts: the ack of "now" is persisted before the kill,
	// so "now" is not redelivered after it.
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, AckWithResponse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	ctx := ctxT(t, 60*time.Second)
	due := time.Now().Add(4 * time.Second)
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after-restart"), DeliverAt: due}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("now")}); err != nil {
		t.Fatal(err)
	}
	if m := recvN(t, cons, 1, 30*time.Second)[0]; string(m.Payload()) != "now" {
		t.Fatalf("got %q first", m.Payload())
	} else if err := cons.Ack(m); err != nil {
		t.Fatal(err)
	}
	ts.Kill()
	ts.Restart()
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload()) != "after-restart" || time.Now().Before(due.Add(-100*time.Millisecond)) {
		t.Fatalf("got %q at %v before its time %v", m.Payload(), time.Now(), due)
	}
	cons.Ack(m)
	isolatedPassed(t)
}
