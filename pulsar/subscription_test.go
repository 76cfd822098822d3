package pulsar

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func subscribeT(t *testing.T, c pulsar.Client, opts pulsar.ConsumerOptions) pulsar.Consumer {
	t.Helper()
	if opts.SubscriptionInitialPosition == 0 {
		opts.SubscriptionInitialPosition = pulsar.SubscriptionPositionEarliest
	}
	cons, err := c.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	return cons
}

func producerT(t *testing.T, c pulsar.Client, opts pulsar.ProducerOptions) pulsar.Producer {
	t.Helper()
	if opts.BatchingMaxPublishDelay == 0 {
		opts.BatchingMaxPublishDelay = 5 * time.Millisecond
	}
	p, err := c.CreateProducer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestExclusiveRejectsSecondConsumer(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("excl")
	subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
	_, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
	if err == nil || !strings.Contains(err.Error(), "ConsumerBusy") {
		t.Fatalf("second exclusive consumer: %v", err)
	}
	_, err = c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err == nil {
		t.Fatal("shared consumer joined an exclusive subscription")
	}
}

func TestFailover(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("failover")
	// On a non-partitioned topic Pulsar picks the active consumer by the
	// topic name's hash on a ring of the consumers' names: find which of
	// "a" and "b" that is for this topic, and subscribe it first.
	first, second := "a", "b"
	if failoverActive([]*consumer{{name: "a"}, {name: "b"}}, topic, -1).name == "b" {
		first, second = "b", "a"
	}
	c1 := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover, Name: first, AckWithResponse: true})
	c2 := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover, Name: second})
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	produceN(t, p, 20, "f")
	ctx := ctxT(t, 30*time.Second)
	for i := 0; i < 10; i++ {
		m, err := c1.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != fmt.Sprintf("f-%d", i) {
			t.Fatalf("active consumer got %q", m.Payload())
		}
		_ = c1.Ack(m)
	}
	// The active consumer leaves: the standby takes over from the first
	// unacknowledged message.
	c1.Close()
	for i := 10; i < 20; i++ {
		m, err := c2.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != fmt.Sprintf("f-%d", i) {
			t.Fatalf("standby got %q want f-%d", m.Payload(), i)
		}
		_ = c2.Ack(m)
	}
}

func TestSharedSpreadsAndDelivers(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("shared")
	var cs []pulsar.Consumer
	for i := 0; i < 3; i++ {
		cs = append(cs, subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, ReceiverQueueSize: 10}))
	}
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const n = 300
	produceN(t, p, n, "s")
	var mu sync.Mutex
	seen := map[string]int{}
	per := make([]int, len(cs))
	var wg sync.WaitGroup
	ctx := ctxT(t, 30*time.Second)
	for i, cons := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := len(seen) >= n
				mu.Unlock()
				if done {
					return
				}
				rctx, cancel := contextWithTimeout(ctx, 500*time.Millisecond)
				m, err := cons.Receive(rctx)
				cancel()
				if err != nil {
					if ctx.Err() != nil {
						return // the check below reports what is missing
					}
					continue
				}
				_ = cons.Ack(m)
				mu.Lock()
				seen[string(m.Payload())]++
				per[i]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("got %d distinct messages, want %d", len(seen), n)
	}
	for i, k := range per {
		if k == 0 {
			t.Fatalf("consumer %d got nothing: %v", i, per)
		}
	}
}

func TestKeySharedPerKeyOrder(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("keyshared")
	type rec struct {
		consumer int
		key      string
		seq      int
	}
	var mu sync.Mutex
	var got []rec
	const keys, perKey = 8, 40
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := func(idx int) pulsar.Consumer {
		cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, ReceiverQueueSize: 5})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rctx, cancel := contextWithTimeout(ctxT(t, time.Minute), 200*time.Millisecond)
				m, err := cons.Receive(rctx)
				cancel()
				if err != nil {
					if rctx.Err() == nil {
						return // consumer closed
					}
					continue
				}
				seq, _ := strconv.Atoi(strings.Split(string(m.Payload()), "-")[1])
				mu.Lock()
				got = append(got, rec{idx, m.Key(), seq})
				mu.Unlock()
				_ = cons.Ack(m)
			}
		}()
		return cons
	}
	start(0)
	leaving := start(1)
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, BatcherBuilderType: pulsar.KeyBasedBatchBuilder})
	ctx := ctxT(t, time.Minute)
	send := func(from, to int) {
		for s := from; s < to; s++ {
			for k := 0; k < keys; k++ {
				p.SendAsync(ctx, &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", k), Payload: []byte(fmt.Sprintf("k%d-%d", k, s))}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err != nil {
						t.Error(err)
					}
				})
			}
		}
		_ = p.FlushWithCtx(ctxT(t, 30*time.Second))
	}
	send(0, perKey/3)
	start(2) // a consumer joins mid-stream: key ownership moves
	send(perKey/3, 2*perKey/3)
	leaving.Close() // a consumer leaves with entries in flight: they move on in order
	send(2*perKey/3, perKey)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		distinct := map[string]bool{}
		for _, r := range got {
			distinct[fmt.Sprintf("%s-%d", r.key, r.seq)] = true
		}
		mu.Unlock()
		if len(distinct) >= keys*perKey || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	// Every message arrives (redeliveries may repeat some), and each
	// consumer sees each key's messages in order: an entry handed over from
	// a leaving consumer comes before any later entry of its key.
	last := map[[2]string]int{}
	seen := map[string]bool{}
	owners := map[string]map[int]bool{}
	for _, r := range got {
		k := [2]string{strconv.Itoa(r.consumer), r.key}
		if prev, ok := last[k]; ok && r.seq <= prev {
			t.Fatalf("consumer %d, key %s: %d after %d", r.consumer, r.key, r.seq, prev)
		}
		last[k] = r.seq
		seen[fmt.Sprintf("%s-%d", r.key, r.seq)] = true
		if owners[r.key] == nil {
			owners[r.key] = map[int]bool{}
		}
		owners[r.key][r.consumer] = true
	}
	if len(seen) != keys*perKey {
		t.Fatalf("received %d distinct of %d", len(seen), keys*perKey)
	}
	used := map[int]bool{}
	for _, o := range owners {
		for c := range o {
			used[c] = true
		}
	}
	if len(used) < 2 {
		t.Fatalf("all keys went to one consumer: %v", owners)
	}
}

func TestAcksIndividualCumulativeBatchIndex(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)

	t.Run("individual", func(t *testing.T) {
		topic := newTopic("ackind")
		p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		produceN(t, p, 10, "a")
		cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, AckWithResponse: true})
		ctx := ctxT(t, 30*time.Second)
		for i := 0; i < 10; i++ {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				if err := cons.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
		}
		cons.Close()
		// Only the unacknowledged odd messages come back.
		cons2 := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
		for i := 1; i < 10; i += 2 {
			m, err := cons2.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Payload()) != fmt.Sprintf("a-%d", i) {
				t.Fatalf("got %q want a-%d", m.Payload(), i)
			}
			if m.RedeliveryCount() == 0 {
				t.Fatalf("redelivered message without redelivery count")
			}
		}
	})

	t.Run("cumulative", func(t *testing.T) {
		topic := newTopic("ackcum")
		p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		produceN(t, p, 10, "c")
		cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
		ctx := ctxT(t, 30*time.Second)
		var m pulsar.Message
		for i := 0; i < 6; i++ {
			var err error
			if m, err = cons.Receive(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := cons.AckIDCumulative(m.ID()); err != nil {
			t.Fatal(err)
		}
		cons.Close()
		cons2 := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
		m2, err := cons2.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m2.Payload()) != "c-6" {
			t.Fatalf("after cumulative ack of c-5 got %q", m2.Payload())
		}
	})

	t.Run("batch-index", func(t *testing.T) {
		topic := newTopic("ackbatch")
		p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 10, BatchingMaxPublishDelay: time.Second})
		ids := produceN(t, p, 10, "b")
		if ids[9].EntryID() != ids[0].EntryID() || ids[9].BatchIdx() != 9 {
			t.Fatalf("expected one batch of 10, got %v .. %v", ids[0], ids[9])
		}
		cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, EnableBatchIndexAcknowledgment: true, AckWithResponse: true})
		ctx := ctxT(t, 30*time.Second)
		for i := 0; i < 10; i++ {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i < 7 {
				if err := cons.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
		}
		cons.Close()
		cons2 := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, EnableBatchIndexAcknowledgment: true})
		var rest []string
		for i := 0; i < 3; i++ {
			m, err := cons2.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rest = append(rest, string(m.Payload()))
		}
		sort.Strings(rest)
		if fmt.Sprint(rest) != "[b-7 b-8 b-9]" {
			t.Fatalf("batch-index acked messages redelivered: %v", rest)
		}
	})
}

func TestNackRedelivery(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("nack")
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	produceN(t, p, 5, "n")
	cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, NackRedeliveryDelay: 100 * time.Millisecond})
	ctx := ctxT(t, 30*time.Second)
	for i := 0; i < 5; i++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) == "n-2" {
			cons.Nack(m)
		} else {
			_ = cons.Ack(m)
		}
	}
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload()) != "n-2" || m.RedeliveryCount() != 1 {
		t.Fatalf("redelivered %q count %d", m.Payload(), m.RedeliveryCount())
	}
	_ = cons.Ack(m)
}

func TestSeekByIDAndTime(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("seek")
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	ids := produceN(t, p, 10, "k")
	// Publish times have millisecond resolution: keep mid strictly between
	// the two groups.
	time.Sleep(3 * time.Millisecond)
	mid := time.Now()
	time.Sleep(3 * time.Millisecond)
	produceN(t, p, 10, "l")
	cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", StartMessageIDInclusive: true})
	ctx := ctxT(t, 30*time.Second)
	for i := 0; i < 20; i++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = cons.Ack(m)
	}
	if err := cons.Seek(ids[3]); err != nil {
		t.Fatal(err)
	}
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload()) != "k-3" {
		t.Fatalf("after seek to k-3 got %q", m.Payload())
	}
	if err := cons.SeekByTime(mid); err != nil {
		t.Fatal(err)
	}
	m, err = cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload()) != "l-0" {
		t.Fatalf("after seek by time got %q", m.Payload())
	}
}

func TestReader(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("reader")
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic})
	ids := produceN(t, p, 20, "r")
	ctx := ctxT(t, 30*time.Second)
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 20; i++ {
		if !r.HasNext() {
			t.Fatalf("HasNext false at %d", i)
		}
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != fmt.Sprintf("r-%d", i) {
			t.Fatalf("reader got %q", m.Payload())
		}
	}
	if r.HasNext() {
		t.Fatal("HasNext true at the end")
	}
	// A reader from a message id (exclusive) and inclusive.
	r2, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: ids[9], StartMessageIDInclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	m, err := r2.Next(ctx)
	if err != nil || string(m.Payload()) != "r-9" {
		t.Fatalf("inclusive reader got %v %v", m, err)
	}
	r3, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: ids[9]})
	if err != nil {
		t.Fatal(err)
	}
	defer r3.Close()
	m, err = r3.Next(ctx)
	if err != nil || string(m.Payload()) != "r-10" {
		t.Fatalf("exclusive reader got %v %v", m, err)
	}
}
