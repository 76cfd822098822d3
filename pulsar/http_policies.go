package pulsar

// Retention and backlog-quota policies over REST (pulsar-admin namespaces
// get/set/remove-retention, get-backlog-quotas / set-backlog-quota /
// remove-backlog-quota, and the same under pulsar-admin topics):
//
//	GET|POST|DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/retention
//	GET             /admin/v2/namespaces/{tenant}/{ns}/backlogQuotaMap
//	POST|DELETE     /admin/v2/namespaces/{tenant}/{ns}/backlogQuota?backlogQuotaType=destination_storage|message_age
//	GET             /admin/v2/{domain}/{tenant}/{ns}/{topic}/backlogQuotaMap
//	POST|DELETE     /admin/v2/{domain}/{tenant}/{ns}/{topic}/backlogQuota?backlogQuotaType=...
//
// A topic policy on a partitioned topic applies to all its partitions. A
// retention change is applied to the topics' streams at once.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/nereusstream/nereus-go/managedledger"
)

// policyRoutes are this file's routes; all need the tenant's admin (as in
// Pulsar) when authorization is on (http_auth.go).
var policyRoutes = []string{
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/retention",
	"POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/retention",
	"DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/retention",
	"GET /admin/v2/namespaces/{tenant}/{ns}/backlogQuotaMap",
	"POST /admin/v2/namespaces/{tenant}/{ns}/backlogQuota",
	"DELETE /admin/v2/namespaces/{tenant}/{ns}/backlogQuota",
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/backlogQuotaMap",
	"POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/backlogQuota",
	"DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/backlogQuota",
}

func init() {
	for _, p := range policyRoutes {
		httpKinds[p] = kindTenantAdmin
	}
}

type handleFuncer interface {
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

func (a *httpAPI) registerPolicies(mux handleFuncer) {
	handlers := []http.HandlerFunc{a.getTopicRetention, a.setTopicRetention, a.setTopicRetention,
		a.getNamespaceQuotas, a.setNamespaceQuota, a.setNamespaceQuota,
		a.getTopicQuotas, a.setTopicQuota, a.setTopicQuota}
	for i, p := range policyRoutes {
		mux.HandleFunc(p, handlers[i])
	}
}

// readRetention parses a RetentionPolicies body; ok is false when an error
// was written.
func readRetention(w http.ResponseWriter, r *http.Request) (*managedledger.RetentionPolicies, bool) {
	rp := &managedledger.RetentionPolicies{}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
	if err := json.Unmarshal(body, rp); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"reason": "body must be {\"retentionTimeInMinutes\":N,\"retentionSizeInMB\":M}"})
		return nil, false
	}
	if rp.RetentionTimeInMinutes < -1 || rp.RetentionSizeInMB < -1 {
		writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": "retention values must be >= -1 (-1 = infinite)"})
		return nil, false
	}
	return rp, true
}

func (a *httpAPI) getTopicRetention(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	tp, err := a.s.ml.GetTopicPolicies(ctx, n)
	if err != nil {
		writeErr(w, err)
		return
	}
	if r.URL.Query().Get("applied") == "true" {
		rp, err := a.s.effectiveRetention(ctx, n)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, rp)
		return
	}
	if tp.Retention == nil {
		w.WriteHeader(http.StatusNoContent) // pulsar-admin prints null
		return
	}
	writeJSON(w, 200, tp.Retention)
}

func (a *httpAPI) setTopicRetention(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	var rp *managedledger.RetentionPolicies
	if r.Method == http.MethodPost {
		if rp, ok = readRetention(w, r); !ok {
			return
		}
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.topicMustExist(ctx, n); err != nil {
		writeErr(w, err)
		return
	}
	if err := a.s.ml.UpdateTopicPolicies(ctx, n, func(tp *managedledger.TopicPolicies) { tp.Retention = rp }); err != nil {
		writeErr(w, err)
		return
	}
	if err := a.s.applyRetentionTo(ctx, []string{n.Base().String()}); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// topicMustExist answers ErrTopicNotFound for a topic that is neither
// partitioned nor non-partitioned.
func (s *Server) topicMustExist(ctx context.Context, n managedledger.TopicName) error {
	if k, err := s.ml.PartitionCount(ctx, n.Base()); err != nil {
		return err
	} else if k > 0 {
		return nil
	}
	ok, err := s.ml.Exists(ctx, n)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", managedledger.ErrTopicNotFound, n)
	}
	return nil
}

// readQuota parses a BacklogQuota body and the quota type.
func readQuota(w http.ResponseWriter, r *http.Request) (string, managedledger.BacklogQuota, bool) {
	kind := r.URL.Query().Get("backlogQuotaType")
	if kind == "" {
		kind = quotaStorage
	}
	if kind != quotaStorage && kind != quotaAge {
		writeJSON(w, http.StatusBadRequest, map[string]string{"reason": "backlogQuotaType must be destination_storage or message_age"})
		return "", managedledger.BacklogQuota{}, false
	}
	if r.Method == http.MethodDelete {
		return kind, managedledger.BacklogQuota{}, true
	}
	var in struct {
		Limit     *int64 `json:"limit"`
		LimitSize *int64 `json:"limitSize"`
		LimitTime *int64 `json:"limitTime"`
		Policy    string `json:"policy"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
	if err := json.Unmarshal(body, &in); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"reason": "body must be {\"limitSize\":BYTES,\"limitTime\":SECONDS,\"policy\":...}"})
		return "", managedledger.BacklogQuota{}, false
	}
	q := managedledger.BacklogQuota{LimitSize: -1, LimitTime: -1, Policy: in.Policy}
	switch {
	case in.LimitSize != nil:
		q.LimitSize = *in.LimitSize
	case in.Limit != nil:
		q.LimitSize = *in.Limit
	}
	if in.LimitTime != nil {
		q.LimitTime = *in.LimitTime
	}
	q.Limit = q.LimitSize
	switch q.Policy {
	case policyHold, policyException, policyEviction:
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"reason": fmt.Sprintf("policy must be %s, %s or %s", policyHold, policyException, policyEviction)})
		return "", managedledger.BacklogQuota{}, false
	}
	return kind, q, true
}

func setQuota(m map[string]managedledger.BacklogQuota, kind string, q managedledger.BacklogQuota, del bool) map[string]managedledger.BacklogQuota {
	out := map[string]managedledger.BacklogQuota{}
	for k, v := range m {
		out[k] = v
	}
	if del {
		delete(out, kind)
	} else {
		out[kind] = q
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// quotaAboveRetention is Pulsar's check that a size quota stays below the
// retention size it would otherwise be trimmed by.
func quotaAboveRetention(q managedledger.BacklogQuota, rp *managedledger.RetentionPolicies) bool {
	return rp != nil && rp.RetentionSizeInMB > 0 && q.LimitSize > 0 && q.LimitSize >= rp.RetentionSizeInMB<<20
}

func (a *httpAPI) getNamespaceQuotas(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	p, err := a.s.ml.GetNamespace(ctx, nsName(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	out := p.BacklogQuota
	if out == nil {
		out = map[string]managedledger.BacklogQuota{}
	}
	writeJSON(w, 200, out)
}

func (a *httpAPI) setNamespaceQuota(w http.ResponseWriter, r *http.Request) {
	kind, q, ok := readQuota(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if cur, err := a.s.ml.GetNamespace(ctx, nsName(r)); err != nil {
		writeErr(w, err)
		return
	} else if r.Method == http.MethodPost && quotaAboveRetention(q, cur.Retention) {
		writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": "Backlog Quota exceeds configured retention quota for namespace. Please increase retention quota and retry"})
		return
	}
	err := a.s.ml.SetNamespacePolicies(ctx, nsName(r), func(p *managedledger.NamespacePolicies) {
		p.BacklogQuota = setQuota(p.BacklogQuota, kind, q, r.Method == http.MethodDelete)
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) getTopicQuotas(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	var out map[string]managedledger.BacklogQuota
	var err error
	if r.URL.Query().Get("applied") == "true" {
		out, err = a.s.backlogQuotas(ctx, n)
	} else {
		var tp managedledger.TopicPolicies
		tp, err = a.s.ml.GetTopicPolicies(ctx, n)
		out = tp.BacklogQuota
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	if out == nil {
		out = map[string]managedledger.BacklogQuota{}
	}
	writeJSON(w, 200, out)
}

func (a *httpAPI) setTopicQuota(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	kind, q, ok := readQuota(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if r.Method == http.MethodPost {
		if rp, err := a.s.effectiveRetention(ctx, n); err != nil {
			writeErr(w, err)
			return
		} else if quotaAboveRetention(q, &rp) {
			writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": "Backlog Quota exceeds configured retention quota for topic. Please increase retention quota and retry"})
			return
		}
	}
	err := a.s.ml.UpdateTopicPolicies(ctx, n, func(tp *managedledger.TopicPolicies) {
		tp.BacklogQuota = setQuota(tp.BacklogQuota, kind, q, r.Method == http.MethodDelete)
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
