package pulsar

// Topic admin operations in a cluster.
//
// An admin operation on a topic's live state (stats, internal stats,
// subscriptions, last message id, terminate, unload, cursor operations)
// must run on the broker that serves the topic. As on Pulsar brokers
// (validateTopicOwnership), a broker that does not own the topic answers
// 307 Temporary Redirect to the same path and query on the owner's web
// service URL (https when the request came over TLS and the owner has
// one), with authoritative=true: the redirecting broker's view named that
// owner. An authoritative request that still lands on a non-owner (the
// views disagree for a moment) waits up to a second for this broker's view
// to change before redirecting again; the client's redirect limit bounds
// the hops (pulsar-admin and pulsarctl follow 307s and re-send the method
// and body).
//
// On a partitioned topic the operation fans out to the partitions
// (perPartition, partitionedStats): partitions this broker serves run
// here, the others are forwarded to their owners server-side (one HTTP
// request each, redirects followed, the caller's Authorization header
// passed on) — the way a Pulsar broker calls its peers for the partitions
// of a partitioned topic.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/managedledger"
)

// ownerWebURL is the owner's web service URL for a request that arrived
// over TLS (tls) or not.
func ownerWebURL(b cluster.Broker, tls bool) string {
	plain, secure := ownerHTTPURLs(b, "")
	if tls && secure != "" {
		return secure
	}
	if plain != "" {
		return plain
	}
	return secure
}

// topicOwnerSettled is topicOwner after the verdict on a suspect peer and,
// for an authoritative request, after a short wait for a disagreeing view
// to change.
func (a *httpAPI) topicOwnerSettled(r *http.Request, n managedledger.TopicName) (cluster.Broker, bool, bool) {
	a.s.cluster.Settle(r.Context())
	owner, self, ok := a.s.topicOwner(n)
	if ok && !self && r.URL.Query().Get("authoritative") == "true" {
		a.s.awaitOwnerChange(r.Context(), time.Second)
		owner, self, ok = a.s.topicOwner(n)
	}
	return owner, self, ok
}

// redirectToOwner answers 307 to the owner of n; it reports false (and
// writes nothing) when this broker serves n.
func (a *httpAPI) redirectToOwner(w http.ResponseWriter, r *http.Request, n managedledger.TopicName) bool {
	owner, self, ok := a.topicOwnerSettled(r, n)
	if self {
		return false
	}
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"reason": "no active broker serves topics"})
		return true
	}
	base := ownerWebURL(owner, r.TLS != nil)
	if base == "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"reason": fmt.Sprintf("the owner of %s (%s) has no web service URL", n, owner.NodeID)})
		return true
	}
	q := r.URL.Query()
	q.Set("authoritative", "true")
	loc := base + r.URL.EscapedPath() + "?" + q.Encode()
	http.Redirect(w, r, loc, http.StatusTemporaryRedirect)
	return true
}

// owned wraps an operation on one topic's live state: on a non-owner it
// redirects to the owner; a partitioned topic's name (the operation fans
// out to its partitions) is served here.
func (a *httpAPI) owned(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, ok := a.topicName(w, r)
		if !ok {
			return
		}
		if n.PartitionIndex() < 0 {
			ctx, cancel := a.ctx(r)
			cnt, err := a.s.ml.PartitionCount(ctx, n)
			cancel()
			if err == nil && cnt > 0 {
				h(w, r)
				return
			}
		}
		if a.redirectToOwner(w, r, n) {
			return
		}
		h(w, r)
	}
}

// localOnlyParam marks a request one node forwarded to the others (run
// it here only, forward nothing).
const localOnlyParam = "nereusLocalOnly"

// onEveryPeer runs r (no body) on every other registered node with
// localOnlyParam set, and reports the first failure.
func (a *httpAPI) onEveryPeer(ctx context.Context, r *http.Request) error {
	for _, b := range a.s.cluster.View().Brokers {
		if b.NodeID == a.s.cluster.NodeID() {
			continue
		}
		base := ownerWebURL(b, r.TLS != nil)
		if base == "" {
			continue // no web service: nothing an admin call could reach
		}
		u, err := url.Parse(base)
		if err != nil {
			return err
		}
		u.Path = r.URL.Path
		q := r.URL.Query()
		q.Set(localOnlyParam, "true")
		u.RawQuery = q.Encode()
		req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), nil)
		if err != nil {
			return err
		}
		if v := r.Header.Get("Authorization"); v != "" {
			req.Header.Set("Authorization", v)
		}
		resp, err := forwardClient.Do(req)
		if err != nil {
			return fmt.Errorf("%s on broker %s: %w", r.URL.Path, b.NodeID, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s on broker %s: %s %s", r.URL.Path, b.NodeID, resp.Status, body)
		}
	}
	return nil
}

// forwardClient follows redirects (an owner that moved meanwhile).
var forwardClient = &http.Client{Timeout: 30 * time.Second}

// forwardResult is a forwarded request's answer.
type forwardResult struct {
	status int
	header http.Header
	body   []byte
}

// forwardToOwner runs the request r on p's owner — its path's topic
// replaced by partition p and, when suffix is set, what follows the topic
// replaced by suffix — or reports local=true when this broker serves p.
func (a *httpAPI) forwardToOwner(r *http.Request, p managedledger.TopicName, suffix string, body []byte) (res forwardResult, local bool, err error) {
	owner, self, ok := a.topicOwnerSettled(r, p)
	if self {
		return res, true, nil
	}
	if !ok {
		return forwardResult{status: http.StatusServiceUnavailable,
			body: []byte(`{"reason":"no active broker serves topics"}`)}, false, nil
	}
	base := ownerWebURL(owner, r.TLS != nil)
	if base == "" {
		return res, false, fmt.Errorf("the owner of %s (%s) has no web service URL", p, owner.NodeID)
	}
	// The path with the topic segment replaced by the partition's name.
	prefix := "/admin/v2/" + r.PathValue("domain") + "/" + r.PathValue("tenant") + "/" + r.PathValue("ns") + "/"
	rest, found := strings.CutPrefix(r.URL.Path, prefix+r.PathValue("topic"))
	if !found {
		return res, false, fmt.Errorf("cannot forward %s", r.URL.Path)
	}
	u, err := url.Parse(base)
	if err != nil {
		return res, false, err
	}
	if suffix != "" {
		rest = suffix
	}
	u.Path = prefix + p.Local + rest
	q := r.URL.Query()
	q.Set("authoritative", "true")
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), strings.NewReader(string(body)))
	if err != nil {
		return res, false, err
	}
	if suffix != "" {
		req.Method = http.MethodGet
	}
	for _, h := range []string{"Authorization", "Content-Type", "Accept"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := forwardClient.Do(req)
	if err != nil {
		return res, false, fmt.Errorf("forwarding to the owner of %s: %w", p, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return res, false, err
	}
	return forwardResult{status: resp.StatusCode, header: resp.Header, body: b}, false, nil
}
