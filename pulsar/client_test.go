package pulsar

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func produceN(t *testing.T, p pulsar.Producer, n int, prefix string) []pulsar.MessageID {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	ids := make([]pulsar.MessageID, n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		i := i
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("%s-%d", prefix, i))}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			ids[i] = id
			errs <- err
		})
	}
	if err := p.FlushWithCtx(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func TestProduceConsumeBatchingOnOff(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	for _, batching := range []bool{false, true} {
		t.Run(fmt.Sprintf("batching=%v", batching), func(t *testing.T) {
			topic := newTopic("basic")
			cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: !batching, BatchingMaxPublishDelay: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			const n = 500
			ids := produceN(t, p, n, "m")
			for i := 1; i < n; i++ {
				if ids[i].LedgerID() != ids[0].LedgerID() || ids[i].EntryID() < ids[i-1].EntryID() {
					t.Fatalf("ids not ordered: %v then %v", ids[i-1], ids[i])
				}
			}
			if batching && ids[n-1].EntryID() >= n-1 {
				t.Logf("batching produced %d entries for %d messages", ids[n-1].EntryID()+1, n)
			}
			ctx := ctxT(t, 30*time.Second)
			for i := 0; i < n; i++ {
				m, err := cons.Receive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := string(m.Payload()), fmt.Sprintf("m-%d", i); got != want {
					t.Fatalf("message %d: got %q want %q", i, got, want)
				}
				if m.Index() == nil || *m.Index() != uint64(i) {
					t.Fatalf("broker index of message %d: %v", i, m.Index())
				}
				if err := cons.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
