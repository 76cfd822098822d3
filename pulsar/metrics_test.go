package pulsar

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

// TestMetricsUsePulsarNames: a real `nereus serve` exposes the topic's
// counters and backlog on /metrics under Apache Pulsar's names and labels.
func TestMetricsUsePulsarNames(t *testing.T) {
	b := startBroker(t, Config{})
	if b.proc == nil {
		testenv.SkipOrFail(t, "needs a nereus serve process (its /metrics), not an external or in-process broker")
	}
	c := b.client(t)
	topic := newTopic("metrics")
	cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "m", Type: pulsar.Shared})
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	ctx := ctxT(t, time.Minute)
	for i := 0; i < 10; i++ {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("m")}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ { // consume and ack 4 of 10: backlog 6
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.AckWithTxn(m, nil); err != nil {
			t.Fatal(err)
		}
	}
	labels := `cluster="standalone",namespace="public/default",topic="` + topic + `"`
	want := []string{
		"pulsar_in_messages_total{" + labels + "} 10",
		"pulsar_msg_backlog{" + labels + "} 6",
		"pulsar_producers_count{" + labels + "} 1",
		"pulsar_consumers_count{" + labels + "} 1",
		// Prometheus writes labels in name order.
		`pulsar_subscription_back_log{cluster="standalone",namespace="public/default",subscription="m",topic="` + topic + `"} 6`,
	}
	deadline := time.Now().Add(30 * time.Second)
	var body string
	for {
		resp, err := http.Get(b.HTTPURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(raw)
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, name := range []string{"pulsar_out_messages_total{", "brk_ml_cursor_persistZookeeperSucceed{", "nereus_pulsar_dispatched_entries_total{"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}
