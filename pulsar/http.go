// HTTP lookup and admin API (the subset of Pulsar's REST API that clients
// using http:// service URLs and pulsar-admin/curl habits need).
//
// Lookup (used by clients):
//
//	GET    /lookup/v2/topic/{domain}/{tenant}/{ns}/{topic}
//	GET    /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions
//	GET    /admin/v2/namespaces/{tenant}/{ns}/topics?mode=PERSISTENT|NON_PERSISTENT|ALL
//	GET    /admin/v2/schemas/{tenant}/{ns}/{topic}/schema[/{version}]
//
// Admin:
//
//	GET    /admin/v2/clusters, /admin/v2/brokers/health
//	GET    /admin/v2/tenants                    PUT|POST|GET|DELETE /admin/v2/tenants/{tenant}
//	GET    /admin/v2/namespaces/{tenant}        PUT|GET|DELETE /admin/v2/namespaces/{tenant}/{ns}
//	POST   /admin/v2/namespaces/{tenant}/{ns}/deduplication   (body true|false)
//	GET|POST|DELETE /admin/v2/namespaces/{tenant}/{ns}/retention (applied to the namespace's topics; retention.go)
//	(topic retention and backlog quotas: http_policies.go)
//	GET|POST|DELETE /admin/v2/namespaces/{tenant}/{ns}/storageProfile (Nereus: profile of topics created from now on)
//	GET    /admin/v2/{domain}/{tenant}/{ns}                    (topics and partitions)
//	GET    /admin/v2/{domain}/{tenant}/{ns}/partitioned        (partitioned topics)
//	PUT    /admin/v2/{domain}/{tenant}/{ns}/{topic}            (create non-partitioned; body: optional properties,
//	                                                            "nereus.storage.profile" fixes the stream's profile)
//	DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}[?force=true]
//	PUT    /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions (body N: create partitioned)
//	POST   /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions (body N: grow)
//	DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions[?force=true]
//	GET    /admin/v2/{domain}/{tenant}/{ns}/{topic}/stats
//	GET    /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitioned-stats
//	GET    /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscriptions
//	GET    /admin/v2/{domain}/{tenant}/{ns}/{topic}/lastMessageId
//	POST   /admin/v2/{domain}/{tenant}/{ns}/{topic}/terminate  (seal; producers refused with TopicTerminatedError)
//	POST   /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/skip_all            (clear-backlog)
//	POST   /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/resetcursor/{ms}    (reset-cursor --time)
//	PUT    /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}
//	DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}
//	DELETE /admin/v2/schemas/{tenant}/{ns}/{topic}/schema
//
// More paths (retention, backlog quotas, internal stats, unload, skip,
// reset by message id, expiry, dedup policies) are listed in
// http_policies.go and http_topics.go; subscription paths on a
// partitioned topic apply to all partitions.
//
// Errors answer {"reason": "..."} with Pulsar's status codes (404 missing,
// 409 exists / not empty, 412 invalid name or clients still connected).

package pulsar

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/stream"
)

type httpAPI struct {
	s *Server
}

func newHTTPHandler(s *Server) http.Handler {
	a := &httpAPI{s: s}
	mux := a.newAuthMux() // every route guarded by its permission (http_auth.go)
	mux.HandleFunc("GET /lookup/v2/topic/{domain}/{tenant}/{ns}/{topic}", a.lookup)
	mux.HandleFunc("GET /admin/v2/clusters", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, []string{s.cfg.ClusterName}) })
	mux.HandleFunc("GET /admin/v2/brokers/health", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /admin/v2/tenants", a.listTenants)
	mux.HandleFunc("GET /admin/v2/tenants/{tenant}", a.getTenant)
	mux.HandleFunc("PUT /admin/v2/tenants/{tenant}", a.putTenant)
	mux.HandleFunc("POST /admin/v2/tenants/{tenant}", a.putTenant)
	mux.HandleFunc("DELETE /admin/v2/tenants/{tenant}", a.deleteTenant)
	mux.HandleFunc("GET /admin/v2/namespaces/{tenant}", a.listNamespaces)
	mux.HandleFunc("GET /admin/v2/namespaces/{tenant}/{ns}", a.getNamespace)
	mux.HandleFunc("PUT /admin/v2/namespaces/{tenant}/{ns}", a.putNamespace)
	mux.HandleFunc("DELETE /admin/v2/namespaces/{tenant}/{ns}", a.deleteNamespace)
	mux.HandleFunc("POST /admin/v2/namespaces/{tenant}/{ns}/deduplication", a.setDeduplication)
	mux.HandleFunc("GET /admin/v2/namespaces/{tenant}/{ns}/topics", a.namespaceTopics)
	mux.HandleFunc("GET /admin/v2/namespaces/{tenant}/{ns}/retention", a.getRetention)
	mux.HandleFunc("POST /admin/v2/namespaces/{tenant}/{ns}/retention", a.setRetention)
	mux.HandleFunc("DELETE /admin/v2/namespaces/{tenant}/{ns}/retention", a.setRetention)
	mux.HandleFunc("GET /admin/v2/namespaces/{tenant}/{ns}/storageProfile", a.getStorageProfile)
	mux.HandleFunc("POST /admin/v2/namespaces/{tenant}/{ns}/storageProfile", a.setStorageProfile)
	mux.HandleFunc("DELETE /admin/v2/namespaces/{tenant}/{ns}/storageProfile", a.setStorageProfile)
	mux.HandleFunc("GET /admin/v2/schemas/{tenant}/{ns}/{topic}/schema", a.getSchema)
	mux.HandleFunc("GET /admin/v2/schemas/{tenant}/{ns}/{topic}/schema/{version}", a.getSchema)
	mux.HandleFunc("DELETE /admin/v2/schemas/{tenant}/{ns}/{topic}/schema", a.deleteSchema)
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}", a.listTopics)
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/partitioned", a.listPartitioned)
	mux.HandleFunc("PUT /admin/v2/{domain}/{tenant}/{ns}/{topic}", a.createTopic)
	mux.HandleFunc("DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}", a.deleteTopic)
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions", a.getPartitions)
	mux.HandleFunc("PUT /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions", a.createPartitioned)
	mux.HandleFunc("POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions", a.updatePartitions)
	mux.HandleFunc("DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions", a.deletePartitioned)
	a.registerPolicies(mux)
	a.registerTopicRoutes(mux)
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/stats", a.owned(a.topicStats))
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitioned-stats", a.partitionedStats)
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscriptions", a.owned(a.listSubscriptions))
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/lastMessageId", a.owned(a.lastMessageID))
	mux.HandleFunc("POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/terminate", a.owned(a.terminate))
	mux.HandleFunc("POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/skip_all", a.perPartition(a.skipAll))
	mux.HandleFunc("POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/resetcursor/{timestamp}", a.perPartition(a.resetCursorByTime))
	mux.HandleFunc("PUT /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}", a.perPartition(a.createSubscription))
	mux.HandleFunc("DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}", a.perPartition(a.deleteSubscription))
	a.registerPermissionRoutes(mux)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, managedledger.ErrTopicNotFound), errors.Is(err, managedledger.ErrNotFound),
		errors.Is(err, managedledger.ErrNamespaceNotFound), errors.Is(err, managedledger.ErrCursorNotFound):
		status = http.StatusNotFound
	case errors.Is(err, managedledger.ErrExists), errors.Is(err, managedledger.ErrTopicExists), errors.Is(err, managedledger.ErrNotEmpty):
		status = http.StatusConflict
	case errors.Is(err, managedledger.ErrInvalidName), errors.Is(err, errClientsConnected):
		status = http.StatusPreconditionFailed
	default:
		var pe *protoError
		if errors.As(err, &pe) && pe.code == pb.ServerError_TopicNotFound {
			status = http.StatusNotFound
		}
	}
	writeJSON(w, status, map[string]string{"reason": err.Error()})
}

var errClientsConnected = errors.New("topic has connected producers or consumers (use force=true)")

func (a *httpAPI) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 30*time.Second)
}

// loadTopic loads the request's topic (never creating it); ok is false
// once the error answer was written.
func (a *httpAPI) loadTopic(ctx context.Context, w http.ResponseWriter, r *http.Request) (*topic, bool) {
	n, ok := a.topicName(w, r)
	if !ok {
		return nil, false
	}
	t, err := a.s.getTopic(ctx, n, false)
	if err != nil {
		writeErr(w, err)
		return nil, false
	}
	return t, true
}

// subscriptionExists is false, with the answer written, when the topic has
// no durable subscription name (or the cursor store could not say).
func subscriptionExists(ctx context.Context, w http.ResponseWriter, t *topic, name string) bool {
	exists, err := t.ledger.CursorExists(ctx, name)
	if err == nil && !exists {
		err = fmt.Errorf("%w: subscription %s", managedledger.ErrCursorNotFound, name)
	}
	if err != nil {
		writeErr(w, err)
		return false
	}
	return true
}

// topicName builds the topic from path values; ok is false (and a 404 was
// written) for an unknown domain.
func (a *httpAPI) topicName(w http.ResponseWriter, r *http.Request) (managedledger.TopicName, bool) {
	domain := r.PathValue("domain")
	if domain == "" {
		domain = "persistent"
	}
	if domain != "persistent" && domain != "non-persistent" {
		writeJSON(w, http.StatusNotFound, map[string]string{"reason": "unknown path"})
		return managedledger.TopicName{}, false
	}
	n, err := managedledger.ParseTopicName(domain + "://" + r.PathValue("tenant") + "/" + r.PathValue("ns") + "/" + r.PathValue("topic"))
	if err != nil {
		writeErr(w, err)
		return n, false
	}
	return n, true
}

func (a *httpAPI) lookup(w http.ResponseWriter, r *http.Request) {
	topic, ok := a.topicName(w, r)
	if !ok {
		return
	}
	name := r.URL.Query().Get("listenerName")
	if name == "" {
		name = r.Header.Get("X-Pulsar-ListenerName")
	}
	// In a cluster the answer names the topic's owner, from any broker
	// (after the verdict on a peer whose connection just closed).
	a.s.cluster.Settle(r.Context())
	if owner, self, ok := a.s.topicOwner(topic); !ok {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"reason": "no active broker serves topics"})
		return
	} else if !self {
		plain, tls := ownerURLs(owner, name)
		httpURL, httpsURL := ownerHTTPURLs(owner, name)
		native := plain
		if native == "" {
			native = tls
		}
		writeJSON(w, 200, map[string]string{
			"brokerUrl": plain, "brokerUrlTls": tls,
			"httpUrl": httpURL, "httpUrlTls": httpsURL, "nativeUrl": native,
		})
		return
	}
	var plain, tls string
	if len(a.s.cfg.Endpoints) == 0 {
		plain = a.legacyBrokerURL(r)
	} else {
		var ok bool
		if plain, tls, ok = a.s.brokerURLs(name, r.Host); !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"reason": "the broker do not have " + name + " listener"})
			return
		}
	}
	httpURL, httpsURL := a.s.httpURLs(name, r.Host)
	native := plain
	if native == "" {
		native = tls
	}
	writeJSON(w, 200, map[string]string{
		"brokerUrl": plain, "brokerUrlTls": tls,
		"httpUrl": httpURL, "httpUrlTls": httpsURL, "nativeUrl": native,
	})
}

// legacyBrokerURL is the lookup answer of a broker configured with a single
// AdvertisedAddr (no Endpoints).
func (a *httpAPI) legacyBrokerURL(r *http.Request) string {
	broker := a.s.AdvertisedAddr()
	if adv := a.s.advertisedFor(""); adv == broker {
		// Wildcard listener and no AdvertisedAddr: use the host the HTTP
		// client reached with the broker's port.
		if host, port, err := net.SplitHostPort(broker); err == nil {
			if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
				if h, _, err := net.SplitHostPort(r.Host); err == nil {
					broker = net.JoinHostPort(h, port)
				}
			}
		}
	} else {
		broker = adv
	}
	return "pulsar://" + broker
}

func (a *httpAPI) listTenants(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	ts, err := a.s.ml.ListTenants(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, nonNil(ts))
}

func (a *httpAPI) getTenant(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	info, err := a.s.ml.GetTenant(ctx, r.PathValue("tenant"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, info)
}

func (a *httpAPI) putTenant(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	var info managedledger.TenantInfo
	if body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20)); len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &info); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"reason": err.Error()})
			return
		}
	}
	var err error
	if r.Method == http.MethodPost {
		err = a.s.ml.UpdateTenant(ctx, r.PathValue("tenant"), info)
	} else {
		err = a.s.ml.CreateTenant(ctx, r.PathValue("tenant"), info)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) deleteTenant(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.ml.DeleteTenant(ctx, r.PathValue("tenant")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) listNamespaces(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	if _, err := a.s.ml.GetTenant(ctx, r.PathValue("tenant")); err != nil {
		writeErr(w, err)
		return
	}
	ns, err := a.s.ml.ListNamespaces(ctx, r.PathValue("tenant"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, nonNil(ns))
}

func nsName(r *http.Request) string { return r.PathValue("tenant") + "/" + r.PathValue("ns") }

func (a *httpAPI) getNamespace(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	p, err := a.s.ml.GetNamespace(ctx, nsName(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, p)
}

func (a *httpAPI) putNamespace(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.ml.CreateNamespace(ctx, nsName(r), managedledger.NamespacePolicies{}); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) deleteNamespace(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.ml.DeleteNamespace(ctx, nsName(r)); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) setDeduplication(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64))
	on, err := strconv.ParseBool(strings.TrimSpace(string(body)))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"reason": "body must be true or false"})
		return
	}
	if err := a.s.ml.SetNamespacePolicies(ctx, nsName(r), func(p *managedledger.NamespacePolicies) { p.Deduplication = &on }); err != nil {
		writeErr(w, err)
		return
	}
	a.s.refreshNamespaceDedup(ctx, nsName(r))
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) namespaceTopics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	if _, err := a.s.ml.GetNamespace(ctx, nsName(r)); err != nil {
		writeErr(w, err)
		return
	}
	var domains []string
	switch r.URL.Query().Get("mode") {
	case "NON_PERSISTENT":
		domains = []string{"non-persistent"}
	case "ALL":
		domains = []string{"persistent", "non-persistent"}
	default:
		domains = []string{"persistent"}
	}
	var out []string
	for _, d := range domains {
		ts, err := a.s.ml.ListTopics(ctx, d, nsName(r))
		if err != nil {
			writeErr(w, err)
			return
		}
		out = append(out, ts...)
	}
	writeJSON(w, 200, nonNil(out))
}

func (a *httpAPI) listTopics(w http.ResponseWriter, r *http.Request) {
	if d := r.PathValue("domain"); d != "persistent" && d != "non-persistent" {
		writeJSON(w, http.StatusNotFound, map[string]string{"reason": "unknown path"})
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if _, err := a.s.ml.GetNamespace(ctx, nsName(r)); err != nil {
		writeErr(w, err)
		return
	}
	ts, err := a.s.ml.ListTopics(ctx, r.PathValue("domain"), nsName(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, nonNil(ts))
}

func (a *httpAPI) listPartitioned(w http.ResponseWriter, r *http.Request) {
	d := r.PathValue("domain")
	if d != "persistent" && d != "non-persistent" {
		writeJSON(w, http.StatusNotFound, map[string]string{"reason": "unknown path"})
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	ts, err := a.s.ml.ListPartitioned(ctx, d, nsName(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, nonNil(ts))
}

func (a *httpAPI) createTopic(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if exists, err := a.s.ml.Exists(ctx, n); err != nil {
		writeErr(w, err)
		return
	} else if exists {
		writeErr(w, managedledger.ErrTopicExists)
		return
	}
	if cnt, err := a.s.ml.PartitionCount(ctx, n); err != nil {
		writeErr(w, err)
		return
	} else if cnt > 0 {
		writeErr(w, managedledger.ErrTopicExists)
		return
	}
	// Body: optional topic properties (pulsar-admin topics create
	// --metadata); "nereus.storage.profile" picks the stream's profile.
	var props map[string]string
	if body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20)); len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &props); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"reason": "body must be a JSON object of topic properties: " + err.Error()})
			return
		}
	}
	profile := stream.ProfileUnspecified
	if v := props[StorageProfileProperty]; v != "" {
		p, err := stream.ParseProfile(v)
		if err != nil {
			writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": err.Error()})
			return
		}
		profile = p
	}
	if _, err := a.s.ml.CreateWithProfile(ctx, n, profile); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// StorageProfileProperty is the topic property (and the meaning of the
// namespace storageProfile policy) that chooses a new topic's storage
// profile; it is fixed when the topic's stream is created.
const StorageProfileProperty = "nereus.storage.profile"

func (a *httpAPI) getRetention(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	p, err := a.s.ml.GetNamespace(ctx, nsName(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	if p.Retention == nil {
		// Pulsar answers the broker default (no retention) as zeros.
		writeJSON(w, 200, managedledger.RetentionPolicies{})
		return
	}
	writeJSON(w, 200, p.Retention)
}

func (a *httpAPI) setRetention(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	var rp *managedledger.RetentionPolicies
	if r.Method == http.MethodPost {
		rp = &managedledger.RetentionPolicies{}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		if err := json.Unmarshal(body, rp); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"reason": "body must be {\"retentionTimeInMinutes\":N,\"retentionSizeInMB\":M}"})
			return
		}
		if rp.RetentionTimeInMinutes < -1 || rp.RetentionSizeInMB < -1 {
			writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": "retention values must be >= -1 (-1 = infinite)"})
			return
		}
	}
	if err := a.s.ml.SetNamespacePolicies(ctx, nsName(r), func(p *managedledger.NamespacePolicies) { p.Retention = rp }); err != nil {
		writeErr(w, err)
		return
	}
	topics, err := a.s.namespaceTopics(ctx, nsName(r))
	if err == nil {
		err = a.s.applyRetentionTo(ctx, topics)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) getStorageProfile(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	p, err := a.s.ml.GetNamespace(ctx, nsName(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	name := p.StorageProfile
	if name == "" {
		name = a.s.defaultProfile().String()
	}
	writeJSON(w, 200, name)
}

func (a *httpAPI) setStorageProfile(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	name := ""
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 256))
		name = strings.Trim(strings.TrimSpace(string(body)), `"`)
		p, err := stream.ParseProfile(name)
		if err != nil || name == "" {
			writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": "body must be a storage profile name: " + fmt.Sprint(err)})
			return
		}
		name = p.String()
	}
	if err := a.s.ml.SetNamespacePolicies(ctx, nsName(r), func(p *managedledger.NamespacePolicies) { p.StorageProfile = name }); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// lastMessageID answers pulsar-admin topics last-message-id: the last
// entry's id ({"ledgerId":L,"entryId":-1} on an empty topic), with the
// batch index of a batched last entry.
func (a *httpAPI) lastMessageID(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	t, ok := a.loadTopic(ctx, w, r)
	if !ok {
		return
	}
	id, err := lastMessageID(ctx, t.ledger)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := map[string]any{"ledgerId": int64(id.GetLedgerId()), "entryId": int64(id.GetEntryId()), "partitionIndex": t.name.PartitionIndex()}
	if id.BatchIndex != nil {
		out["batchIndex"] = id.GetBatchIndex()
		out["batchSize"] = id.GetBatchSize()
	}
	writeJSON(w, 200, out)
}

// terminate is pulsar-admin topics terminate: the topic's stream is sealed
// (no more appends, reads continue), its producers are closed — they
// reconnect and are refused with TopicTerminatedError — and the answer is
// the last message id.
func (a *httpAPI) terminate(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	t, ok := a.loadTopic(ctx, w, r)
	if !ok {
		return
	}
	t.appendMu.Lock()
	err := t.ledger.Terminate(ctx)
	if err == nil {
		t.writerReady = false // the next producer re-prepares and meets the seal
	}
	t.appendMu.Unlock()
	if err != nil {
		writeErr(w, err)
		return
	}
	t.mu.Lock()
	ps := make([]*producer, 0, len(t.producers))
	for _, p := range t.producers {
		ps = append(ps, p)
	}
	t.mu.Unlock()
	for _, p := range ps {
		p.closeByBroker()
	}
	id, err := lastMessageID(ctx, t.ledger)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"ledgerId": int64(id.GetLedgerId()), "entryId": int64(id.GetEntryId()), "partitionIndex": t.name.PartitionIndex()})
}

// skipAll is pulsar-admin topics clear-backlog: everything published so
// far is acknowledged on the subscription.
func (a *httpAPI) skipAll(w http.ResponseWriter, r *http.Request) {
	a.moveCursor(w, r, func(ctx context.Context, l *managedledger.Ledger) (int64, error) {
		_, end, err := l.Bounds(ctx)
		return end, err
	})
}

// resetCursorByTime is pulsar-admin topics reset-cursor --time: the
// subscription restarts at the first entry published at or after the
// timestamp (milliseconds).
func (a *httpAPI) resetCursorByTime(w http.ResponseWriter, r *http.Request) {
	ts, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
	if err != nil {
		writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": "timestamp must be milliseconds since the epoch"})
		return
	}
	a.moveCursor(w, r, func(ctx context.Context, l *managedledger.Ledger) (int64, error) {
		return l.OffsetForTimestamp(ctx, ts)
	})
}

// moveCursor repositions an existing durable subscription at the offset
// target computes; connected consumers are closed and reconnect from
// there, as after a SEEK.
func (a *httpAPI) moveCursor(w http.ResponseWriter, r *http.Request, target func(context.Context, *managedledger.Ledger) (int64, error)) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	t, ok := a.loadTopic(ctx, w, r)
	if !ok {
		return
	}
	name := r.PathValue("sub")
	if !subscriptionExists(ctx, w, t, name) {
		return
	}
	off, err := target(ctx, t.ledger)
	if err != nil {
		writeErr(w, err)
		return
	}
	start, end, err := t.ledger.Bounds(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	off = min(max(off, start), end)
	sub, err := t.openSubscription(ctx, &pb.CommandSubscribe{Subscription: &name, Durable: boolPtr(true),
		InitialPosition: pb.CommandSubscribe_Latest.Enum()})
	if err != nil {
		writeErr(w, err)
		return
	}
	var consumers []*consumer
	sub.call(func() {
		sub.cursor.Reset(off)
		sub.rewind()
		sub.readPos = off
		sub.redeliveries = map[int64]uint32{}
		consumers = append(consumers, sub.consumers...)
		for _, cs := range consumers {
			cs.permits = 0
		}
	})
	if err := sub.cursor.Flush(ctx); err != nil {
		writeErr(w, err)
		return
	}
	for _, cs := range consumers {
		cs.closeByBroker()
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteTopic deletes a topic; connected clients make it 412 unless force,
// which disconnects them first.
func (a *httpAPI) deleteTopic(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.deleteTopic(ctx, n, r.URL.Query().Get("force") == "true"); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) deleteTopic(ctx context.Context, n managedledger.TopicName, force bool) error {
	if t := s.loadedTopic(n.String()); t != nil {
		if t.busy() && !force {
			return errClientsConnected
		}
		if err := t.close(ctx, true); err != nil {
			return err
		}
	}
	return s.ml.Delete(ctx, n)
}

func (a *httpAPI) getPartitions(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	cnt, err := a.s.ml.PartitionCount(ctx, n)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, map[string]int{"partitions": cnt})
}

func readCount(r *http.Request) (int, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(body)))
}

func (a *httpAPI) createPartitioned(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	cnt, err := readCount(r)
	if err != nil || cnt <= 0 {
		writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": "body must be a positive number of partitions"})
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.ml.CreatePartitioned(ctx, n, cnt); err != nil {
		writeErr(w, err)
		return
	}
	a.openPartitions(ctx, w, n, cnt)
}

// openPartitions opens (creating) the streams of partitions 0..cnt-1 and
// answers 204, or the first error.
func (a *httpAPI) openPartitions(ctx context.Context, w http.ResponseWriter, n managedledger.TopicName, cnt int) {
	for i := 0; i < cnt; i++ {
		if _, err := a.s.ml.Open(ctx, n.Partition(i), true); err != nil {
			writeErr(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) updatePartitions(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	cnt, err := readCount(r)
	if err != nil {
		writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": "body must be a number of partitions"})
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	old, err := a.s.ml.PartitionCount(ctx, n)
	if err != nil {
		writeErr(w, err)
		return
	}
	if err := a.s.ml.UpdatePartitions(ctx, n, cnt); err != nil {
		writeErr(w, err)
		return
	}
	if err := a.s.createSubscriptionsOnNewPartitions(ctx, n, old, cnt); err != nil {
		writeErr(w, err)
		return
	}
	a.openPartitions(ctx, w, n, cnt)
}

func (a *httpAPI) deletePartitioned(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	cnt, err := a.s.ml.PartitionCount(ctx, n)
	if err != nil {
		writeErr(w, err)
		return
	}
	if cnt == 0 {
		writeErr(w, managedledger.ErrTopicNotFound)
		return
	}
	force := r.URL.Query().Get("force") == "true"
	if !force {
		for i := 0; i < cnt; i++ {
			if t := a.s.loadedTopic(n.Partition(i).String()); t != nil && t.busy() {
				writeErr(w, errClientsConnected)
				return
			}
		}
	}
	// The partitioned record goes first: once it is gone, reconnecting
	// clients can no longer auto-create the partitions being deleted. A
	// crash in between leaves partitions that list as plain topics and can
	// be deleted one by one.
	if err := a.s.ml.DeletePartitioned(ctx, n); err != nil {
		writeErr(w, err)
		return
	}
	for i := 0; i < cnt; i++ {
		if err := a.s.deleteTopic(ctx, n.Partition(i), true); err != nil && !errors.Is(err, managedledger.ErrTopicNotFound) {
			writeErr(w, err)
			return
		}
	}
	if err := a.s.ml.DeleteState(ctx, n, "schemas"); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Stats JSON shapes (a subset of Pulsar's TopicStats).
type publisherStats struct {
	ProducerName   string            `json:"producerName"`
	ProducerID     uint64            `json:"producerId"`
	Address        string            `json:"address"`
	AccessMode     string            `json:"accessMode"`
	ClientVersion  string            `json:"clientVersion"`
	ConnectedSince string            `json:"connectedSince"`
	Metadata       map[string]string `json:"metadata"`
}

type consumerStats struct {
	ConsumerName     string            `json:"consumerName"`
	AvailablePermits int64             `json:"availablePermits"`
	UnackedMessages  int               `json:"unackedMessages"`
	Address          string            `json:"address"`
	ClientVersion    string            `json:"clientVersion"`
	ConnectedSince   string            `json:"connectedSince"`
	PriorityLevel    int32             `json:"priorityLevel"`
	Metadata         map[string]string `json:"metadata"`
}

type subscriptionStats struct {
	MsgBacklog       int64           `json:"msgBacklog"`
	Type             string          `json:"type"`
	IsDurable        bool            `json:"isDurable"`
	MsgRateOut       float64         `json:"msgRateOut"`
	MsgThroughputOut float64         `json:"msgThroughputOut"`
	UnackedMessages  int             `json:"unackedMessages"`
	Consumers        []consumerStats `json:"consumers"`
}

type topicStatsJSON struct {
	MsgRateIn        float64                      `json:"msgRateIn"`
	MsgThroughputIn  float64                      `json:"msgThroughputIn"`
	MsgRateOut       float64                      `json:"msgRateOut"`
	MsgThroughputOut float64                      `json:"msgThroughputOut"`
	MsgInCounter     int64                        `json:"msgInCounter"`
	BytesInCounter   int64                        `json:"bytesInCounter"`
	MsgOutCounter    int64                        `json:"msgOutCounter"`
	BytesOutCounter  int64                        `json:"bytesOutCounter"`
	AverageMsgSize   float64                      `json:"averageMsgSize"`
	StorageSize      int64                        `json:"storageSize"`
	EntriesCount     int64                        `json:"entriesCount"`
	Publishers       []publisherStats             `json:"publishers"`
	WaitingProducers int                          `json:"waitingProducersCount"`
	TopicEpoch       uint64                       `json:"topicEpoch"`
	StorageProfile   string                       `json:"nereusStorageProfile"`
	BacklogSize      int64                        `json:"backlogSize"`
	QuotaLimitSize   int64                        `json:"backlogQuotaLimitSize"`
	QuotaLimitTime   int64                        `json:"backlogQuotaLimitTime"`
	OldestBacklogAge int64                        `json:"oldestBacklogMessageAgeSeconds"`
	Subscriptions    map[string]subscriptionStats `json:"subscriptions"`
}

func (s *Server) topicStats(ctx context.Context, n managedledger.TopicName) (topicStatsJSON, error) {
	t, err := s.getTopic(ctx, n, false)
	if err != nil {
		return topicStatsJSON{}, err
	}
	info, err := t.ledger.Info(ctx)
	if err != nil {
		return topicStatsJSON{}, err
	}
	st := &t.stats
	st.mu.Lock()
	out := topicStatsJSON{MsgRateIn: st.rateIn, MsgThroughputIn: st.tputIn, MsgRateOut: st.rateOut, MsgThroughputOut: st.tputOut}
	st.mu.Unlock()
	out.MsgInCounter, out.BytesInCounter = st.msgIn.Load(), st.bytesIn.Load()
	out.MsgOutCounter, out.BytesOutCounter = st.msgOut.Load(), st.bytesOut.Load()
	if out.MsgRateIn > 0 {
		out.AverageMsgSize = out.MsgThroughputIn / out.MsgRateIn
	}
	out.StorageSize = info.CommittedBytes
	out.StorageProfile = info.Profile.String()
	out.EntriesCount = info.EndOffset - info.StartOffset
	out.QuotaLimitSize, out.QuotaLimitTime, out.OldestBacklogAge = -1, -1, -1
	if b, err := t.backlog(ctx); err == nil {
		out.BacklogSize, out.OldestBacklogAge = b.bytes, b.ageSeconds
	}
	if qs, err := s.backlogQuotas(ctx, t.name); err == nil {
		if q, ok := qs[quotaStorage]; ok {
			out.QuotaLimitSize = q.LimitSize
		}
		if q, ok := qs[quotaAge]; ok {
			out.QuotaLimitTime = q.LimitTime
		}
	}
	out.Publishers = []publisherStats{}
	out.Subscriptions = map[string]subscriptionStats{}
	t.mu.Lock()
	for _, p := range t.producers {
		out.Publishers = append(out.Publishers, publisherStats{ProducerName: p.name, ProducerID: p.id, Address: p.c.nc.RemoteAddr().String(),
			AccessMode: p.mode.String(), ClientVersion: p.c.clientVersion, ConnectedSince: p.since.UTC().Format(time.RFC3339Nano),
			Metadata: nonNilMap(p.metadata)})
	}
	out.WaitingProducers = len(t.waiting)
	out.TopicEpoch = t.epoch
	t.mu.Unlock()
	sort.Slice(out.Publishers, func(i, j int) bool { return out.Publishers[i].ProducerName < out.Publishers[j].ProducerName })
	loaded := map[string]bool{}
	for _, sub := range t.subscriptionList() {
		loaded[sub.name] = true
		ss := subscriptionStats{MsgBacklog: sub.cursor.Backlog(info.EndOffset), IsDurable: sub.durable, Consumers: []consumerStats{}}
		sub.call(func() {
			ss.Type = sub.subType.String()
			for _, c := range sub.consumers {
				ss.Consumers = append(ss.Consumers, consumerStats{ConsumerName: c.name, AvailablePermits: c.permits, UnackedMessages: c.unacked,
					Address: c.c.nc.RemoteAddr().String(), ClientVersion: c.c.clientVersion, ConnectedSince: c.since.UTC().Format(time.RFC3339Nano),
					PriorityLevel: c.priority, Metadata: nonNilMap(c.metadata)})
				ss.UnackedMessages += c.unacked
			}
		})
		if len(ss.Consumers) > 0 && out.MsgRateOut > 0 {
			ss.MsgRateOut, ss.MsgThroughputOut = out.MsgRateOut, out.MsgThroughputOut
		}
		out.Subscriptions[sub.name] = ss
	}
	names, err := t.ledger.ListCursors(ctx)
	if err != nil {
		return topicStatsJSON{}, err
	}
	for _, name := range names {
		if loaded[name] {
			continue
		}
		c, _, err := t.ledger.OpenCursor(ctx, name, func() (int64, error) { return info.EndOffset, nil })
		if err != nil {
			return topicStatsJSON{}, err
		}
		out.Subscriptions[name] = subscriptionStats{MsgBacklog: c.Backlog(info.EndOffset), IsDurable: true, Type: "Exclusive", Consumers: []consumerStats{}}
	}
	return out, nil
}

func (a *httpAPI) topicStats(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	st, err := a.s.topicStats(ctx, n)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, st)
}

// partitionStats is one partition's stats, from its owner.
func (a *httpAPI) partitionStats(ctx context.Context, r *http.Request, p managedledger.TopicName) (topicStatsJSON, error) {
	res, local, err := a.forwardToOwner(r, p, "/stats", nil)
	switch {
	case err != nil:
		return topicStatsJSON{}, err
	case local:
		return a.s.topicStats(ctx, p)
	case res.status == http.StatusNotFound:
		return topicStatsJSON{}, managedledger.ErrTopicNotFound
	case res.status != http.StatusOK:
		return topicStatsJSON{}, fmt.Errorf("stats of %s from its owner: %d %s", p, res.status, res.body)
	}
	var st topicStatsJSON
	if err := json.Unmarshal(res.body, &st); err != nil {
		return topicStatsJSON{}, fmt.Errorf("stats of %s from its owner: %w", p, err)
	}
	return st, nil
}

func (a *httpAPI) partitionedStats(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	cnt, err := a.s.ml.PartitionCount(ctx, n)
	if err != nil {
		writeErr(w, err)
		return
	}
	if cnt == 0 {
		writeErr(w, managedledger.ErrTopicNotFound)
		return
	}
	agg := topicStatsJSON{Publishers: []publisherStats{}, Subscriptions: map[string]subscriptionStats{}}
	parts := map[string]topicStatsJSON{}
	for i := 0; i < cnt; i++ {
		st, err := a.partitionStats(ctx, r, n.Partition(i))
		if err != nil {
			if errors.Is(err, managedledger.ErrTopicNotFound) {
				continue
			}
			writeErr(w, err)
			return
		}
		parts[n.Partition(i).String()] = st
		agg.MsgRateIn += st.MsgRateIn
		agg.MsgThroughputIn += st.MsgThroughputIn
		agg.MsgRateOut += st.MsgRateOut
		agg.MsgThroughputOut += st.MsgThroughputOut
		agg.MsgInCounter += st.MsgInCounter
		agg.BytesInCounter += st.BytesInCounter
		agg.MsgOutCounter += st.MsgOutCounter
		agg.BytesOutCounter += st.BytesOutCounter
		agg.StorageSize += st.StorageSize
		agg.EntriesCount += st.EntriesCount
		agg.BacklogSize += st.BacklogSize
		agg.Publishers = append(agg.Publishers, st.Publishers...)
		for name, ss := range st.Subscriptions {
			a := agg.Subscriptions[name]
			a.MsgBacklog += ss.MsgBacklog
			a.Type, a.IsDurable = ss.Type, ss.IsDurable
			a.UnackedMessages += ss.UnackedMessages
			a.Consumers = append(a.Consumers, ss.Consumers...)
			agg.Subscriptions[name] = a
		}
	}
	writeJSON(w, 200, map[string]any{
		"msgRateIn": agg.MsgRateIn, "msgThroughputIn": agg.MsgThroughputIn, "msgRateOut": agg.MsgRateOut,
		"msgThroughputOut": agg.MsgThroughputOut, "msgInCounter": agg.MsgInCounter, "bytesInCounter": agg.BytesInCounter,
		"msgOutCounter": agg.MsgOutCounter, "bytesOutCounter": agg.BytesOutCounter, "storageSize": agg.StorageSize,
		"backlogSize": agg.BacklogSize, "publishers": agg.Publishers, "subscriptions": agg.Subscriptions,
		"metadata": map[string]int{"partitions": cnt}, "partitions": parts,
	})
}

func (a *httpAPI) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	t, ok := a.loadTopic(ctx, w, r)
	if !ok {
		return
	}
	names, err := t.ledger.ListCursors(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, nonNil(names))
}

func (a *httpAPI) createSubscription(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	t, err := a.s.getTopic(ctx, n, a.s.autoCreate())
	if err != nil {
		writeErr(w, err)
		return
	}
	name := r.PathValue("sub")
	if exists, err := t.ledger.CursorExists(ctx, name); err != nil {
		writeErr(w, err)
		return
	} else if exists {
		writeErr(w, managedledger.ErrExists)
		return
	}
	// Body: optional {"ledgerId":..,"entryId":..}; default latest.
	var pos struct {
		LedgerID *int64 `json:"ledgerId"`
		EntryID  *int64 `json:"entryId"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
	_ = json.Unmarshal(body, &pos)
	_, err = t.openSubscription(ctx, &pb.CommandSubscribe{Subscription: &name, Durable: boolPtr(true),
		InitialPosition: pb.CommandSubscribe_Latest.Enum()})
	if err == nil && pos.LedgerID != nil && pos.EntryID != nil {
		start, end, berr := t.ledger.Bounds(ctx)
		if berr == nil {
			off := min(max(t.ledger.OffsetOf(managedledger.Position{LedgerID: *pos.LedgerID, EntryID: *pos.EntryID}), start), end)
			t.mu.Lock()
			sub := t.subs[name]
			t.mu.Unlock()
			if sub != nil {
				sub.call(func() { sub.cursor.Reset(off); sub.rewind(); sub.readPos = off })
				err = sub.cursor.Flush(ctx)
			}
		}
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func boolPtr(b bool) *bool { return &b }

func (a *httpAPI) deleteSubscription(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	t, ok := a.loadTopic(ctx, w, r)
	if !ok {
		return
	}
	name := r.PathValue("sub")
	t.mu.Lock()
	sub := t.subs[name]
	t.mu.Unlock()
	if sub != nil {
		has := false
		sub.call(func() { has = len(sub.consumers) > 0 })
		if has && r.URL.Query().Get("force") != "true" {
			writeErr(w, errClientsConnected)
			return
		}
		var cs []*consumer
		sub.call(func() { cs = append(cs, sub.consumers...) })
		for _, c := range cs {
			c.closeByBroker()
		}
	}
	if err := t.deleteSubscription(ctx, name); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) getSchema(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	var version []byte
	if v := r.PathValue("version"); v != "" {
		iv, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"reason": "bad version"})
			return
		}
		version = schemaVersionBytes(int(iv))
	}
	st, v, err := getSchema(ctx, a.s, n.String(), version)
	if err != nil {
		writeErr(w, err)
		return
	}
	data := string(st.Data)
	if !isText(pb.Schema_Type(st.Type)) {
		data = base64.StdEncoding.EncodeToString(st.Data)
	}
	writeJSON(w, 200, map[string]any{"version": v, "type": schemaTypeName(pb.Schema_Type(st.Type)), "timestamp": 0,
		"data": data, "properties": nonNilMap(st.Properties)})
}

func (a *httpAPI) deleteSchema(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.ml.DeleteState(ctx, n.Base(), "schemas"); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, map[string]int{"version": 0})
}

func isText(t pb.Schema_Type) bool {
	switch t {
	case pb.Schema_Json, pb.Schema_Avro, pb.Schema_Protobuf, pb.Schema_String, pb.Schema_KeyValue, pb.Schema_ProtobufNative:
		return true
	}
	return false
}

// schemaTypeName is the REST API's spelling of a schema type.
func schemaTypeName(t pb.Schema_Type) string {
	switch t {
	case pb.Schema_None:
		return "BYTES"
	case pb.Schema_ProtobufNative:
		return "PROTOBUF_NATIVE"
	case pb.Schema_KeyValue:
		return "KEY_VALUE"
	case pb.Schema_LocalDate:
		return "LOCAL_DATE"
	case pb.Schema_LocalTime:
		return "LOCAL_TIME"
	case pb.Schema_LocalDateTime:
		return "LOCAL_DATE_TIME"
	}
	return strings.ToUpper(t.String())
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// busy reports whether producers or consumers are attached.
func (t *topic) busy() bool {
	t.mu.Lock()
	busy := len(t.producers) > 0
	subs := make([]*subscription, 0, len(t.subs))
	for _, sub := range t.subs {
		subs = append(subs, sub)
	}
	t.mu.Unlock()
	for _, sub := range subs {
		has := false
		sub.call(func() { has = len(sub.consumers) > 0 })
		busy = busy || has
	}
	return busy
}
