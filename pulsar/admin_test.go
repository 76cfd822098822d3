package pulsar

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminAndPartitionedTopicOverHTTPLookup(t *testing.T) {
	b := startBroker(t, Config{})
	if b.HTTPURL == "" {
		testenv.SkipOrFail(t, "external broker without NEREUS_PULSAR_HTTP_URL")
	}
	h := b.HTTPURL
	tenant := fmt.Sprintf("acme%d", time.Now().UnixNano()%1e6)
	for _, step := range []struct {
		method, path, body string
		want               int
	}{
		{"PUT", "/admin/v2/tenants/" + tenant, `{"allowedClusters":["standalone"]}`, 204},
		{"PUT", "/admin/v2/tenants/" + tenant, `{}`, 409},
		{"PUT", "/admin/v2/namespaces/" + tenant + "/ns", "", 204},
		{"PUT", "/admin/v2/persistent/" + tenant + "/ns/parted/partitions", "3", 204},
		{"PUT", "/admin/v2/persistent/" + tenant + "/ns/plain", "", 204},
		{"PUT", "/admin/v2/persistent/" + tenant + "/nope/plain", "", 404},
		{"DELETE", "/admin/v2/tenants/" + tenant, "", 409},
	} {
		if code, body := httpDo(t, step.method, h+step.path, step.body); code != step.want {
			t.Fatalf("%s %s: %d %s (want %d)", step.method, step.path, code, body, step.want)
		}
	}
	if code, body := httpDo(t, "GET", h+"/admin/v2/persistent/"+tenant+"/ns/parted/partitions", ""); code != 200 || !strings.Contains(body, `"partitions":3`) {
		t.Fatalf("partitions: %d %s", code, body)
	}
	_, body := httpDo(t, "GET", h+"/admin/v2/persistent/"+tenant+"/ns", "")
	var topics []string
	_ = json.Unmarshal([]byte(body), &topics)
	sort.Strings(topics)
	if len(topics) != 4 || topics[3] != "persistent://"+tenant+"/ns/plain" {
		t.Fatalf("topics: %v", topics)
	}

	// A client with an http:// service URL: lookups over HTTP, data over
	// the binary protocol, a partitioned producer and consumer.
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: h, OperationTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topic := "persistent://" + tenant + "/ns/parted"
	cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	ctx := ctxT(t, 30*time.Second)
	parts := map[int32]bool{}
	for i := 0; i < 30; i++ {
		id, err := p.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i), Payload: []byte(fmt.Sprintf("p-%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		parts[id.PartitionIdx()] = true
	}
	if len(parts) < 2 {
		t.Fatalf("messages went to partitions %v", parts)
	}
	got := map[string]bool{}
	for i := 0; i < 30; i++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got[string(m.Payload())] = true
		if i < 20 {
			_ = cons.Ack(m)
		}
	}
	if len(got) != 30 {
		t.Fatalf("received %d distinct", len(got))
	}
	// Stats show the backlog of the subscription across partitions.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := httpDo(t, "GET", h+"/admin/v2/persistent/"+tenant+"/ns/parted/partitioned-stats", "")
		var st struct {
			MsgInCounter  int64 `json:"msgInCounter"`
			Subscriptions map[string]struct {
				MsgBacklog int64 `json:"msgBacklog"`
			} `json:"subscriptions"`
		}
		_ = json.Unmarshal([]byte(body), &st)
		if code == 200 && st.MsgInCounter == 30 && st.Subscriptions["s"].MsgBacklog == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitioned stats: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, body := httpDo(t, "GET", h+"/admin/v2/persistent/"+tenant+"/ns/parted-partition-0/stats", "")
	if code != 200 || !strings.Contains(body, `"msgRateIn"`) || !strings.Contains(body, `"s"`) {
		t.Fatalf("stats: %d %s", code, body)
	}
	// Delete needs force while clients are attached.
	if code, _ := httpDo(t, "DELETE", h+"/admin/v2/persistent/"+tenant+"/ns/plain", ""); code != 204 {
		t.Fatalf("delete plain: %d", code)
	}
	if code, _ := httpDo(t, "DELETE", h+"/admin/v2/persistent/"+tenant+"/ns/parted/partitions", ""); code != 412 {
		t.Fatalf("delete busy partitioned topic: %d", code)
	}
	if code, body := httpDo(t, "DELETE", h+"/admin/v2/persistent/"+tenant+"/ns/parted/partitions?force=true", ""); code != 204 {
		t.Fatalf("force delete: %d %s", code, body)
	}
	if code, _ := httpDo(t, "GET", h+"/admin/v2/persistent/"+tenant+"/ns/parted/partitions", ""); code != 200 {
		t.Fatalf("get partitions after delete: %d", code)
	}
	if code, body := httpDo(t, "DELETE", h+"/admin/v2/namespaces/"+tenant+"/ns", ""); code != 204 {
		t.Fatalf("delete namespace: %d %s", code, body)
	}
	if code, _ := httpDo(t, "DELETE", h+"/admin/v2/tenants/"+tenant, ""); code != 204 {
		t.Fatalf("delete tenant: %d", code)
	}
}

func TestSchemaVersions(t *testing.T) {
	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("schema")
	p1 := producerT(t, c, pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewStringSchema(nil)})
	if _, err := p1.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Value: "hello"}); err != nil {
		t.Fatal(err)
	}
	p2 := producerT(t, c, pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewJSONSchema(`{"type":"record","name":"r","fields":[{"name":"a","type":"int"}]}`, nil)})
	if _, err := p2.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Value: map[string]int{"a": 1}}); err != nil {
		t.Fatal(err)
	}
	cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Schema: pulsar.NewStringSchema(nil)})
	m, err := cons.Receive(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload()) != "hello" || len(m.SchemaVersion()) != 8 {
		t.Fatalf("message %q schema version %x", m.Payload(), m.SchemaVersion())
	}
	if b.HTTPURL != "" {
		name := strings.TrimPrefix(topic, "persistent://")
		code, body := httpDo(t, "GET", b.HTTPURL+"/admin/v2/schemas/"+name+"/schema", "")
		if code != 200 || !strings.Contains(body, `"type":"JSON"`) || !strings.Contains(body, `"version":1`) {
			t.Fatalf("latest schema: %d %s", code, body)
		}
		code, body = httpDo(t, "GET", b.HTTPURL+"/admin/v2/schemas/"+name+"/schema/0", "")
		if code != 200 || !strings.Contains(body, `"type":"STRING"`) {
			t.Fatalf("schema v0: %d %s", code, body)
		}
	}
}

// TestRegexAndFailoverPartitions: a pattern consumer finds topics through
// GET_TOPICS_OF_NAMESPACE, and Failover consumers split a partitioned
// topic's partitions (partition i -> consumer i % n).
func TestRegexAndFailoverPartitions(t *testing.T) {
	b := startBroker(t, Config{})
	if b.HTTPURL == "" {
		testenv.SkipOrFail(t, "external broker without NEREUS_PULSAR_HTTP_URL")
	}
	c := b.client(t)
	base := fmt.Sprintf("rx%d", time.Now().UnixNano()%1e9)
	for i := 0; i < 2; i++ {
		p := producerT(t, c, pulsar.ProducerOptions{Topic: fmt.Sprintf("persistent://public/default/%s-%d", base, i), DisableBatching: true})
		produceN(t, p, 3, fmt.Sprintf("t%d", i))
	}
	rc, err := c.Subscribe(pulsar.ConsumerOptions{TopicsPattern: "persistent://public/default/" + base + "-.*", SubscriptionName: "rx",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := ctxT(t, 30*time.Second)
	got := map[string]bool{}
	for len(got) < 6 {
		m, err := rc.Receive(ctx)
		if err != nil {
			t.Fatalf("pattern consumer after %d: %v", len(got), err)
		}
		got[string(m.Payload())] = true
		_ = rc.Ack(m)
	}

	topic := "persistent://public/default/" + base + "-parted"
	if code, body := httpDo(t, "PUT", b.HTTPURL+"/admin/v2/persistent/public/default/"+base+"-parted/partitions", "2"); code != 204 {
		t.Fatalf("create partitioned: %d %s", code, body)
	}
	var cons []pulsar.Consumer
	for _, name := range []string{"a", "b"} {
		cons = append(cons, subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "fo", Type: pulsar.Failover, Name: name}))
	}
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for i := 0; i < 40; i++ {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprintf("k%d", i), Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	partsOf := make([]map[int32]bool, 2)
	total := 0
	for i, cs := range cons {
		partsOf[i] = map[int32]bool{}
		for {
			rctx, cancel := contextWithTimeout(ctx, 500*time.Millisecond)
			m, err := cs.Receive(rctx)
			cancel()
			if err != nil {
				break
			}
			partsOf[i][m.ID().PartitionIdx()] = true
			total++
			_ = cs.Ack(m)
		}
	}
	if total != 40 || len(partsOf[0]) != 1 || len(partsOf[1]) != 1 {
		t.Fatalf("failover over partitions: %d messages, partitions per consumer %v", total, partsOf)
	}
	for k := range partsOf[0] {
		if partsOf[1][k] {
			t.Fatalf("both consumers active on partition %d", k)
		}
	}
}

// getJSON GETs url and decodes a 200 answer into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := httpDo(t, "GET", url, "")
	if code != 200 {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}
