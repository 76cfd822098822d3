package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/stream"
)

// lifecycleCollector exports the core's materialization, retention and GC
// counters (stream.LifecycleStats) at scrape time.
type lifecycleCollector struct {
	core     *stream.Core
	descs    map[string]*prometheus.Desc
	deleted  *prometheus.Desc
	adopting *prometheus.Desc
}

var lifecycleMetrics = []struct {
	name, help string
	get        func(stream.LifecycleStats) float64
	gauge      bool
}{
	{"nereus_lifecycle_generations_published_total", "Generations (read-optimized objects) published.", func(s stream.LifecycleStats) float64 { return float64(s.Materialized) }, false},
	{"nereus_lifecycle_materialized_bytes_total", "Payload bytes materialized into generations.", func(s stream.LifecycleStats) float64 { return float64(s.MaterializedBytes) }, false},
	{"nereus_lifecycle_materialize_failures_total", "Materialization tasks that failed (retried later).", func(s stream.LifecycleStats) float64 { return float64(s.MaterializeFailures) }, false},
	{"nereus_lifecycle_materialize_seconds_total", "Time spent building and publishing generations.", func(s stream.LifecycleStats) float64 { return s.MaterializeSeconds }, false},
	{"nereus_lifecycle_materialize_lag_bytes", "Committed payload of this node's active streams not yet in a generation.", func(s stream.LifecycleStats) float64 { return float64(s.MaterializeLagBytes) }, true},
	{"nereus_lifecycle_materialize_lag_seconds", "Age of the oldest unmaterialized commit of this node's active streams.", func(s stream.LifecycleStats) float64 { return float64(s.MaterializeLagSeconds) }, true},
	{"nereus_lifecycle_materialize_backpressure_total", "Appends refused (retriable) because their stream's materialization lag exceeded --materialize-max-lag.", func(s stream.LifecycleStats) float64 { return float64(s.MaterializeBackpressured) }, false},
	{"nereus_lifecycle_merges_total", "Merged generations published (adjacent small generations rewritten into one).", func(s stream.LifecycleStats) float64 { return float64(s.Merges) }, false},
	{"nereus_lifecycle_merged_sources_total", "Small generations replaced by merged ones.", func(s stream.LifecycleStats) float64 { return float64(s.MergedSources) }, false},
	{"nereus_lifecycle_merged_bytes_total", "Payload bytes rewritten by merges.", func(s stream.LifecycleStats) float64 { return float64(s.MergedBytes) }, false},
	{"nereus_lifecycle_merge_failures_total", "Merge tasks that failed (retried or finished by a later GC pass).", func(s stream.LifecycleStats) float64 { return float64(s.MergeFailures) }, false},
	{"nereus_lifecycle_merge_seconds_total", "Time spent merging generations.", func(s stream.LifecycleStats) float64 { return s.MergeSeconds }, false},
	{"nereus_lifecycle_retention_trims_total", "Trims made by time or size retention.", func(s stream.LifecycleStats) float64 { return float64(s.RetentionTrims) }, false},
	{"nereus_gc_passes_total", "GC passes run.", func(s stream.LifecycleStats) float64 { return float64(s.GCPasses) }, false},
	{"nereus_gc_due_passes_total", "GC passes that only re-judged units whose grace period had ended.", func(s stream.LifecycleStats) float64 { return float64(s.GCDuePasses) }, false},
	{"nereus_gc_errors_total", "GC passes that reported an error.", func(s stream.LifecycleStats) float64 { return float64(s.GCErrors) }, false},
	{"nereus_gc_deleted_bytes_total", "Bytes of WAL segments and generation objects deleted by GC.", func(s stream.LifecycleStats) float64 { return float64(s.GCBytes) }, false},
	{"nereus_gc_unreadable_objects_total", "Objects GC skipped and kept because they could not be read (see nereus gc status).", func(s stream.LifecycleStats) float64 { return float64(s.GCUnreadable) }, false},
	{"nereus_gc_pending_units", "Physical units and records the last GC pass kept (see nereus gc status).", func(s stream.LifecycleStats) float64 { return float64(s.PendingUnits) }, true},
	{"nereus_gc_pending_bytes", "Bytes of the units the last GC pass kept, where known.", func(s stream.LifecycleStats) float64 { return float64(s.PendingBytes) }, true},
	{"nereus_gc_adoptions_total", "Dead nodes' source sets (an Object WAL log, a writer's ledgers) this node adopted for GC.", func(s stream.LifecycleStats) float64 { return float64(s.Adoptions) }, false},
}

func newLifecycleCollector(c *stream.Core) *lifecycleCollector {
	lc := &lifecycleCollector{core: c, descs: map[string]*prometheus.Desc{}}
	for _, m := range lifecycleMetrics {
		lc.descs[m.name] = prometheus.NewDesc(m.name, m.help, nil, nil)
	}
	lc.deleted = prometheus.NewDesc("nereus_gc_deleted_total", "Things GC deleted, by kind (segment, ledger, generation, record, stream).", []string{"kind"}, nil)
	lc.adopting = prometheus.NewDesc("nereus_gc_adopting_writers", "Dead nodes' source sets this node has adopted now (as of the last GC pass; nereus gc status lists them).", nil, nil)
	return lc
}

func (lc *lifecycleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range lc.descs {
		ch <- d
	}
	ch <- lc.deleted
	ch <- lc.adopting
}

func (lc *lifecycleCollector) Collect(ch chan<- prometheus.Metric) {
	s := lc.core.LifecycleStats()
	for _, m := range lifecycleMetrics {
		t := prometheus.CounterValue
		if m.gauge {
			t = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(lc.descs[m.name], t, m.get(s))
	}
	for kind, n := range map[string]int64{"segment": s.GCSegments, "ledger": s.GCLedgers, "generation": s.GCObjects,
		"record": s.GCRecords, "stream": s.GCStreams} {
		ch <- prometheus.MustNewConstMetric(lc.deleted, prometheus.CounterValue, float64(n), kind)
	}
	// GCStatus, not Core.Adopting: the latter waits for an adoption pass
	// in progress (its I/O), a scrape must not.
	ch <- prometheus.MustNewConstMetric(lc.adopting, prometheus.GaugeValue, float64(len(lc.core.GCStatus().Adopting)))
}
