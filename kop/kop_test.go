package kop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/internal/testserver"
)

// One real `nereus serve` (Kafka and Pulsar listeners, durable storage in
// its own data dir) serves the tests of this package; the crash test starts
// its own.
var (
	sharedOnce sync.Once
	shared     *testserver.Server
	sharedErr  error
	topicSeq   atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

func server(t *testing.T) *testserver.Server {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = testserver.Launch(testserver.Options{}) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func newTopic(prefix string) string {
	return fmt.Sprintf("persistent://public/default/%s-%d-%d", prefix, time.Now().UnixNano()%1e9, topicSeq.Add(1))
}

func pulsarClient(t *testing.T, ts *testserver.Server) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + ts.PulsarAddr(), OperationTimeout: 30 * time.Second,
		ConnectionTimeout: 10 * time.Second,
		Logger:            plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func kafkaClient(t *testing.T, ts *testserver.Server, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(ts.KafkaAddr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// adminJSON calls the Pulsar admin REST API of the server.
func adminJSON(t *testing.T, ts *testserver.Server, method, path, body string, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL()+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

func adminPath(topic string) string {
	return "/admin/v2/persistent/" + strings.TrimPrefix(topic, "persistent://")
}

type subStats struct {
	MsgBacklog int64 `json:"msgBacklog"`
}

func backlog(t *testing.T, ts *testserver.Server, topic, sub string) (int64, bool) {
	t.Helper()
	var st struct {
		Subscriptions map[string]subStats `json:"subscriptions"`
	}
	adminJSON(t, ts, "GET", adminPath(topic)+"/stats", "", &st)
	s, ok := st.Subscriptions[sub]
	return s.MsgBacklog, ok
}

// TestKafkaProducerPulsarConsumer: franz-go (idempotent, snappy, keyed,
// with headers and timestamps) produces to a partitioned Pulsar topic
// created with the Pulsar admin API; pulsar-client-go consumes every
// message with key, properties and event time intact, and each message's
// broker index is the Kafka offset the producer was given.
func TestKafkaProducerPulsarConsumer(t *testing.T) {
	ts := server(t)
	topic := newTopic("kafka-to-pulsar")
	adminJSON(t, ts, "PUT", adminPath(topic)+"/partitions", "3", nil)

	kc := kafkaClient(t, ts, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	const n = 90
	base := time.UnixMilli(1_700_000_000_000)
	type sent struct {
		partition int32
		offset    int64
	}
	want := map[string]sent{}
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", i%9)), Value: []byte(fmt.Sprintf("value-%d", i)),
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
			Headers:   []kgo.RecordHeader{{Key: "seq", Value: []byte(fmt.Sprint(i))}, {Key: "origin", Value: []byte("franz-go")}}})
	}
	res := kc.ProduceSync(ctxT(t, time.Minute), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	perPartition := map[int32][]int64{}
	for _, r := range res {
		want[string(r.Record.Value)] = sent{r.Record.Partition, r.Record.Offset}
		perPartition[r.Record.Partition] = append(perPartition[r.Record.Partition], r.Record.Offset)
	}
	for p, offs := range perPartition {
		seen := map[int64]bool{}
		for _, o := range offs {
			seen[o] = true
		}
		for o := int64(0); o < int64(len(offs)); o++ {
			if !seen[o] {
				t.Fatalf("partition %d: offsets %v are not dense from 0", p, offs)
			}
		}
	}

	pc := pulsarClient(t, ts)
	cons, err := pc.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "pulsar-side",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx := ctxT(t, time.Minute)
	for got := 0; got < n; got++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("after %d messages: %v", got, err)
		}
		v := string(m.Payload())
		w, ok := want[v]
		if !ok {
			t.Fatalf("unexpected or duplicate message %q", v)
		}
		delete(want, v)
		var i int
		fmt.Sscanf(v, "value-%d", &i)
		if m.Key() != fmt.Sprintf("key-%d", i%9) || m.Properties()["seq"] != fmt.Sprint(i) || m.Properties()["origin"] != "franz-go" {
			t.Fatalf("message %q: key %q properties %v", v, m.Key(), m.Properties())
		}
		if et := m.EventTime(); !et.Equal(base.Add(time.Duration(i) * time.Millisecond)) {
			t.Fatalf("message %q: event time %v", v, et)
		}
		if !strings.HasSuffix(m.Topic(), fmt.Sprintf("-partition-%d", w.partition)) {
			t.Fatalf("message %q from %s, Kafka partition %d", v, m.Topic(), w.partition)
		}
		if idx := m.Index(); idx == nil || int64(*idx) != w.offset {
			t.Fatalf("message %q: broker index %v, Kafka offset %d", v, idx, w.offset)
		}
		_ = cons.Ack(m)
	}
}

// TestPulsarProducerKafkaGroup: a batching Pulsar producer writes; a
// franz-go consumer group reads every message once, at dense offsets, with
// key, headers and timestamp; its commits are the Pulsar subscription named
// like the group, whose backlog Pulsar's stats report, and a Pulsar
// consumer on that subscription resumes where the group stopped.
func TestPulsarProducerKafkaGroup(t *testing.T) {
	ts := server(t)
	topic := newTopic("pulsar-to-kafka")
	pc := pulsarClient(t, ts)
	prod, err := pc.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 8,
		BatchingMaxPublishDelay: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 60
	event := time.UnixMilli(1_650_000_000_000)
	send := func(from, to int) {
		var wg sync.WaitGroup
		var failed atomic.Value
		for i := from; i < to; i++ {
			wg.Add(1)
			prod.SendAsync(context.Background(), &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i%4), Payload: []byte(fmt.Sprintf("m-%d", i)),
				Properties: map[string]string{"i": fmt.Sprint(i)}, EventTime: event.Add(time.Duration(i) * time.Second)},
				func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err != nil {
						failed.Store(err)
					}
					wg.Done()
				})
		}
		if err := prod.FlushWithCtx(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			t.Fatal(err)
		}
	}
	send(0, n)

	group := fmt.Sprintf("kafka-group-%d", topicSeq.Add(1))
	kc := kafkaClient(t, ts, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx := ctxT(t, time.Minute)
	next := int64(0)
	for next < n {
		fs := kc.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("after %d records: %v", next, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Fatalf("offset %d, want %d (dense, in order)", r.Offset, next)
			}
			i := int(next)
			if string(r.Value) != fmt.Sprintf("m-%d", i) || string(r.Key) != fmt.Sprintf("k%d", i%4) ||
				!r.Timestamp.Equal(event.Add(time.Duration(i)*time.Second)) || len(r.Headers) != 1 ||
				r.Headers[0].Key != "i" || string(r.Headers[0].Value) != fmt.Sprint(i) {
				t.Fatalf("record %d: key %q value %q ts %v headers %v", i, r.Key, r.Value, r.Timestamp, r.Headers)
			}
			next++
		})
	}
	if err := kc.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	if b, ok := backlog(t, ts, topic, group); !ok || b != 0 {
		t.Fatalf("subscription %q: present %v, backlog %d, want 0", group, ok, b)
	}
	send(n, n+7)
	if b, _ := backlog(t, ts, topic, group); b != 7 {
		t.Fatalf("backlog after 7 more messages: %d", b)
	}
	kc.Close() // leave the group

	cons, err := pc.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: group, Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for i := n; i < n+7; i++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != fmt.Sprintf("m-%d", i) {
			t.Fatalf("Pulsar consumer of the group's subscription got %q, want m-%d", m.Payload(), i)
		}
		_ = cons.Ack(m)
	}
}
