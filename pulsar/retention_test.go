package pulsar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/nereusstream/nereus-go/internal/testserver"
)

var nsSeq atomic.Int64

// policyBroker is a real nereus serve whose retention and backlog-quota
// checks run every second.
func policyBroker(t *testing.T) *broker {
	t.Helper()
	ts := testserver.Start(t, testserver.Options{DisableKafka: true,
		Args: []string{"--retention-interval", "1s", "--pulsar-backlog-quota-check-interval", "1s"}})
	return &broker{URL: "pulsar://" + ts.PulsarAddr(), HTTPURL: ts.URL(), external: true, proc: ts}
}

func newNamespace(t *testing.T, b *broker) string {
	t.Helper()
	ns := fmt.Sprintf("public/pol-%d-%d", time.Now().UnixNano()%1e6, nsSeq.Add(1))
	if code, body := httpDo(t, "PUT", b.HTTPURL+"/admin/v2/namespaces/"+ns, ""); code/100 != 2 {
		t.Fatalf("create namespace: %d %s", code, body)
	}
	return ns
}

func mustHTTP(t *testing.T, method, url, body string) string {
	t.Helper()
	code, out := httpDo(t, method, url, body)
	if code/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, url, code, out)
	}
	return out
}

// firstEarliest is the payload of the first message a reader from the
// earliest position gets ("" if none within a second).
func firstEarliest(t *testing.T, c pulsar.Client, topic string) string {
	t.Helper()
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	m, err := r.Next(ctx)
	if err != nil {
		return ""
	}
	return string(m.Payload())
}

func receiveAck(t *testing.T, c pulsar.Consumer, n int, prefix string, from int) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	for i := from; i < from+n; i++ {
		m, err := c.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%s-%d", prefix, i); string(m.Payload()) != want {
			t.Fatalf("got %q, want %q", m.Payload(), want)
		}
		if err := c.AckWithTxn(m, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetentionKeepsUnacknowledged: with namespace retention (0, 0) what
// every durable subscription acknowledged goes at the next retention pass,
// and nothing a subscription still needs does; a namespace without a policy
// (broker default: keep everything) keeps acknowledged messages.
func TestRetentionKeepsUnacknowledged(t *testing.T) {
	b := policyBroker(t)
	c := b.client(t)
	ns := newNamespace(t, b)
	mustHTTP(t, "POST", b.HTTPURL+"/admin/v2/namespaces/"+ns+"/retention", `{"retentionTimeInMinutes":0,"retentionSizeInMB":0}`)
	topic := "persistent://" + ns + "/ret"
	opts := func(name string) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{Topic: topic, SubscriptionName: name, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			AckWithResponse: true}
	}
	fast, err := c.Subscribe(opts("fast"))
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	slow, err := c.Subscribe(opts("slow"))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for i := 0; i < 20; i++ {
		if _, err := p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("m-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	receiveAck(t, fast, 20, "m", 0)
	receiveAck(t, slow, 10, "m", 0)

	// Control: the default namespace keeps acknowledged messages.
	control := newTopic("ret-control")
	cc, err := c.Subscribe(pulsar.ConsumerOptions{Topic: control, SubscriptionName: "s", AckWithResponse: true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	produceN(t, producerT(t, c, pulsar.ProducerOptions{Topic: control}), 5, "c")
	receiveAck(t, cc, 5, "c", 0)

	// The slow subscription holds messages 10..19; 0..9 go.
	began := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for firstEarliest(t, c, topic) != "m-10" {
		if time.Now().After(deadline) {
			_, streams := httpDo(t, "GET", b.HTTPURL+"/v1/streams", "")
			_, stats := httpDo(t, "GET", b.HTTPURL+"/admin/v2/persistent/"+ns+"/ret/stats", "")
			t.Fatalf("acknowledged messages not removed: earliest is %q\n%s\n%s\n%s", firstEarliest(t, c, topic), streams, stats, b.proc.LogTail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("trimmed to the slow subscription after %v", time.Since(began))
	receiveAck(t, slow, 10, "m", 10) // everything it had not acknowledged is still there
	for firstEarliest(t, c, topic) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("fully acknowledged topic still has %q", firstEarliest(t, c, topic))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("trimmed completely after %v", time.Since(began))
	if got := firstEarliest(t, c, control); got != "c-0" {
		t.Fatalf("default retention removed acknowledged messages: earliest %q", got)
	}

	// Topic-level retention overrides the namespace's and is reported.
	mustHTTP(t, "POST", b.HTTPURL+"/admin/v2/persistent/"+ns+"/ret/retention", `{"retentionTimeInMinutes":-1,"retentionSizeInMB":-1}`)
	var rp struct{ RetentionTimeInMinutes, RetentionSizeInMB int64 }
	if err := json.Unmarshal([]byte(mustHTTP(t, "GET", b.HTTPURL+"/admin/v2/persistent/"+ns+"/ret/retention", "")), &rp); err != nil ||
		rp.RetentionTimeInMinutes != -1 {
		t.Fatalf("topic retention %+v %v", rp, err)
	}
	if code, _ := httpDo(t, "POST", b.HTTPURL+"/admin/v2/namespaces/"+ns+"/retention", `{"retentionTimeInMinutes":-2,"retentionSizeInMB":0}`); code != http.StatusPreconditionFailed {
		t.Fatalf("invalid retention accepted: %d", code)
	}
	// Topic backlog quotas: stored, reported, validated against retention.
	tq := b.HTTPURL + "/admin/v2/persistent/" + ns + "/ret/backlogQuota"
	mustHTTP(t, "POST", tq+"?backlogQuotaType=message_age", `{"limitTime":600,"policy":"consumer_backlog_eviction"}`)
	if got := mustHTTP(t, "GET", b.HTTPURL+"/admin/v2/persistent/"+ns+"/ret/backlogQuotaMap", ""); !strings.Contains(got, `"message_age":{"limit":-1,"limitSize":-1,"limitTime":600,"policy":"consumer_backlog_eviction"}`) {
		t.Fatalf("topic backlogQuotaMap %s", got)
	}
	if code, _ := httpDo(t, "POST", tq, `{"limitSize":1,"policy":"drop_everything"}`); code != http.StatusBadRequest {
		t.Fatalf("unknown policy accepted: %d", code)
	}
	mustHTTP(t, "POST", b.HTTPURL+"/admin/v2/persistent/"+ns+"/ret/retention", `{"retentionTimeInMinutes":10,"retentionSizeInMB":1}`)
	if code, _ := httpDo(t, "POST", tq, `{"limitSize":2097152,"policy":"producer_exception"}`); code != http.StatusPreconditionFailed {
		t.Fatalf("quota above the retention size accepted: %d", code)
	}
	mustHTTP(t, "DELETE", tq+"?backlogQuotaType=message_age", "")
	if got := mustHTTP(t, "GET", b.HTTPURL+"/admin/v2/persistent/"+ns+"/ret/backlogQuotaMap", ""); got != "{}" && got != "{}\n" {
		t.Fatalf("after removal: %q", got)
	}
}

func setNamespaceQuota(t *testing.T, b *broker, ns, policy string) {
	t.Helper()
	mustHTTP(t, "POST", b.HTTPURL+"/admin/v2/namespaces/"+ns+"/backlogQuota?backlogQuotaType=destination_storage",
		`{"limitSize":20000,"limitTime":-1,"policy":"`+policy+`"}`)
	got := mustHTTP(t, "GET", b.HTTPURL+"/admin/v2/namespaces/"+ns+"/backlogQuotaMap", "")
	if !strings.Contains(got, `"policy":"`+policy+`"`) || !strings.Contains(got, `"limitSize":20000`) {
		t.Fatalf("backlogQuotaMap %s", got)
	}
}

// fillUntil sends 1 KiB messages until send fails or n were sent.
func fillUntil(p pulsar.Producer, n int) (int, error) {
	payload := make([]byte, 1024)
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: payload})
		cancel()
		if err != nil {
			return i, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return n, nil
}

// TestBacklogQuotaProducerException: as Apache Pulsar 4.0.7 shows it to
// pulsar-client-go — once the backlog exceeds the quota the broker closes
// the producer, whose reconnect is refused with
// ProducerBlockedQuotaExceededException (sends fail with "producer
// blocked"), new producers are refused too, and after the backlog drains
// the producer reconnects and sends again.
func TestBacklogQuotaProducerException(t *testing.T) {
	if isolateClientRace(t) {
		return
	}
	b := policyBroker(t)
	c := b.client(t)
	ns := newNamespace(t, b)
	setNamespaceQuota(t, b, ns, "producer_exception")
	topic := "persistent://" + ns + "/t"
	slow, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: 10 * time.Second})
	sent, err := fillUntil(p, 2000)
	if !errors.Is(err, pulsar.ErrProducerBlockedQuotaExceeded) {
		t.Fatalf("after %d sends: %v, want producer blocked", sent, err)
	}
	if sent < 15 {
		t.Fatalf("blocked after only %d KiB (quota 20000 bytes)", sent)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceededException") {
		t.Fatalf("new producer over quota: %v", err)
	}
	var st struct {
		BacklogSize, BacklogQuotaLimitSize int64
	}
	_ = json.Unmarshal([]byte(mustHTTP(t, "GET", b.HTTPURL+"/admin/v2/persistent/"+ns+"/t/stats", "")), &st)
	if st.BacklogSize <= 20000 || st.BacklogQuotaLimitSize != 20000 {
		t.Fatalf("stats %+v", st)
	}
	if err := slow.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	slow.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after")})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("producer did not recover after the backlog drained: %v", err)
		}
	}
	isolatedPassed(t)
}

// TestBacklogQuotaProducerRequestHold: the producer is closed and its
// reconnects are refused with ProducerBlockedQuotaExceededError, which
// pulsar-client-go retries, holding its sends; they complete once the
// backlog drains.
func TestBacklogQuotaProducerRequestHold(t *testing.T) {
	if isolateClientRace(t) {
		return
	}
	b := policyBroker(t)
	c := b.client(t)
	ns := newNamespace(t, b)
	setNamespaceQuota(t, b, ns, "producer_request_hold")
	topic := "persistent://" + ns + "/t"
	slow, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: 3 * time.Second})
	sent, err := fillUntil(p, 2000)
	if !errors.Is(err, pulsar.ErrSendTimeout) {
		t.Fatalf("after %d sends: %v, want the send held until its timeout", sent, err)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceededError") {
		t.Fatalf("new producer over quota: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		_, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("held")})
		done <- err
	}()
	if err := slow.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	slow.Close()
	if err := <-done; err != nil {
		t.Fatalf("held send after the backlog drained: %v", err)
	}
	isolatedPassed(t)
}

// TestBacklogQuotaConsumerEviction: producers keep going and the slowest
// subscription loses its oldest messages, keeping its backlog near the
// quota.
func TestBacklogQuotaConsumerEviction(t *testing.T) {
	b := policyBroker(t)
	c := b.client(t)
	ns := newNamespace(t, b)
	setNamespaceQuota(t, b, ns, "consumer_backlog_eviction")
	topic := "persistent://" + ns + "/t"
	slow, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow", ReceiverQueueSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if sent, err := fillUntil(p, 150); err != nil {
		t.Fatalf("producer blocked under an eviction quota after %d: %v", sent, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st struct {
			Subscriptions map[string]struct{ MsgBacklog int64 } `json:"subscriptions"`
		}
		_ = json.Unmarshal([]byte(mustHTTP(t, "GET", b.HTTPURL+"/admin/v2/persistent/"+ns+"/t/stats", "")), &st)
		if bl := st.Subscriptions["slow"].MsgBacklog; bl > 0 && bl <= 30 {
			break // about 20 KB of 1 KiB messages left
		}
		if time.Now().After(deadline) {
			t.Fatalf("backlog not evicted: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
