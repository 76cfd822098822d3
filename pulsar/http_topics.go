package pulsar

// More pulsar-admin topics / namespaces paths:
//
//	GET    /admin/v2/{domain}/{tenant}/{ns}/{topic}/internalStats (alias internal-stats), …/partitioned-internalStats
//	PUT    /admin/v2/{domain}/{tenant}/{ns}/{topic}/unload      (clients reconnect through lookup)
//	PUT    /admin/v2/namespaces/{tenant}/{ns}/unload
//	POST   /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/resetcursor  (body: a message id)
//	POST   /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/skip/{n}
//	POST   /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/expireMessages/{seconds}
//	GET|POST|DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/deduplicationEnabled
//	GET|DELETE      /admin/v2/namespaces/{tenant}/{ns}/deduplication
//
// Subscription paths (create, delete, reset, skip, expire, clear backlog)
// and unload on a partitioned topic apply to every partition (perPartition).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/stream"
)

var topicRoutes = map[string]httpKind{
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/internalStats":                                kindTenantAdmin,
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/internal-stats":                               kindTenantAdmin,
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitioned-internalStats":                    kindTenantAdmin,
	"PUT /admin/v2/{domain}/{tenant}/{ns}/{topic}/unload":                                       kindTenantAdmin,
	"PUT /admin/v2/namespaces/{tenant}/{ns}/unload":                                             kindTenantAdmin,
	"POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/resetcursor":              kindTenantAdmin,
	"POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/skip/{n}":                 kindTenantAdmin,
	"POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/expireMessages/{seconds}": kindTenantAdmin,
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/deduplicationEnabled":                         kindTenantAdmin,
	"POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/deduplicationEnabled":                        kindTenantAdmin,
	"DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/deduplicationEnabled":                      kindTenantAdmin,
	"GET /admin/v2/namespaces/{tenant}/{ns}/deduplication":                                      kindTenantAdmin,
	"DELETE /admin/v2/namespaces/{tenant}/{ns}/deduplication":                                   kindTenantAdmin,
	"PUT /admin/v2/{domain}/{tenant}/{ns}/{topic}/compaction":                                   kindTenantAdmin,
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/compaction":                                   kindTenantAdmin,
}

func init() {
	for p, k := range topicRoutes {
		httpKinds[p] = k
	}
}

func (a *httpAPI) registerTopicRoutes(mux handleFuncer) {
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/internalStats", a.owned(a.internalStats))
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/internal-stats", a.owned(a.internalStats))
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitioned-internalStats", a.partitionedInternalStats)
	mux.HandleFunc("PUT /admin/v2/{domain}/{tenant}/{ns}/{topic}/unload", a.perPartition(a.unloadTopic))
	mux.HandleFunc("PUT /admin/v2/{domain}/{tenant}/{ns}/{topic}/compaction", a.perPartition(a.triggerCompaction))
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/compaction", a.compactionStatus)
	mux.HandleFunc("PUT /admin/v2/namespaces/{tenant}/{ns}/unload", a.unloadNamespace)
	mux.HandleFunc("POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/resetcursor", a.perPartition(a.resetCursorByID))
	mux.HandleFunc("POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/skip/{n}", a.perPartition(a.skipMessages))
	mux.HandleFunc("POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/expireMessages/{seconds}", a.perPartition(a.expireMessages))
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/deduplicationEnabled", a.getTopicDedup)
	mux.HandleFunc("POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/deduplicationEnabled", a.setTopicDedup)
	mux.HandleFunc("DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/deduplicationEnabled", a.setTopicDedup)
	mux.HandleFunc("GET /admin/v2/namespaces/{tenant}/{ns}/deduplication", a.getNamespaceDedup)
	mux.HandleFunc("DELETE /admin/v2/namespaces/{tenant}/{ns}/deduplication", a.deleteNamespaceDedup)
}

// perPartition runs h once per partition when the path names a partitioned
// topic (the first failure answers), else once.
func (a *httpAPI) perPartition(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, ok := a.topicName(w, r)
		if !ok {
			return
		}
		ctx, cancel := a.ctx(r)
		cnt, err := a.s.ml.PartitionCount(ctx, n)
		cancel()
		if err != nil {
			writeErr(w, err)
			return
		}
		if cnt == 0 {
			if a.redirectToOwner(w, r, n) {
				return
			}
			h(w, r)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		for i := 0; i < cnt; i++ {
			// A partition served by another broker runs there.
			res, local, err := a.forwardToOwner(r, n.Partition(i), "", body)
			if err != nil {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"reason": err.Error()})
				return
			}
			if !local {
				if res.status/100 != 2 {
					if ct := res.header.Get("Content-Type"); ct != "" {
						w.Header().Set("Content-Type", ct)
					}
					w.WriteHeader(res.status)
					_, _ = w.Write(res.body)
					return
				}
				continue
			}
			pr := r.Clone(r.Context())
			pr.SetPathValue("topic", n.Partition(i).Local)
			pr.Body = io.NopCloser(strings.NewReader(string(body)))
			rec := httptest.NewRecorder()
			h(rec, pr)
			if rec.Code/100 != 2 {
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func (a *httpAPI) unloadTopic(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.topicMustExist(ctx, n); err != nil {
		writeErr(w, err)
		return
	}
	if err := a.s.unload(ctx, n); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// unload closes a loaded topic (pulsar-admin topics unload): its producers
// and consumers are told to reconnect, find the topic through lookup and
// load it again; cursors are persisted first, so nothing acknowledged is
// redelivered and nothing unacknowledged is lost. A topic not loaded here
// is a no-op.
func (s *Server) unload(ctx context.Context, n managedledger.TopicName) error {
	s.mu.Lock()
	tl := s.topics[n.String()]
	s.mu.Unlock()
	if tl == nil {
		return nil
	}
	<-tl.done
	if tl.t == nil {
		return nil
	}
	s.log.Info("pulsar topic unloaded by admin", "topic", n.String())
	return tl.t.close(ctx, true)
}

func (a *httpAPI) unloadNamespace(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	ns := nsName(r)
	if _, err := a.s.ml.GetNamespace(ctx, ns); err != nil {
		writeErr(w, err)
		return
	}
	for _, t := range a.s.loadedTopics() {
		if t.name.NamespaceName() != ns {
			continue
		}
		if err := t.close(ctx, true); err != nil {
			writeErr(w, err)
			return
		}
	}
	// In a cluster the namespace's topics are served by every node: the
	// receiving node unloads its own and asks each other node to unload
	// theirs (as a Pulsar broker unloads every bundle on its owner).
	if r.URL.Query().Get(localOnlyParam) != "true" {
		if err := a.onEveryPeer(ctx, r); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"reason": err.Error()})
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// resetCursorByID is pulsar-admin topics reset-cursor --messageId: the
// subscription restarts at the message id (after it with ?isExcluded=true).
func (a *httpAPI) resetCursorByID(w http.ResponseWriter, r *http.Request) {
	var id struct {
		LedgerID *int64 `json:"ledgerId"`
		EntryID  *int64 `json:"entryId"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
	if err := json.Unmarshal(body, &id); err != nil || id.LedgerID == nil || id.EntryID == nil {
		writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": "body must be a message id {\"ledgerId\":L,\"entryId\":E}"})
		return
	}
	excluded := r.URL.Query().Get("isExcluded") == "true"
	a.moveCursor(w, r, func(ctx context.Context, l *managedledger.Ledger) (int64, error) {
		off := l.OffsetOf(managedledger.Position{LedgerID: *id.LedgerID, EntryID: *id.EntryID})
		if excluded && off >= 0 && off < 1<<62 {
			if e, ok, err := l.EntryContaining(ctx, off); err != nil {
				return 0, err
			} else if ok {
				return e.End(), nil
			}
		}
		return off, nil
	})
}

// skipMessages is pulsar-admin topics skip: the subscription's first n
// unacknowledged messages count as acknowledged.
func (a *httpAPI) skipMessages(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n < 0 {
		writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": "the number of messages must be a non-negative integer"})
		return
	}
	a.advanceCursor(w, r, func(ctx context.Context, t *topic, from int64) (int64, error) { return from + n, nil })
}

// expireMessages is pulsar-admin topics expire-messages: messages published
// more than the given seconds ago count as acknowledged.
func (a *httpAPI) expireMessages(w http.ResponseWriter, r *http.Request) {
	sec, err := strconv.ParseInt(r.PathValue("seconds"), 10, 64)
	if err != nil || sec < 0 {
		writeJSON(w, http.StatusPreconditionFailed, map[string]string{"reason": "the expiry must be a non-negative number of seconds"})
		return
	}
	a.advanceCursor(w, r, func(ctx context.Context, t *topic, _ int64) (int64, error) {
		return t.ledger.OffsetForTimestamp(ctx, time.Now().Add(-time.Duration(sec)*time.Second).UnixMilli())
	})
}

// advanceCursor acknowledges everything below the offset target computes
// (from the subscription's first unacknowledged offset), keeping
// acknowledgements above it and the connected consumers.
func (a *httpAPI) advanceCursor(w http.ResponseWriter, r *http.Request, target func(context.Context, *topic, int64) (int64, error)) {
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
	sub, err := t.openSubscription(ctx, &pb.CommandSubscribe{Subscription: &name, Durable: boolPtr(true),
		InitialPosition: pb.CommandSubscribe_Latest.Enum()})
	if err != nil {
		writeErr(w, err)
		return
	}
	off, err := target(ctx, t, sub.cursor.AckedBelow())
	if err != nil {
		writeErr(w, err)
		return
	}
	_, end, err := t.ledger.Bounds(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	off = min(off, end)
	sub.call(func() { sub.skipBelow(off) })
	if err := sub.cursor.Flush(ctx); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) getTopicDedup(w http.ResponseWriter, r *http.Request) {
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
		writeJSON(w, 200, a.s.dedupEnabled(ctx, n))
		return
	}
	if tp.Deduplication == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, 200, *tp.Deduplication)
}

func (a *httpAPI) setTopicDedup(w http.ResponseWriter, r *http.Request) {
	n, ok := a.topicName(w, r)
	if !ok {
		return
	}
	var on *bool
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64))
		b, err := strconv.ParseBool(strings.TrimSpace(string(body)))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"reason": "body must be true or false"})
			return
		}
		on = &b
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.topicMustExist(ctx, n); err != nil {
		writeErr(w, err)
		return
	}
	if err := a.s.ml.UpdateTopicPolicies(ctx, n, func(tp *managedledger.TopicPolicies) { tp.Deduplication = on }); err != nil {
		writeErr(w, err)
		return
	}
	a.s.refreshDedup(ctx, n.Base())
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) getNamespaceDedup(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	p, err := a.s.ml.GetNamespace(ctx, nsName(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	if p.Deduplication == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, 200, *p.Deduplication)
}

func (a *httpAPI) deleteNamespaceDedup(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.s.ml.SetNamespacePolicies(ctx, nsName(r), func(p *managedledger.NamespacePolicies) { p.Deduplication = nil }); err != nil {
		writeErr(w, err)
		return
	}
	a.s.refreshNamespaceDedup(ctx, nsName(r))
	w.WriteHeader(http.StatusNoContent)
}

// internalStatsJSON is Pulsar's PersistentTopicInternalStats. A topic is
// one virtual ledger (its stream): "ledgers" lists that one ledger, whose
// entries count offsets (messages on message-counted topics).
type internalStatsJSON struct {
	EntriesAddedCounter        int64                         `json:"entriesAddedCounter"`
	NumberOfEntries            int64                         `json:"numberOfEntries"`
	TotalSize                  int64                         `json:"totalSize"`
	CurrentLedgerEntries       int64                         `json:"currentLedgerEntries"`
	CurrentLedgerSize          int64                         `json:"currentLedgerSize"`
	LastLedgerCreatedTimestamp string                        `json:"lastLedgerCreatedTimestamp"`
	WaitingCursorsCount        int                           `json:"waitingCursorsCount"`
	PendingAddEntriesCount     int                           `json:"pendingAddEntriesCount"`
	LastConfirmedEntry         string                        `json:"lastConfirmedEntry"`
	State                      string                        `json:"state"`
	Ledgers                    []internalLedgerJSON          `json:"ledgers"`
	Cursors                    map[string]internalCursorJSON `json:"cursors"`
	SchemaLedgers              []internalLedgerJSON          `json:"schemaLedgers"`
	CompactedLedger            internalLedgerJSON            `json:"compactedLedger"`
	Nereus                     map[string]any                `json:"nereus"`
}

type internalLedgerJSON struct {
	LedgerID        int64 `json:"ledgerId"`
	Entries         int64 `json:"entries"`
	Size            int64 `json:"size"`
	Offloaded       bool  `json:"offloaded"`
	UnderReplicated bool  `json:"underReplicated"`
}

type internalCursorJSON struct {
	MarkDeletePosition                       string            `json:"markDeletePosition"`
	ReadPosition                             string            `json:"readPosition"`
	WaitingReadOp                            bool              `json:"waitingReadOp"`
	PendingReadOps                           int               `json:"pendingReadOps"`
	MessagesConsumedCounter                  int64             `json:"messagesConsumedCounter"`
	CursorLedger                             int64             `json:"cursorLedger"`
	CursorLedgerLastEntry                    int64             `json:"cursorLedgerLastEntry"`
	IndividuallyDeletedMessages              string            `json:"individuallyDeletedMessages"`
	LastLedgerSwitchTimestamp                string            `json:"lastLedgerSwitchTimestamp"`
	State                                    string            `json:"state"`
	Active                                   bool              `json:"active"`
	NumberOfEntriesSinceFirstNotAckedMessage int64             `json:"numberOfEntriesSinceFirstNotAckedMessage"`
	TotalNonContiguousDeletedMessagesRange   int               `json:"totalNonContiguousDeletedMessagesRange"`
	SubscriptionHavePendingRead              bool              `json:"subscriptionHavePendingRead"`
	SubscriptionHavePendingReplayRead        bool              `json:"subscriptionHavePendingReplayRead"`
	Properties                               map[string]string `json:"properties"`
}

func (a *httpAPI) internalStats(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	t, ok := a.loadTopic(ctx, w, r)
	if !ok {
		return
	}
	st, err := t.internalStats(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, st)
}

func (t *topic) internalStats(ctx context.Context) (internalStatsJSON, error) {
	l := t.ledger
	info, err := l.Info(ctx)
	if err != nil {
		return internalStatsJSON{}, err
	}
	lid := l.LedgerID()
	pos := func(off int64) string { return fmt.Sprintf("%d:%d", lid, off) }
	last := int64(-1)
	if info.EndOffset > info.StartOffset {
		if e, ok, err := l.EntryContaining(ctx, info.EndOffset-1); err != nil {
			return internalStatsJSON{}, err
		} else if ok {
			last = e.Offset
		}
	}
	created := info.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z")
	out := internalStatsJSON{
		EntriesAddedCounter: info.EndOffset, NumberOfEntries: info.EndOffset - info.StartOffset, TotalSize: info.RetainedBytes,
		CurrentLedgerEntries: info.EndOffset - info.StartOffset, CurrentLedgerSize: info.RetainedBytes,
		LastLedgerCreatedTimestamp: created, LastConfirmedEntry: pos(last), State: "LedgerOpened",
		Ledgers:       []internalLedgerJSON{{LedgerID: lid, Entries: info.EndOffset - info.StartOffset, Size: info.RetainedBytes}},
		Cursors:       map[string]internalCursorJSON{},
		SchemaLedgers: []internalLedgerJSON{}, CompactedLedger: internalLedgerJSON{LedgerID: -1, Entries: -1, Size: -1},
		Nereus: map[string]any{"stream": l.StreamName(), "startOffset": info.StartOffset, "endOffset": info.EndOffset,
			"offsetsPerMessage": l.CountsMessages(), "profile": info.Profile.String()},
	}
	if info.State == stream.StateSealed {
		out.State = "Terminated"
	}
	loaded := map[string]*subscription{}
	for _, sub := range t.subscriptionList() {
		loaded[sub.name] = sub
	}
	names, err := l.ListCursors(ctx)
	if err != nil {
		return internalStatsJSON{}, err
	}
	for _, sub := range loaded {
		if !sub.durable {
			names = append(names, sub.name)
		}
	}
	for _, name := range names {
		var snap managedledger.Snapshot
		read, active := int64(-1), false
		if sub := loaded[name]; sub != nil {
			snap = sub.cursor.Snapshot()
			sub.call(func() { read, active = sub.readPos, len(sub.consumers) > 0 })
		} else {
			c, _, err := l.OpenCursor(ctx, name, func() (int64, error) { return info.EndOffset, nil })
			if err != nil {
				return internalStatsJSON{}, err
			}
			snap = c.Snapshot()
		}
		if read < 0 {
			read = snap.AckedBelow
		}
		md, err := markDeleteEntry(ctx, l, snap.AckedBelow)
		if err != nil {
			return internalStatsJSON{}, err
		}
		var ranges []string
		for _, d := range snap.Deleted {
			ranges = append(ranges, fmt.Sprintf("(%s..%s]", pos(d[0]-1), pos(d[1]-1)))
		}
		out.Cursors[name] = internalCursorJSON{
			MarkDeletePosition: pos(md), ReadPosition: pos(read), CursorLedger: -1, CursorLedgerLastEntry: -1,
			IndividuallyDeletedMessages: "[" + strings.Join(ranges, ", ") + "]", LastLedgerSwitchTimestamp: created,
			State: "Open", Active: active, NumberOfEntriesSinceFirstNotAckedMessage: max(read-snap.AckedBelow, 0) + 1,
			TotalNonContiguousDeletedMessagesRange: len(snap.Deleted), Properties: map[string]string{},
		}
	}
	return out, nil
}

// createSubscriptionsOnNewPartitions gives partitions [from, to) of a grown
// partitioned topic the subscriptions partition 0 has, at their start (as
// Pulsar does when it updates a partition count), so consumers of those
// subscriptions miss nothing produced before they discover the partitions.
func (s *Server) createSubscriptionsOnNewPartitions(ctx context.Context, n managedledger.TopicName, from, to int) error {
	if from <= 0 || to <= from {
		return nil
	}
	l0, err := s.ml.Open(ctx, n.Partition(0), true)
	if err != nil {
		return err
	}
	subs, err := l0.ListCursors(ctx)
	if err != nil {
		return err
	}
	for i := from; i < to; i++ {
		l, err := s.ml.Open(ctx, n.Partition(i), true)
		if err != nil {
			return err
		}
		for _, sub := range subs {
			if _, _, err := l.OpenCursor(ctx, sub, func() (int64, error) { return 0, nil }); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *httpAPI) partitionedInternalStats(w http.ResponseWriter, r *http.Request) {
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
		writeErr(w, fmt.Errorf("%w: %s is not a partitioned topic", managedledger.ErrTopicNotFound, n))
		return
	}
	parts := map[string]internalStatsJSON{}
	for i := 0; i < cnt; i++ {
		res, local, err := a.forwardToOwner(r, n.Partition(i), "/internalStats", nil)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"reason": err.Error()})
			return
		}
		if !local {
			var st internalStatsJSON
			if res.status != http.StatusOK || json.Unmarshal(res.body, &st) != nil {
				writeJSON(w, res.status, json.RawMessage(res.body))
				return
			}
			parts[n.Partition(i).String()] = st
			continue
		}
		t, err := a.s.getTopic(ctx, n.Partition(i), true)
		if err != nil {
			writeErr(w, err)
			return
		}
		st, err := t.internalStats(ctx)
		if err != nil {
			writeErr(w, err)
			return
		}
		parts[n.Partition(i).String()] = st
	}
	writeJSON(w, 200, map[string]any{"metadata": map[string]int{"partitions": cnt}, "partitions": parts})
}
