package bkwal

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// instrumentationName names this package's meter. Through the server's
// Prometheus exporter the instruments below appear as
// nereus_bkwal_<name>[_unit][_total].
const instrumentationName = "github.com/nereusstream/nereus-go/stream/bkwal"

// providerMetrics are the BookKeeper WAL's instruments. They are recorded
// outside every lock and never fail a write: a meter that refuses an
// instrument gets a no-op one.
type providerMetrics struct {
	runs          metric.Int64Counter     // runs written durably (acknowledged by the ack quorum)
	entries       metric.Int64Counter     // BookKeeper entries added
	bytes         metric.Int64Counter     // entry bytes added (frames, header included)
	failedRuns    metric.Int64Counter     // runs that failed (ledger tainted or closed)
	runLatency    metric.Float64Histogram // submit of a run's first entry to its last entry's ack quorum
	ledgersOpened metric.Int64Counter     // ledgers created for writing
	ledgersFailed metric.Int64Counter     // ledger creations that failed
	rollovers     metric.Int64Counter     // ledgers sealed to start another, by reason
	taints        metric.Int64Counter     // ledgers tainted (their tail is never reused), by cause
	ledgersFinal  metric.Int64Counter     // ledgers finalized (sealed, released and settled)
	ledgersDelete metric.Int64Counter     // ledgers physically deleted (none of their runs committed)
	rollsDeferred metric.Int64Counter     // retention rolls put off by the churn floor's rate (rollage.go)
}

func newProviderMetrics(m metric.Meter) *providerMetrics {
	if m == nil {
		m = otel.GetMeterProvider().Meter(instrumentationName)
	}
	nm := noop.NewMeterProvider().Meter(instrumentationName)
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil {
			c, _ = nm.Int64Counter(name)
		}
		return c
	}
	h, err := m.Float64Histogram("nereus.bkwal.run_write_duration", metric.WithUnit("s"),
		metric.WithDescription("time from sending a run's first entry to the ack quorum of its last"),
		metric.WithExplicitBucketBoundaries(.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5))
	if err != nil {
		h, _ = nm.Float64Histogram("nereus.bkwal.run_write_duration")
	}
	pm := &providerMetrics{
		runs:          counter("nereus.bkwal.runs", "{run}", "runs written durably (the ack quorum has every entry)"),
		entries:       counter("nereus.bkwal.adds", "{entry}", "BookKeeper entries added and acknowledged"),
		bytes:         counter("nereus.bkwal.add_bytes", "By", "entry bytes added and acknowledged"),
		failedRuns:    counter("nereus.bkwal.failed_runs", "{run}", "runs that failed (the ledger is tainted)"),
		runLatency:    h,
		ledgersOpened: counter("nereus.bkwal.ledgers_created", "{ledger}", "ledgers created for writing"),
		ledgersFailed: counter("nereus.bkwal.ledger_create_failures", "{ledger}", "ledger creations that failed"),
		rollovers:     counter("nereus.bkwal.rollovers", "{ledger}", "ledgers sealed to start a new one, by reason"),
		taints:        counter("nereus.bkwal.taints", "{ledger}", "ledgers tainted so their tail is never reused, by cause"),
		ledgersFinal:  counter("nereus.bkwal.ledgers_finalized", "{ledger}", "ledgers sealed, released and settled"),
		ledgersDelete: counter("nereus.bkwal.ledgers_deleted", "{ledger}", "ledgers physically deleted (no committed run)"),
		rollsDeferred: counter("nereus.bkwal.retention_rolls_deferred", "{run}", "runs that went into a ledger due to roll for retention because the churn floor's rate was used up"),
	}
	// Every family is exported from the start (at zero), so dashboards and
	// alerts see "none yet" rather than "no such metric".
	for _, c := range []metric.Int64Counter{pm.runs, pm.entries, pm.bytes, pm.failedRuns, pm.ledgersOpened,
		pm.ledgersFailed, pm.ledgersFinal, pm.ledgersDelete, pm.rollsDeferred} {
		c.Add(bg, 0)
	}
	for _, r := range []string{"new_append_session", "tainted", "entry_limit", "byte_limit", "age_limit",
		"idle_retired", "idle_uncommitted", "idle_age_limit", "retired_prefix", "retention_age"} {
		pm.rollovers.Add(bg, 0, metric.WithAttributes(attribute.String("reason", r)))
	}
	for _, c := range []string{"stream_pointer", "append_refused", "add_failed"} {
		pm.taints.Add(bg, 0, metric.WithAttributes(attribute.String("cause", c)))
	}
	return pm
}

var bg = context.Background()

func (pm *providerMetrics) runDone(entries, bytes int64, started time.Time) {
	pm.runs.Add(bg, 1)
	pm.entries.Add(bg, entries)
	pm.bytes.Add(bg, bytes)
	pm.runLatency.Record(bg, time.Since(started).Seconds())
}

func (pm *providerMetrics) rollover(reason string) {
	pm.rollovers.Add(bg, 1, metric.WithAttributes(attribute.String("reason", reason)))
}

func (pm *providerMetrics) tainted(cause string) {
	pm.taints.Add(bg, 1, metric.WithAttributes(attribute.String("cause", cause)))
}
