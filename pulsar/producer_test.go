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
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive}); err == nil {
		t.Fatal("exclusive producer admitted next to a shared one")
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
