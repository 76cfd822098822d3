package compacttest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func pulsarClient(t *testing.T) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + srv.PulsarAddr(), OperationTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func admin(t *testing.T, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPulsarReadCompacted: pulsar-client-go produces keyed messages
// (unbatched and batched), key deletions (empty payload) and keyless
// messages; PUT .../compaction runs compaction (GET .../compaction reports
// SUCCESS); a ReadCompacted consumer from the earliest position sees the
// latest message of each live key with its original message id, then the
// messages produced after compaction; a normal consumer still sees
// everything. A Shared subscription asking for compacted reads is refused.
func TestPulsarReadCompacted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topic := "persistent://public/default/" + uniqueName("compacted")
	c := pulsarClient(t)
	type sent struct {
		id    pulsar.MessageID
		value string
	}
	latest := map[string]sent{}
	total := 0
	for i, batching := range []bool{false, true} {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: !batching,
			BatchingMaxMessages: 8, BatchingMaxPublishDelay: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 100)
		n := 0
		for round := 0; round < 3; round++ {
			for k := 0; k < 10; k++ {
				key, val := fmt.Sprintf("key-%d", k), fmt.Sprintf("v-%d-%d-%d", i, round, k)
				if i == 1 && round == 2 && k < 3 {
					val = "" // deletes the key
				}
				n++
				p.SendAsync(ctx, &pulsar.ProducerMessage{Key: key, Payload: []byte(val)}, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err == nil {
						latest[key] = sent{id: id, value: val}
					}
					done <- err
				})
			}
		}
		n++ // a keyless message: compaction drops it
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("no-key")}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { done <- err })
		if err := p.FlushWithCtx(ctx); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < n; j++ {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		total += n
		p.Close()
	}
	base := "/admin/v2/persistent/" + strings.TrimPrefix(topic, "persistent://") + "/compaction"
	if code, body := admin(t, http.MethodPut, base); code != http.StatusNoContent {
		t.Fatalf("PUT compaction: %d %s", code, body)
	}
	for i := 0; ; i++ {
		code, body := admin(t, http.MethodGet, base)
		var st struct{ Status, LastError string }
		if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
			t.Fatalf("GET compaction: %d %s", code, body)
		}
		if st.Status == "SUCCESS" {
			break
		}
		if st.Status == "ERROR" || i > 200 {
			t.Fatalf("compaction status %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	live := 0 // keys whose latest message at compaction time is not a deletion
	for _, s := range latest {
		if s.value != "" {
			live++
		}
	}
	// One more message after compaction (key-0 was deleted before): served
	// from the topic itself, above the compaction horizon.
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.Send(ctx, &pulsar.ProducerMessage{Key: "key-0", Payload: []byte("after")})
	if err != nil {
		t.Fatal(err)
	}
	latest["key-0"] = sent{id: id, value: "after"}
	total++
	p.Close()

	want := map[string]sent{}
	for k, s := range latest {
		if s.value != "" {
			want[k] = s
		}
	}
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "shared", Type: pulsar.Shared, ReadCompacted: true}); err == nil {
		t.Fatal("a Shared subscription with ReadCompacted was accepted")
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "compacted", Type: pulsar.Exclusive,
		ReadCompacted: true, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]sent{}
	placeholders, seen := 0, 0
	for got["key-0"].value != "after" {
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		m, err := cons.Receive(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("receive after %d messages (%v): %v", seen, got, err)
		}
		_ = cons.Ack(m)
		if m.Key() == "" && len(m.Payload()) == 0 {
			placeholders++ // a compacted-out batch slot: pulsar-client-go does not skip them (see compaction.go)
			continue
		}
		seen++
		if prev, dup := got[m.Key()]; dup && m.Key() != "key-0" {
			t.Fatalf("key %s delivered twice: %q then %q", m.Key(), prev.value, m.Payload())
		}
		got[m.Key()] = sent{id: m.ID(), value: string(m.Payload())}
	}
	if len(got) != len(want) {
		t.Fatalf("compacted read saw keys %v, want %v", got, want)
	}
	for k, w := range want {
		g := got[k]
		if g.value != w.value || g.id.LedgerID() != w.id.LedgerID() || g.id.EntryID() != w.id.EntryID() || g.id.BatchIdx() != w.id.BatchIdx() {
			t.Fatalf("key %s: got %q at %v, want %q at %v", k, g.value, g.id, w.value, w.id)
		}
	}
	if seen != live+1 {
		t.Fatalf("compacted read delivered %d messages, want %d", seen, live+1)
	}
	t.Logf("readCompacted: %d messages (+%d compacted-out placeholders) of %d produced", seen, placeholders, total)

	// Without readCompacted everything is still there.
	full, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "full", Type: pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	for i := 0; i < total; i++ {
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		m, err := full.Receive(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("full read: message %d of %d: %v", i, total, err)
		}
		_ = full.Ack(m)
	}
}
