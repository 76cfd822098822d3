package pulsar

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func adminTopicURL(b *broker, topic string) string {
	return b.HTTPURL + "/admin/v2/persistent/" + strings.TrimPrefix(topic, "persistent://")
}

func subscriptionsOf(t *testing.T, b *broker, topic string) []string {
	t.Helper()
	var subs []string
	if err := json.Unmarshal([]byte(mustHTTP(t, "GET", adminTopicURL(b, topic)+"/subscriptions", "")), &subs); err != nil {
		t.Fatal(err)
	}
	return subs
}

// TestAdminSubscriptionAndTopicPaths: pulsar-admin's subscription paths on a
// partitioned topic reach every partition, growing the topic gives new
// partitions the existing subscriptions, internal stats describe cursors,
// skip / reset-cursor by message id move them, and dedup policies are set
// per topic and per namespace.
func TestAdminSubscriptionAndTopicPaths(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := partitionedTopic(t, b, "admin-paths", 2)
	mustHTTP(t, "PUT", adminTopicURL(b, topic)+"/subscription/s", "")
	for i := 0; i < 2; i++ {
		if subs := subscriptionsOf(t, b, fmt.Sprintf("%s-partition-%d", topic, i)); len(subs) != 1 || subs[0] != "s" {
			t.Fatalf("partition %d subscriptions %v", i, subs)
		}
	}
	mustHTTP(t, "POST", adminTopicURL(b, topic)+"/partitions", "3")
	if subs := subscriptionsOf(t, b, topic+"-partition-2"); len(subs) != 1 || subs[0] != "s" {
		t.Fatalf("new partition's subscriptions %v", subs)
	}
	p0 := topic + "-partition-0"
	produceN(t, producerT(t, c, pulsar.ProducerOptions{Topic: p0, DisableBatching: true}), 6, "m")
	mustHTTP(t, "POST", adminTopicURL(b, p0)+"/subscription/s/skip/2", "")
	var is struct {
		NumberOfEntries    int64  `json:"numberOfEntries"`
		LastConfirmedEntry string `json:"lastConfirmedEntry"`
		Cursors            map[string]struct {
			MarkDeletePosition          string `json:"markDeletePosition"`
			IndividuallyDeletedMessages string `json:"individuallyDeletedMessages"`
		} `json:"cursors"`
	}
	if err := json.Unmarshal([]byte(mustHTTP(t, "GET", adminTopicURL(b, p0)+"/internalStats", "")), &is); err != nil {
		t.Fatal(err)
	}
	if is.NumberOfEntries != 6 || !strings.HasSuffix(is.LastConfirmedEntry, ":5") || !strings.HasSuffix(is.Cursors["s"].MarkDeletePosition, ":1") {
		t.Fatalf("internal stats after skip 2: %+v", is)
	}
	mustHTTP(t, "GET", adminTopicURL(b, topic)+"/partitioned-internalStats", "")
	// A consumer of s starts at message 2; reset by message id to 4.
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: p0, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	ms := recvN(t, cons, 4, 30*time.Second)
	if string(ms[0].Payload()) != "m-2" {
		t.Fatalf("after skip the consumer starts at %q", ms[0].Payload())
	}
	id := ms[2].ID() // m-4
	mustHTTP(t, "POST", adminTopicURL(b, p0)+"/subscription/s/resetcursor", fmt.Sprintf(`{"ledgerId":%d,"entryId":%d}`, id.LedgerID(), id.EntryID()))
	if m := recvN(t, cons, 1, 30*time.Second)[0]; string(m.Payload()) != "m-4" {
		t.Fatalf("after reset-cursor to m-4 got %q", m.Payload())
	}
	cons.Close()
	mustHTTP(t, "POST", adminTopicURL(b, p0)+"/subscription/s/expireMessages/0", "")
	mustHTTP(t, "DELETE", adminTopicURL(b, topic)+"/subscription/s", "")
	for i := 0; i < 3; i++ {
		if subs := subscriptionsOf(t, b, fmt.Sprintf("%s-partition-%d", topic, i)); len(subs) != 0 {
			t.Fatalf("partition %d still has %v", i, subs)
		}
	}

	// Non-partitioned create and deduplication policies.
	np := newTopic("admin-np")
	mustHTTP(t, "PUT", adminTopicURL(b, np), "")
	if code, _ := httpDo(t, "PUT", adminTopicURL(b, np), ""); code != 409 {
		t.Fatalf("second create: %d", code)
	}
	mustHTTP(t, "POST", adminTopicURL(b, np)+"/deduplicationEnabled", "false")
	if got := strings.TrimSpace(mustHTTP(t, "GET", adminTopicURL(b, np)+"/deduplicationEnabled", "")); got != "false" {
		t.Fatalf("topic dedup %q", got)
	}
	ns := b.HTTPURL + "/admin/v2/namespaces/public/default/deduplication"
	mustHTTP(t, "POST", ns, "true")
	if got := strings.TrimSpace(mustHTTP(t, "GET", ns, "")); got != "true" {
		t.Fatalf("namespace dedup %q", got)
	}
	mustHTTP(t, "DELETE", ns, "")
	mustHTTP(t, "DELETE", adminTopicURL(b, np)+"/deduplicationEnabled", "")
}

// TestUnloadWhileConsuming: pulsar-admin topics unload in the middle of
// producing and consuming; the clients reconnect through lookup and every
// message arrives, none lost.
func TestUnloadWhileConsuming(t *testing.T) {
	if isolateClientRace(t) {
		return
	}
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("unload")
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const n = 200
	var wg sync.WaitGroup
	wg.Add(1)
	var sendErr error
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			if _, err := p.Send(ctxT(t, 30*time.Second), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("u-%d", i))}); err != nil {
				sendErr = err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	seen := map[string]bool{}
	ctx := ctxT(t, 60*time.Second)
	unloads := 0
	for len(seen) < n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("after %d distinct messages: %v", len(seen), err)
		}
		seen[string(m.Payload())] = true
		cons.Ack(m)
		if (len(seen) == 50 || len(seen) == 120) && unloads < 2 {
			unloads++
			mustHTTP(t, "PUT", adminTopicURL(b, topic)+"/unload", "")
		}
	}
	wg.Wait()
	if sendErr != nil {
		t.Fatalf("producer across unloads: %v", sendErr)
	}
	if unloads != 2 {
		t.Fatalf("%d unloads", unloads)
	}
	isolatedPassed(t)
}
