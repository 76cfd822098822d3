package pulsar

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestAdminPoliciesAndCursorPaths drives the pulsar-admin REST paths for
// namespace retention and storage-profile policies, topic creation with a
// storage profile, last-message-id, clear-backlog (skip_all) and
// reset-cursor by time against a real nereus serve.
func TestAdminPoliciesAndCursorPaths(t *testing.T) {
	b := startBroker(t, Config{})
	a := b.HTTPURL + "/admin/v2"
	tenant := "pol" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	mustCode := func(want int, method, url, body string) string {
		t.Helper()
		code, out := httpDo(t, method, url, body)
		if code != want {
			t.Fatalf("%s %s: %d %s (want %d)", method, url, code, out, want)
		}
		return out
	}
	mustCode(204, "PUT", a+"/tenants/"+tenant, `{"allowedClusters":["standalone"]}`)
	mustCode(204, "PUT", a+"/namespaces/"+tenant+"/ns", "")

	// Retention: default zeros, set, read back, delete.
	if out := mustCode(200, "GET", a+"/namespaces/"+tenant+"/ns/retention", ""); !strings.Contains(out, `"retentionTimeInMinutes":0`) {
		t.Fatalf("default retention %s", out)
	}
	mustCode(204, "POST", a+"/namespaces/"+tenant+"/ns/retention", `{"retentionTimeInMinutes":60,"retentionSizeInMB":-1}`)
	if out := mustCode(200, "GET", a+"/namespaces/"+tenant+"/ns/retention", ""); !strings.Contains(out, `"retentionTimeInMinutes":60`) ||
		!strings.Contains(out, `"retentionSizeInMB":-1`) {
		t.Fatalf("retention %s", out)
	}
	mustCode(412, "POST", a+"/namespaces/"+tenant+"/ns/retention", `{"retentionTimeInMinutes":-5,"retentionSizeInMB":0}`)
	mustCode(204, "DELETE", a+"/namespaces/"+tenant+"/ns/retention", "")

	// Storage profile: the namespace policy applies to topics created
	// afterwards; a topic property overrides it; bad names are refused.
	if out := mustCode(200, "GET", a+"/namespaces/"+tenant+"/ns/storageProfile", ""); !strings.Contains(out, "OBJECT_WAL_ASYNC_OBJECT") {
		t.Fatalf("default profile %s", out)
	}
	mustCode(412, "POST", a+"/namespaces/"+tenant+"/ns/storageProfile", "NO_SUCH_PROFILE")
	mustCode(204, "POST", a+"/namespaces/"+tenant+"/ns/storageProfile", "OBJECT_WAL_SYNC_OBJECT")
	mustCode(204, "PUT", a+"/persistent/"+tenant+"/ns/synced", "")
	mustCode(204, "PUT", a+"/persistent/"+tenant+"/ns/asyncd", `{"nereus.storage.profile":"OBJECT_WAL_ASYNC_OBJECT"}`)
	var st struct {
		Profile string `json:"nereusStorageProfile"`
	}
	getJSON(t, a+"/persistent/"+tenant+"/ns/synced/stats", &st)
	if st.Profile != "OBJECT_WAL_SYNC_OBJECT" {
		t.Fatalf("namespace policy not applied: %q", st.Profile)
	}
	getJSON(t, a+"/persistent/"+tenant+"/ns/asyncd/stats", &st)
	if st.Profile != "OBJECT_WAL_ASYNC_OBJECT" {
		t.Fatalf("topic property not applied: %q", st.Profile)
	}

	// Last message id, clear-backlog and reset-cursor on a subscription.
	topic := "persistent://" + tenant + "/ns/synced"
	c := b.client(t)
	cons := subscribeT(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sub", Type: pulsar.Shared})
	cons.Close()
	if out := mustCode(200, "GET", a+"/persistent/"+tenant+"/ns/synced/lastMessageId", ""); !strings.Contains(out, `"entryId":-1`) {
		t.Fatalf("empty topic last id %s", out)
	}
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	before := time.Now().UnixMilli()
	var lastID pulsar.MessageID
	for i := 0; i < 5; i++ {
		id, err := p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		lastID = id
	}
	out := mustCode(200, "GET", a+"/persistent/"+tenant+"/ns/synced/lastMessageId", "")
	if !strings.Contains(out, `"entryId":`+strconv.FormatInt(lastID.EntryID(), 10)) || !strings.Contains(out, `"ledgerId":`+strconv.FormatInt(lastID.LedgerID(), 10)) {
		t.Fatalf("last message id %s, producer saw %v", out, lastID)
	}
	backlog := func() int64 {
		var st struct {
			Subs map[string]struct {
				MsgBacklog int64 `json:"msgBacklog"`
			} `json:"subscriptions"`
		}
		getJSON(t, a+"/persistent/"+tenant+"/ns/synced/stats", &st)
		return st.Subs["sub"].MsgBacklog
	}
	if n := backlog(); n != 5 {
		t.Fatalf("backlog %d, want 5", n)
	}
	mustCode(204, "POST", a+"/persistent/"+tenant+"/ns/synced/subscription/sub/skip_all", "")
	if n := backlog(); n != 0 {
		t.Fatalf("backlog after clear-backlog %d", n)
	}
	mustCode(204, "POST", a+"/persistent/"+tenant+"/ns/synced/subscription/sub/resetcursor/"+strconv.FormatInt(before-1, 10), "")
	if n := backlog(); n != 5 {
		t.Fatalf("backlog after reset-cursor to before the sends %d", n)
	}
	mustCode(404, "POST", a+"/persistent/"+tenant+"/ns/synced/subscription/nope/skip_all", "")
}
