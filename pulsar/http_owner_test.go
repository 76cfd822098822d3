package pulsar

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/managedledger"
)

// twoBrokers starts two in-process brokers sharing storage and metadata
// and waits until each sees the other.
func twoBrokers(t *testing.T) (*broker, *broker) {
	t.Helper()
	a := startInProcessBroker(t, Config{})
	if a.external {
		testenv.SkipOrFail(t, "needs two in-process brokers, not an external one")
	}
	b := &broker{storage: a.storage, meta: a.meta}
	b.start(t)
	t.Cleanup(func() { b.stop(t) })
	deadline := time.Now().Add(10 * time.Second)
	for len(a.node.View().Brokers) < 2 || len(b.node.View().Brokers) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the brokers never saw each other")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return a, b
}

func ownerAdminDo(t *testing.T, c *http.Client, method, u, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// Admin operations on a topic through a broker that does not serve it are
// redirected to the owner (307, authoritative=true) as Pulsar brokers do;
// Go's http.Client follows them the way pulsarctl does (re-sending the
// method and body). On a partitioned topic, partitions served elsewhere
// are forwarded to their owners.
func TestAdminRedirectsToTheOwner(t *testing.T) {
	a, b := twoBrokers(t)
	topic := newTopic("admin-owned")
	name, _ := managedledger.ParseTopicName(topic)
	owner, other := a, b
	if o, _ := a.node.OwnerOf(name.StreamName()); o.NodeID == b.nodeID {
		owner, other = b, a
	}
	cl := owner.client(t)
	p := producerT(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if _, err := p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: []byte("one")}); err != nil {
		t.Fatal(err)
	}
	path := "/admin/v2/persistent/" + name.Tenant + "/" + name.Namespace + "/" + name.Local

	// The redirect itself.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, _ := ownerAdminDo(t, noFollow, http.MethodGet, other.HTTPURL+path+"/stats?x=1", "")
	if resp.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("stats through the non-owner: %s, want 307", resp.Status)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || "http://"+loc.Host != owner.HTTPURL || loc.Path != path+"/stats" ||
		loc.Query().Get("authoritative") != "true" || loc.Query().Get("x") != "1" {
		t.Fatalf("Location %q, want %s%s/stats?authoritative=true&x=1", resp.Header.Get("Location"), owner.HTTPURL, path)
	}
	// The owner answers itself, authoritative or not.
	if resp, _ := ownerAdminDo(t, noFollow, http.MethodGet, owner.HTTPURL+path+"/stats?authoritative=true", ""); resp.StatusCode != 200 {
		t.Fatalf("stats on the owner: %s", resp.Status)
	}

	// Followed as a client does.
	resp, body := ownerAdminDo(t, http.DefaultClient, http.MethodGet, other.HTTPURL+path+"/stats", "")
	var st topicStatsJSON
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &st) != nil || len(st.Publishers) != 1 {
		t.Fatalf("stats through the non-owner, redirect followed: %s %s", resp.Status, body)
	}
	if resp, body := ownerAdminDo(t, http.DefaultClient, http.MethodGet, other.HTTPURL+path+"/internalStats", ""); resp.StatusCode != 200 {
		t.Fatalf("internalStats: %s %s", resp.Status, body)
	}
	if resp, body := ownerAdminDo(t, http.DefaultClient, http.MethodPut, other.HTTPURL+path+"/subscription/s1", ""); resp.StatusCode/100 != 2 {
		t.Fatalf("create subscription: %s %s", resp.Status, body)
	}
	if resp, body := ownerAdminDo(t, http.DefaultClient, http.MethodGet, other.HTTPURL+path+"/subscriptions", ""); resp.StatusCode != 200 || !strings.Contains(body, "s1") {
		t.Fatalf("subscriptions: %s %s", resp.Status, body)
	}
	// The producer goes first: a connected client reconnects after an
	// unload and loads the topic again on its owner, racing the check
	// below (failed ~1 in 20 runs under -race).
	p.Close()
	if resp, body := ownerAdminDo(t, http.DefaultClient, http.MethodPut, other.HTTPURL+path+"/unload", ""); resp.StatusCode/100 != 2 {
		t.Fatalf("unload: %s %s", resp.Status, body)
	}
	if owner.srv.loadedTopic(name.String()) != nil || other.srv.loadedTopic(name.String()) != nil {
		t.Fatal("the topic is still loaded after unload through the non-owner")
	}

	// A partitioned topic: each partition's operation runs on its owner.
	ptopic := newTopic("admin-parted")
	pname, _ := managedledger.ParseTopicName(ptopic)
	ppath := "/admin/v2/persistent/" + pname.Tenant + "/" + pname.Namespace + "/" + pname.Local
	const parts = 8
	if resp, body := ownerAdminDo(t, http.DefaultClient, http.MethodPut, a.HTTPURL+ppath+"/partitions", "8"); resp.StatusCode/100 != 2 {
		t.Fatalf("create partitioned: %s %s", resp.Status, body)
	}
	onA := 0
	for i := 0; i < parts; i++ {
		if o, _ := a.node.OwnerOf(pname.Partition(i).StreamName()); o.NodeID == a.nodeID {
			onA++
		}
	}
	t.Logf("%d of %d partitions served by broker a", onA, parts)
	if resp, body := ownerAdminDo(t, http.DefaultClient, http.MethodPut, a.HTTPURL+ppath+"/subscription/ps", ""); resp.StatusCode/100 != 2 {
		t.Fatalf("create subscription on the partitioned topic: %s %s", resp.Status, body)
	}
	resp, body = ownerAdminDo(t, http.DefaultClient, http.MethodGet, b.HTTPURL+ppath+"/partitioned-stats?perPartition=true", "")
	if resp.StatusCode != 200 {
		t.Fatalf("partitioned-stats: %s %s", resp.Status, body)
	}
	var pst struct {
		Subscriptions map[string]json.RawMessage `json:"subscriptions"`
		Partitions    map[string]topicStatsJSON  `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(body), &pst); err != nil || pst.Subscriptions["ps"] == nil {
		t.Fatalf("partitioned-stats: %s (%v)", body, err)
	}
	for i := 0; i < parts; i++ {
		if ps, ok := pst.Partitions[pname.Partition(i).String()]; ok {
			if _, ok := ps.Subscriptions["ps"]; !ok {
				t.Fatalf("partition %d has no subscription ps: %+v", i, ps)
			}
		}
	}
	resp, body = ownerAdminDo(t, http.DefaultClient, http.MethodGet, a.HTTPURL+ppath+"/partitioned-internalStats", "")
	var pist struct {
		Partitions map[string]json.RawMessage `json:"partitions"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &pist) != nil || len(pist.Partitions) != parts {
		t.Fatalf("partitioned-internalStats: %s %.300s", resp.Status, body)
	}
	// Namespace unload through one broker unloads the namespace's topics
	// on every broker (the subscription fan-out above loaded them).
	loaded := func() (n int) {
		for i := 0; i < parts; i++ {
			for _, br := range []*broker{a, b} {
				if br.srv.loadedTopic(pname.Partition(i).String()) != nil {
					n++
				}
			}
		}
		return n
	}
	if loaded() == 0 {
		t.Fatal("no partition loaded before the namespace unload")
	}
	if resp, body := ownerAdminDo(t, http.DefaultClient, http.MethodPut, a.HTTPURL+"/admin/v2/namespaces/"+pname.Tenant+"/"+pname.Namespace+"/unload", ""); resp.StatusCode/100 != 2 {
		t.Fatalf("namespace unload: %s %s", resp.Status, body)
	}
	if n := loaded(); n != 0 {
		t.Fatalf("%d partitions still loaded after the namespace unload", n)
	}
	if resp, body := ownerAdminDo(t, http.DefaultClient, http.MethodDelete, b.HTTPURL+ppath+"/subscription/ps", ""); resp.StatusCode/100 != 2 {
		t.Fatalf("delete subscription on the partitioned topic: %s %s", resp.Status, body)
	}
	for i := 0; i < parts; i++ {
		p := pname.Partition(i)
		srv := a
		if o, _ := a.node.OwnerOf(p.StreamName()); o.NodeID == b.nodeID {
			srv = b
		}
		if tl := srv.srv.loadedTopic(p.String()); tl != nil {
			if exists, err := tl.ledger.CursorExists(ctxT(t, 5*time.Second), "ps"); err != nil || exists {
				t.Fatalf("partition %d still has subscription ps (%v)", i, err)
			}
		}
	}
}
