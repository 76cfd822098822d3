package pulsar

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestTerminateTopic: pulsar-admin topics terminate answers the last
// message id; afterwards producers are refused with TopicTerminatedError
// and consumers still read everything published before.
func TestTerminateTopic(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("terminate")
	cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	ctx := ctxT(t, 30*time.Second)
	var last pulsar.MessageID
	for i := 0; i < 3; i++ {
		id, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("m")})
		if err != nil {
			t.Fatal(err)
		}
		last = id
	}
	var got struct {
		LedgerID int64 `json:"ledgerId"`
		EntryID  int64 `json:"entryId"`
	}
	code, body := httpDo(t, "POST", b.HTTPURL+"/admin/v2/"+strings.Replace(topic, "://", "/", 1)+"/terminate", "")
	if code != 200 || !strings.Contains(body, `"entryId":`) {
		t.Fatalf("terminate: %d %s", code, body)
	}
	getJSON(t, b.HTTPURL+"/admin/v2/"+strings.Replace(topic, "://", "/", 1)+"/lastMessageId", &got)
	if got.LedgerID != last.LedgerID() || got.EntryID != last.EntryID() {
		t.Fatalf("last id after terminate %+v, producer saw %v", got, last)
	}
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil || !strings.Contains(err.Error(), "TopicTerminated") {
		t.Fatalf("producer on a terminated topic: %v", err)
	}
	for i := 0; i < 3; i++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = cons.Ack(m)
	}
}
