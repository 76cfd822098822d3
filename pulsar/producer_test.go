package pulsar

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func TestProducerAccessModesAndNames(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("access")
	p1 := producerT(t, c, pulsar.ProducerOptions{Topic: topic, Name: "only-one"})
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "only-one", SendTimeout: time.Second}); err == nil ||
		!strings.Contains(err.Error(), "ProducerBusy") {
		t.Fatalf("duplicate producer name: %v", err)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive}); err == nil ||
		!strings.Contains(err.Error(), "ProducerFenced") {
		t.Fatalf("exclusive producer next to a shared one: %v (Pulsar answers ProducerFenced)", err)
	}
	p1.Close()
	ex := producerT(t, c, pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil {
		t.Fatal("shared producer admitted next to an exclusive one")
	}
	if _, err := ex.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	// Broker-generated names are unique.
	a := producerT(t, c, pulsar.ProducerOptions{Topic: newTopic("names")})
	bb := producerT(t, c, pulsar.ProducerOptions{Topic: newTopic("names")})
	if a.Name() == "" || a.Name() == bb.Name() {
		t.Fatalf("generated names %q %q", a.Name(), bb.Name())
	}
}

// TestWaitForExclusiveQueues: a WaitForExclusive producer is answered "not
// ready" while another producer holds the topic, and becomes ready (its
// CreateProducer returns) once that producer leaves, as on Apache Pulsar.
func TestWaitForExclusiveQueues(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("wait-excl")
	holder := producerT(t, c, pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	type result struct {
		p   pulsar.Producer
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "waiter", ProducerAccessMode: pulsar.ProducerAccessModeWaitForExclusive})
		done <- result{p, err}
	}()
	// While queued, the topic stats count it as waiting and CreateProducer
	// has not returned.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st struct {
			WaitingProducers int `json:"waitingProducersCount"`
		}
		getJSON(t, b.HTTPURL+"/admin/v2/"+strings.Replace(topic, "://", "/", 1)+"/stats", &st)
		if st.WaitingProducers == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("waiting producer never queued")
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("WaitForExclusive producer returned while the topic was held: %v", r.err)
	default:
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil || !strings.Contains(err.Error(), "ProducerBusy") {
		t.Fatalf("shared producer while one waits: %v", err)
	}
	holder.Close()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("waiting producer not promoted after the holder left")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.p.Close()
	if _, err := r.p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: []byte("mine now")}); err != nil {
		t.Fatal(err)
	}
}

// TestMaxMessageSizeAdvertised: the broker's max message size reaches the
// client in CONNECTED, so an oversized message fails on the client's
// MessageTooBig path (as against Apache Pulsar), while one just below it
// is stored.
func TestMaxMessageSizeAdvertised(t *testing.T) {
	b := startInProcessBroker(t, Config{MaxMessageSize: 64 << 10})
	c := b.client(t)
	p := producerT(t, c, pulsar.ProducerOptions{Topic: newTopic("maxsize"), DisableBatching: true})
	ctx := ctxT(t, 20*time.Second)
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 65<<10)}); err == nil ||
		!strings.Contains(err.Error(), "MaxMessageSize") {
		t.Fatalf("oversized send: %v, want the client's MessageTooBig", err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 60<<10)}); err != nil {
		t.Fatal(err)
	}
}
