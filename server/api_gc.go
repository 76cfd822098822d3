package server

import (
	"context"
	"net/http"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/stream"
)

// collector is the optional storage capability behind /v1/gc: the stream
// core's GC (stream.Core).
type collector interface {
	GCStatus() stream.GCStatus
	CollectGarbage(ctx context.Context) (stream.GCStatus, error)
}

func (a *api) collector(w http.ResponseWriter) (collector, bool) {
	st := a.storage
	if o, isOpened := st.(openedStorage); isOpened {
		st = o.Storage
	}
	c, ok := st.(collector)
	if !ok {
		writeError(w, adminapi.CodeInvalidArgument, "this storage backend has no garbage collector", "")
	}
	return c, ok
}

// GET /v1/gc: the last pass, what is pending and why, the audit trail.
func (a *api) gcStatus(w http.ResponseWriter, r *http.Request) {
	c, ok := a.collector(w)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, toAPIGCStatus(c.GCStatus()))
}

// POST /v1/gc/run: one pass now (it honours --gc-dry-run).
func (a *api) gcRun(w http.ResponseWriter, r *http.Request) {
	c, ok := a.collector(w)
	if !ok {
		return
	}
	st, err := c.CollectGarbage(r.Context())
	if err != nil && r.Context().Err() == nil {
		a.logger.Warn("gc pass requested over REST failed", "err", err)
	}
	writeJSON(w, http.StatusOK, toAPIGCStatus(st))
}

func toAPIGCStatus(s stream.GCStatus) adminapi.GCStatus {
	out := adminapi.GCStatus{DryRun: s.DryRun, Disabled: s.Disabled, LastPass: s.LastPass, DurationMs: s.Duration.Milliseconds(),
		PendingCount: s.PendingCount, PendingBytes: s.PendingBytes, GraceBytes: s.GraceBytes}
	for _, p := range s.Pending {
		out.Pending = append(out.Pending, adminapi.GCPending{Kind: p.Kind, Unit: p.Unit, Bytes: p.Bytes, Reason: p.Reason})
	}
	for _, e := range s.Recent {
		out.Recent = append(out.Recent, adminapi.GCEvent{Time: e.Time, Kind: e.Kind, Unit: e.Unit, Bytes: e.Bytes, Reason: e.Reason, DryRun: e.DryRun})
	}
	st := s.Stats
	out.Stats = adminapi.GCStats{Passes: st.GCPasses, DuePasses: st.GCDuePasses, Errors: st.GCErrors, DeletedSegments: st.GCSegments, DeletedLedgers: st.GCLedgers,
		DeletedObjects: st.GCObjects, DeletedRecords: st.GCRecords, DeletedBytes: st.GCBytes, DeletedStreams: st.GCStreams,
		RetentionTrims: st.RetentionTrims, Materialized: st.Materialized, MaterializedBytes: st.MaterializedBytes,
		MaterializeFailures: st.MaterializeFailures, MaterializeLagBytes: st.MaterializeLagBytes,
		MaterializeLagSeconds: st.MaterializeLagSeconds, MaterializeSeconds: st.MaterializeSeconds,
		Merges: st.Merges, MergedSources: st.MergedSources, MergedBytes: st.MergedBytes, MergeFailures: st.MergeFailures,
		MergeSeconds: st.MergeSeconds, MaterializeBackpressured: st.MaterializeBackpressured, Adoptions: st.Adoptions}
	out.Adopting = append(out.Adopting, s.Adopting...)
	return out
}
