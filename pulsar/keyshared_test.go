package pulsar

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/nereusstream/nereus-go/pulsar/keyshared"
	"github.com/nereusstream/nereus-go/pulsar/pb"
)

// TestKeySharedAssignmentMatchesPulsar: with named consumers, every key
// reaches the consumer Apache Pulsar's consistent-hashing selector picks
// (keyshared.Ring is checked against Pulsar's own output in its golden
// test), so keys spread the way they would on Apache Pulsar.
func TestKeySharedAssignmentMatchesPulsar(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("ks-assign")
	names := []string{"c1", "c2", "c3"}
	ring := keyshared.NewRing[string](keyshared.DefaultPoints)
	var mu sync.Mutex
	got := map[string]map[string]bool{} // key -> consumer names
	total := 0
	for _, n := range names {
		ring.Add(n, n)
		cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, Name: n})
		go func(name string, cons pulsar.Consumer) {
			for {
				m, err := cons.Receive(ctxT(t, time.Minute))
				if err != nil {
					return
				}
				mu.Lock()
				if got[m.Key()] == nil {
					got[m.Key()] = map[string]bool{}
				}
				got[m.Key()][name] = true
				total++
				mu.Unlock()
				_ = cons.Ack(m)
			}
		}(n, cons)
	}
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, BatcherBuilderType: pulsar.KeyBasedBatchBuilder})
	const keys, perKey = 30, 5
	ctx := ctxT(t, time.Minute)
	for i := 0; i < perKey; i++ {
		for k := 0; k < keys; k++ {
			p.SendAsync(ctx, &pulsar.ProducerMessage{Key: fmt.Sprintf("key-%d", k), Payload: []byte("x")}, nil)
		}
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := total
		mu.Unlock()
		if n >= keys*perKey || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	used := map[string]bool{}
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("key-%d", k)
		want, _ := ring.Select(keyshared.StickyKeyHash([]byte(key), keyshared.ConsistentRange))
		if len(got[key]) != 1 || !got[key][want] {
			t.Errorf("key %s went to %v, Pulsar's selector says %s", key, got[key], want)
		}
		used[want] = true
	}
	if len(used) < 2 {
		t.Fatalf("the selector put every key on one consumer: %v", used)
	}
}

// TestKeySharedModeMismatchIsBusy: a STICKY consumer cannot join an
// AUTO_SPLIT subscription (Pulsar refuses a different key-shared policy).
func TestKeySharedModeMismatchIsBusy(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("ks-mode")
	subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared})
	_, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared,
		KeySharedPolicy: &pulsar.KeySharedPolicy{Mode: pulsar.KeySharedPolicyModeSticky, HashRanges: []int{0, 65535}}})
	if err == nil {
		t.Fatal("STICKY consumer joined an AUTO_SPLIT subscription")
	}
}

func TestFailoverActiveFollowsPriorityLevels(t *testing.T) {
	mk := func(name string, prio int32) *consumer { return &consumer{name: name, priority: prio} }
	a, b2, c1, d1 := mk("a", 2), mk("b", 2), mk("c", 1), mk("d", 1)
	all := []*consumer{a, b2, c1, d1}
	// Partitions spread over the highest-priority level only (1 < 2).
	for p, want := range []*consumer{c1, d1, c1, d1} {
		if got := failoverActive(all, "persistent://public/default/t-partition-"+fmt.Sprint(p), p); got != want {
			t.Fatalf("partition %d: active %s, want %s", p, got.name, want.name)
		}
	}
	// A non-partitioned topic picks by the topic name's hash on a ring of
	// the highest-priority consumers, never a lower level.
	for i := 0; i < 20; i++ {
		got := failoverActive(all, fmt.Sprintf("persistent://public/default/t%d", i), -1)
		if got != c1 && got != d1 {
			t.Fatalf("topic %d: active %s is not on the highest level", i, got.name)
		}
	}
}

// TestSharedPriorityDispatchOrder replays the example of Pulsar's
// AbstractDispatcherMultipleConsumers.getNextConsumer javadoc: C1..C3 on
// level 0 with 2, 1, 1 permits, C4, C5 on level 1 with 2, 1 — the order is
// C1, C2, C3, C1, C4, C5, C4.
func TestSharedPriorityDispatchOrder(t *testing.T) {
	s := &subscription{subType: pb.CommandSubscribe_Shared}
	for i, spec := range []struct {
		prio    int32
		permits int64
	}{{1, 2}, {0, 2}, {0, 1}, {1, 1}, {0, 1}} {
		s.consumers = append(s.consumers, &consumer{name: fmt.Sprint(i), priority: spec.prio, permits: spec.permits})
		s.sortByPriority()
	}
	// Arrival order within a level: level 0 = consumers 1, 2, 4; level 1 = 0, 3.
	names := map[string]string{"1": "C1", "2": "C2", "4": "C3", "0": "C4", "3": "C5"}
	var order []string
	for {
		c := s.nextShared()
		if c == nil {
			break
		}
		c.permits--
		order = append(order, names[c.name])
	}
	if fmt.Sprint(order) != "[C1 C2 C3 C1 C4 C5 C4]" {
		t.Fatalf("dispatch order %v", order)
	}
}
