package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/stream"
)

// REST API limits. They bound what one request can make the server hold.
const (
	maxRequestBody   = 64 << 20 // bytes of one JSON request body
	defaultReadLimit = 1000     // entries per read when ?limit is absent
	maxReadLimit     = 10000
	defaultReadBytes = 1 << 20
	maxReadBytes     = 32 << 20
	maxWait          = 60 * time.Second
	listDefaultLimit = 1000
	// appendTimeout bounds how long an append may take to settle after its
	// client went away: the append runs detached from the request so a
	// disconnect never leaves its outcome to chance.
	appendTimeout = 30 * time.Second
)

// api serves the /v1 REST API over a stream.Storage.
type api struct {
	storage stream.Storage
	nodeID  string
	logger  *slog.Logger
	metrics *metrics
	// drain is closed when shutdown begins: long polls return at once.
	drain <-chan struct{}

	// cluster owns the append sessions: appends go through
	// cluster.Writer, so only the stream's owner node writes it.
	cluster *cluster.Node
}

func (a *api) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/streams", a.createStream)
	mux.HandleFunc("GET /v1/streams", a.listStreams)
	mux.HandleFunc("GET /v1/streams/{name}", a.describeStream)
	mux.HandleFunc("DELETE /v1/streams/{name}", a.deleteStream)
	mux.HandleFunc("POST /v1/streams/{name}/entries", a.appendEntries)
	mux.HandleFunc("GET /v1/streams/{name}/entries", a.readEntries)
	mux.HandleFunc("POST /v1/streams/{name}/trim", a.trimStream)
	mux.HandleFunc("POST /v1/streams/{name}/seal", a.sealStream)
	mux.HandleFunc("POST /v1/streams/{name}/rebuild-index", a.rebuildIndex)
	mux.HandleFunc("PUT /v1/streams/{name}/retention", a.setRetention)
	mux.HandleFunc("GET /v1/gc", a.gcStatus)
	mux.HandleFunc("POST /v1/gc/run", a.gcRun)
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, adminapi.CodeNotFound, fmt.Sprintf("no API route for %s %s", r.Method, r.URL.Path), "")
	})
}

// errorCode maps a storage error to its API code. Unknown errors are
// INTERNAL; they are logged by the caller.
func errorCode(err error) adminapi.Code {
	switch {
	case errors.Is(err, stream.ErrCommitUnknown), errors.Is(err, context.DeadlineExceeded):
		return adminapi.CodeCommitUnknown
	case errors.Is(err, stream.ErrInvalidArgument):
		return adminapi.CodeInvalidArgument
	case errors.Is(err, stream.ErrStreamNotFound):
		return adminapi.CodeStreamNotFound
	case errors.Is(err, stream.ErrStreamExists):
		return adminapi.CodeStreamExists
	case errors.Is(err, stream.ErrStreamSealed):
		return adminapi.CodeStreamSealed
	case errors.Is(err, stream.ErrUnsupportedProfile):
		return adminapi.CodeUnsupportedProfile
	case errors.Is(err, stream.ErrFenced):
		return adminapi.CodeFenced
	case errors.Is(err, stream.ErrSessionBusy), errors.Is(err, cluster.ErrHandoffPending):
		return adminapi.CodeSessionBusy
	case errors.Is(err, cluster.ErrNotOwner):
		return adminapi.CodeNotOwner
	case errors.Is(err, stream.ErrOffsetConflict):
		return adminapi.CodeOffsetConflict
	case errors.Is(err, stream.ErrOffsetOutOfRange):
		return adminapi.CodeOffsetOutOfRange
	case errors.Is(err, stream.ErrOutOfOrderSequence):
		return adminapi.CodeOutOfOrderSequence
	case errors.Is(err, stream.ErrProducerFenced):
		return adminapi.CodeProducerFenced
	case errors.Is(err, stream.ErrUnknownProducer):
		return adminapi.CodeUnknownProducer
	case errors.Is(err, stream.ErrCorrupt):
		return adminapi.CodeCorrupt
	case errors.Is(err, stream.ErrClosed), errors.Is(err, stream.ErrStorageUnavailable):
		return adminapi.CodeUnavailable
	}
	return adminapi.CodeInternal
}

// message turns a storage error into one clear line for API users.
func message(err error) string {
	return strings.ReplaceAll(err.Error(), "nereus/stream: ", "")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code adminapi.Code, msg, commit string) {
	writeJSON(w, code.Status(), adminapi.ErrorBody{Error: msg, Code: code, Commit: commit})
}

// fail answers with the storage error's code; internal errors are logged.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := errorCode(err)
	if code == adminapi.CodeInternal {
		a.logger.Error("admin API request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, code, message(err), "")
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, adminapi.CodeTooLarge, fmt.Sprintf("request body larger than %d bytes", maxRequestBody), "")
			return false
		}
		if errors.Is(err, io.EOF) {
			writeError(w, adminapi.CodeInvalidArgument, "empty request body (want JSON)", "")
			return false
		}
		writeError(w, adminapi.CodeInvalidArgument, "bad JSON body: "+err.Error(), "")
		return false
	}
	if dec.More() {
		writeError(w, adminapi.CodeInvalidArgument, "bad JSON body: trailing data after the object", "")
		return false
	}
	return true
}

func toAPIInfo(in stream.Info) adminapi.StreamInfo {
	out := adminapi.StreamInfo{
		ID: in.ID.String(), Name: in.Name, Profile: in.Profile.String(), State: in.State.String(),
		Attributes: in.Attributes,
		Retention:  adminapi.Retention{TimeMs: in.Retention.Time.Milliseconds(), Bytes: in.Retention.Bytes},
		CreatedAt:  in.CreatedAt, StartOffset: in.StartOffset, EndOffset: in.EndOffset,
		CommittedBytes: in.CommittedBytes, RetainedBytes: in.RetainedBytes, MaterializedThrough: in.MaterializedThrough,
	}
	if in.Session.Epoch > 0 || in.Session.WriterID != "" {
		out.Session = &adminapi.Session{Epoch: in.Session.Epoch, WriterID: in.Session.WriterID,
			AuthorityEpoch: in.Session.AuthorityEpoch, Expires: in.Session.Expires}
	}
	return out
}

func (a *api) lookup(w http.ResponseWriter, r *http.Request) (stream.Info, bool) {
	name := r.PathValue("name")
	info, err := a.storage.Lookup(r.Context(), name)
	if err != nil {
		if errors.Is(err, stream.ErrStreamNotFound) {
			writeError(w, adminapi.CodeStreamNotFound, fmt.Sprintf("stream %q not found", name), "")
			return stream.Info{}, false
		}
		a.fail(w, r, err)
		return stream.Info{}, false
	}
	return info, true
}

func (a *api) createStream(w http.ResponseWriter, r *http.Request) {
	var req adminapi.CreateStreamRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Name == "" {
		writeError(w, adminapi.CodeInvalidArgument, "stream name must not be empty", "")
		return
	}
	profile, err := stream.ParseProfile(req.Profile)
	if err != nil {
		writeError(w, adminapi.CodeInvalidArgument, message(err), "")
		return
	}
	opts := stream.CreateOptions{Profile: profile, Attributes: req.Attributes}
	if req.Retention != nil {
		if req.Retention.TimeMs < 0 || req.Retention.Bytes < 0 {
			writeError(w, adminapi.CodeInvalidArgument, "retention must not be negative", "")
			return
		}
		opts.Retention = stream.Retention{Time: time.Duration(req.Retention.TimeMs) * time.Millisecond, Bytes: req.Retention.Bytes}
	}
	info, err := a.storage.Create(r.Context(), req.Name, opts)
	if err != nil {
		if errors.Is(err, stream.ErrStreamExists) {
			writeError(w, adminapi.CodeStreamExists, fmt.Sprintf("stream %q already exists (profile %s)", req.Name, info.Profile), "")
			return
		}
		a.fail(w, r, err)
		return
	}
	a.logger.Info("stream created", "stream", info.Name, "id", info.ID, "profile", info.Profile)
	writeJSON(w, http.StatusCreated, toAPIInfo(info))
}

func (a *api) listStreams(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := listDefaultLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			writeError(w, adminapi.CodeInvalidArgument, fmt.Sprintf("limit %q: want a positive integer", s), "")
			return
		}
		limit = min(n, listDefaultLimit)
	}
	// Ask for one more than the page to learn whether a next page exists.
	infos, err := a.storage.List(r.Context(), q.Get("prefix"), q.Get("after"), limit+1)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	resp := adminapi.ListStreamsResponse{Streams: make([]adminapi.StreamInfo, 0, len(infos))}
	if len(infos) > limit {
		infos = infos[:limit]
		resp.Next = infos[limit-1].Name
	}
	for _, in := range infos {
		resp.Streams = append(resp.Streams, toAPIInfo(in))
	}
	writeJSON(w, http.StatusOK, resp)
}

func (a *api) describeStream(w http.ResponseWriter, r *http.Request) {
	if info, ok := a.lookup(w, r); ok {
		writeJSON(w, http.StatusOK, toAPIInfo(info))
	}
}

func (a *api) deleteStream(w http.ResponseWriter, r *http.Request) {
	info, ok := a.lookup(w, r)
	if !ok {
		return
	}
	_ = a.cluster.Release(r.Context(), info.ID)
	if err := a.storage.Delete(r.Context(), info.ID); err != nil {
		a.fail(w, r, err)
		return
	}
	a.logger.Info("stream deleted", "stream", info.Name, "id", info.ID)
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) appendEntries(w http.ResponseWriter, r *http.Request) {
	var req adminapi.AppendRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.Entries) == 0 {
		writeError(w, adminapi.CodeInvalidArgument, "no entries to append", "not_committed")
		return
	}
	now := time.Now().UnixMilli()
	sreq := stream.AppendRequest{Entries: make([]stream.Entry, len(req.Entries)), ExpectedStart: -1}
	if req.ExpectedStart != nil {
		if *req.ExpectedStart < 0 {
			writeError(w, adminapi.CodeInvalidArgument, "expectedStart must not be negative", "not_committed")
			return
		}
		sreq.ExpectedStart = *req.ExpectedStart
	}
	var bytes int64
	for i, e := range req.Entries {
		if e.Text != nil && e.Payload != nil {
			writeError(w, adminapi.CodeInvalidArgument, fmt.Sprintf("entry %d: set payload or text, not both", i), "not_committed")
			return
		}
		payload := e.Payload
		if e.Text != nil {
			payload = []byte(*e.Text)
		}
		if payload == nil {
			payload = []byte{}
		}
		rc := e.RecordCount
		if rc == 0 {
			rc = 1
		}
		ts := e.Timestamp
		if ts == 0 {
			ts = now
		}
		sreq.Entries[i] = stream.Entry{Payload: payload, RecordCount: rc, Timestamp: ts}
		bytes += int64(len(payload))
	}
	info, ok := a.lookup(w, r)
	if !ok {
		return
	}
	// Detached from the request: a client that disconnects must not turn a
	// committing append into an unsettled one.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), appendTimeout)
	defer cancel()
	res, err := a.appendOnce(ctx, info, sreq)
	if errors.Is(err, stream.ErrFenced) {
		// Fenced means not committed: another session of this stream took
		// over. Re-plan once: the cluster takes it again if this node still
		// owns the stream, else it is NOT_OWNER.
		res, err = a.appendOnce(ctx, info, sreq)
	}
	if err != nil {
		commit := "not_committed"
		if stream.CommitCertainty(err) == stream.MaybeCommitted || errors.Is(err, context.DeadlineExceeded) {
			commit = "unknown"
		}
		code := errorCode(err)
		if code == adminapi.CodeInternal {
			a.logger.Error("append failed", "stream", info.Name, "err", err)
		}
		writeError(w, code, message(err), commit)
		return
	}
	resp := adminapi.AppendResponse{Start: res.Start, End: res.End, Duplicate: res.Duplicate, Offsets: make([]int64, len(sreq.Entries))}
	off := res.Start
	for i, e := range sreq.Entries {
		resp.Offsets[i] = off
		off += int64(e.RecordCount)
	}
	if !res.Duplicate {
		a.metrics.appendEntries.Add(float64(len(sreq.Entries)))
		a.metrics.appendBytes.Add(float64(bytes))
	}
	writeJSON(w, http.StatusOK, resp)
}

// appendOnce appends through this node's append session on the stream,
// which the cluster takes when the node owns the stream (the REST API, the
// Kafka and the Pulsar front ends of one process share it: one writer per
// stream and node). Another node's stream is NOT_OWNER.
func (a *api) appendOnce(ctx context.Context, info stream.Info, req stream.AppendRequest) (stream.AppendResult, error) {
	s, err := a.cluster.Writer(ctx, info.ID, info.Name)
	if err != nil {
		return stream.AppendResult{}, err
	}
	res, err := a.storage.Append(ctx, s, req)
	if errors.Is(err, stream.ErrFenced) {
		a.cluster.Lost(s)
	}
	return res, err
}

func (a *api) readEntries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	parseInt := func(key string, def, lo, hi int64) (int64, bool) {
		s := q.Get(key)
		if s == "" {
			return def, true
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < lo || n > hi {
			writeError(w, adminapi.CodeInvalidArgument, fmt.Sprintf("%s=%q: want an integer in [%d, %d]", key, s, lo, hi), "")
			return 0, false
		}
		return n, true
	}
	limit, ok := parseInt("limit", defaultReadLimit, 1, maxReadLimit)
	if !ok {
		return
	}
	maxBytes, ok := parseInt("maxBytes", defaultReadBytes, 1, maxReadBytes)
	if !ok {
		return
	}
	var wait time.Duration
	if s := q.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			writeError(w, adminapi.CodeInvalidArgument, fmt.Sprintf("wait=%q: want a non-negative duration like 5s", s), "")
			return
		}
		wait = min(d, maxWait)
	}
	info, ok := a.lookup(w, r)
	if !ok {
		return
	}
	from := info.StartOffset
	if q.Get("from") != "" {
		if from, ok = parseInt("from", 0, 0, 1<<62); !ok {
			return
		}
	}
	// Long polls end early when the server starts draining, so they never
	// hold shutdown up.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-a.drain:
			cancel()
		case <-ctx.Done():
		}
	}()
	res, err := a.storage.Read(ctx, info.ID, from, stream.ReadOptions{MaxBytes: int(maxBytes), MaxEntries: int(limit), Wait: wait})
	if err != nil && !(ctx.Err() != nil && r.Context().Err() == nil) {
		if errors.Is(err, stream.ErrOffsetOutOfRange) {
			start, end := res.StartOffset, res.EndOffset
			if start == 0 && end == 0 {
				// The storage did not report bounds with the error: use
				// the head seen just before the read.
				start, end = info.StartOffset, info.EndOffset
			}
			msg := fmt.Sprintf("offset %d is past the stream's end offset %d", from, end)
			if from < start {
				msg = fmt.Sprintf("offset %d was trimmed: the stream starts at offset %d", from, start)
			}
			writeError(w, adminapi.CodeOffsetOutOfRange, msg, "")
			return
		}
		a.fail(w, r, err)
		return
	}
	resp := adminapi.ReadResponse{Entries: make([]adminapi.ReadEntry, 0, len(res.Entries)), Next: res.Next,
		StartOffset: res.StartOffset, EndOffset: res.EndOffset}
	if len(res.Entries) == 0 {
		resp.Next = from
	}
	var n int64
	for _, e := range res.Entries {
		resp.Entries = append(resp.Entries, adminapi.ReadEntry{Offset: e.Offset, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: e.Payload})
		n += int64(len(e.Payload))
	}
	a.metrics.readEntries.Add(float64(len(res.Entries)))
	a.metrics.readBytes.Add(float64(n))
	writeJSON(w, http.StatusOK, resp)
}

func (a *api) trimStream(w http.ResponseWriter, r *http.Request) {
	var req adminapi.TrimRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.To < 0 {
		writeError(w, adminapi.CodeInvalidArgument, "trim offset must not be negative", "")
		return
	}
	info, ok := a.lookup(w, r)
	if !ok {
		return
	}
	if err := a.storage.Trim(r.Context(), info.ID, req.To); err != nil {
		a.fail(w, r, err)
		return
	}
	a.describeAfter(w, r, info.ID)
}

// indexRebuilder is the optional storage capability behind
// /rebuild-index (the stream core has it; the in-memory fake does not).
type indexRebuilder interface {
	RebuildIndex(ctx context.Context, id stream.ID) (stream.RebuildReport, error)
}

func (a *api) rebuildIndex(w http.ResponseWriter, r *http.Request) {
	st := a.storage
	if o, isOpened := st.(openedStorage); isOpened {
		st = o.Storage
	}
	rb, ok := st.(indexRebuilder)
	if !ok {
		writeError(w, adminapi.CodeInvalidArgument, "this storage backend has no offset index to rebuild", "")
		return
	}
	info, ok := a.lookup(w, r)
	if !ok {
		return
	}
	rep, err := rb.RebuildIndex(r.Context(), info.ID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, adminapi.RebuildIndexResult{Republished: rep.Republished, Gaps: rep.Gaps, Scanned: rep.Scanned, Rebuilt: rep.Rebuilt,
		GenerationGaps: rep.GenGaps, GenerationsScanned: rep.GenScanned, GenerationsRebuilt: rep.GenRebuilt})
}

func (a *api) sealStream(w http.ResponseWriter, r *http.Request) {
	info, ok := a.lookup(w, r)
	if !ok {
		return
	}
	if err := a.storage.Seal(r.Context(), info.ID); err != nil {
		a.fail(w, r, err)
		return
	}
	_ = a.cluster.Release(r.Context(), info.ID)
	a.describeAfter(w, r, info.ID)
}

func (a *api) setRetention(w http.ResponseWriter, r *http.Request) {
	var req adminapi.RetentionRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Retention.TimeMs < 0 || req.Retention.Bytes < 0 {
		writeError(w, adminapi.CodeInvalidArgument, "retention must not be negative", "")
		return
	}
	info, ok := a.lookup(w, r)
	if !ok {
		return
	}
	ret := stream.Retention{Time: time.Duration(req.Retention.TimeMs) * time.Millisecond, Bytes: req.Retention.Bytes}
	if err := a.storage.SetRetention(r.Context(), info.ID, ret); err != nil {
		a.fail(w, r, err)
		return
	}
	a.describeAfter(w, r, info.ID)
}

func (a *api) describeAfter(w http.ResponseWriter, r *http.Request, id stream.ID) {
	info, err := a.storage.Describe(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIInfo(info))
}
