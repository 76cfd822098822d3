package stream

import "sync/atomic"

// lcMetrics counts lifecycle work: materialization, retention and GC.
type lcMetrics struct {
	retentionTrims                     atomic.Int64
	materialized, materializedBytes    atomic.Int64
	materializeFailures                atomic.Int64
	materializeNanos                   atomic.Int64
	gcPasses, gcErrors                 atomic.Int64
	gcDuePasses                        atomic.Int64
	gcSegments, gcLedgers, gcObjects   atomic.Int64
	adoptions                          atomic.Int64
	gcRecords, gcBytes                 atomic.Int64
	gcUnreadable                       atomic.Int64
	gcStreams                          atomic.Int64
	lagBytes, lagSeconds, pendingUnits atomic.Int64 // gauges, set by passes
	pendingBytes                       atomic.Int64
	backpressured                      atomic.Int64
	merges, mergedSources, mergedBytes atomic.Int64
	mergeFailures, mergeNanos          atomic.Int64
	compactions, compactedBytes        atomic.Int64
	compactFailures, viewTrims         atomic.Int64
}

// LifecycleStats is a snapshot of lifecycle counters and gauges.
type LifecycleStats struct {
	RetentionTrims int64
	// Materialized counts published generations; MaterializedBytes their
	// payload; MaterializeSeconds the time spent building and publishing.
	Materialized, MaterializedBytes int64
	MaterializeFailures             int64
	MaterializeSeconds              float64
	// MaterializeLagBytes / LagSeconds: committed payload of owned streams
	// not yet in a generation, and the age of the oldest such commit (as
	// of the last scheduling pass).
	MaterializeLagBytes, MaterializeLagSeconds int64
	GCPasses, GCErrors                         int64
	// GCDuePasses counts passes that only re-judged units whose grace had
	// ended (gc_schedule.go); GCPasses counts full passes.
	GCDuePasses int64
	// Deleted physical units and metadata records, and the bytes freed.
	GCSegments, GCLedgers, GCObjects, GCRecords, GCBytes int64
	// GCStreams counts deleted streams whose last record was removed.
	GCStreams int64
	// PendingUnits / PendingBytes: physical units the last pass kept.
	PendingUnits, PendingBytes int64
	// GCUnreadable counts objects GC's own listings skipped (and kept)
	// because they could not be read (the Object WAL counts its segments
	// in nereus.objectwal.unreadable_segments).
	GCUnreadable int64
	// MaterializeBackpressured counts appends refused because their
	// stream's materialization lag exceeded MaxMaterializeLag.
	MaterializeBackpressured int64
	// Merges counts published merged generations, MergedSources the small
	// generations they replaced, MergedBytes their payload, MergeSeconds
	// the time merge tasks took; MergeFailures failed merge tasks.
	Merges, MergedSources, MergedBytes, MergeFailures int64
	MergeSeconds                                      float64
	// Adoptions counts dead writers whose sources this process adopted.
	Adoptions int64
	// Compactions counts published views (compact.go); CompactedBytes the
	// source payload their passes read; CompactFailures failed passes.
	Compactions, CompactedBytes, CompactFailures int64
	// ViewTrims counts trims of a stream's lossless log below a covering
	// view's cleaned point (LosslessReplacer).
	ViewTrims int64
}

// LifecycleStats returns a snapshot of the lifecycle counters.
func (c *Core) LifecycleStats() LifecycleStats {
	m := &c.lc
	return LifecycleStats{
		RetentionTrims: m.retentionTrims.Load(),
		Materialized:   m.materialized.Load(), MaterializedBytes: m.materializedBytes.Load(),
		MaterializeFailures: m.materializeFailures.Load(), MaterializeSeconds: float64(m.materializeNanos.Load()) / 1e9,
		MaterializeLagBytes: m.lagBytes.Load(), MaterializeLagSeconds: m.lagSeconds.Load(),
		GCPasses: m.gcPasses.Load(), GCErrors: m.gcErrors.Load(), GCDuePasses: m.gcDuePasses.Load(),
		GCSegments: m.gcSegments.Load(), GCLedgers: m.gcLedgers.Load(), GCObjects: m.gcObjects.Load(),
		GCRecords: m.gcRecords.Load(), GCBytes: m.gcBytes.Load(), GCStreams: m.gcStreams.Load(),
		PendingUnits: m.pendingUnits.Load(), PendingBytes: m.pendingBytes.Load(), GCUnreadable: m.gcUnreadable.Load(),
		MaterializeBackpressured: m.backpressured.Load(),
		Merges:                   m.merges.Load(), MergedSources: m.mergedSources.Load(), MergedBytes: m.mergedBytes.Load(),
		MergeFailures: m.mergeFailures.Load(), MergeSeconds: float64(m.mergeNanos.Load()) / 1e9,
		Adoptions:   m.adoptions.Load(),
		Compactions: m.compactions.Load(), CompactedBytes: m.compactedBytes.Load(), CompactFailures: m.compactFailures.Load(),
		ViewTrims: m.viewTrims.Load(),
	}
}
