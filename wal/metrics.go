package wal

import (
	"context"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// instrumentationName names this package's meter.
const instrumentationName = "github.com/nereusstream/nereus-go/wal"

// defaultMeter is the global provider's meter: a no-op until the process
// calls otel.SetMeterProvider, so metrics cost nothing unless wired.
func defaultMeter() metric.Meter { return otel.GetMeterProvider().Meter(instrumentationName) }

// defaultLogger writes text to stderr filtered to Warn, so a healthy
// component is silent.
func defaultLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// instruments builds counters and histograms, falling back to no-ops if the
// meter refuses one (a metrics misconfiguration must never stop the log).
type instruments struct {
	m    metric.Meter
	noop metric.Meter
}

func (in instruments) counter(name, unit, desc string) metric.Int64Counter {
	c, err := in.m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	if err != nil {
		c, _ = in.noop.Int64Counter(name)
	}
	return c
}

// Bucket boundaries by unit: OpenTelemetry's default buckets (0, 5, 10,
// ... 10000) suit milliseconds, so every duration in seconds fell into the
// first one and counts of a few segments into the first two.
var (
	secondBuckets = []float64{.0002, .0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10}
	countBuckets  = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}
)

// stageBuckets resolve the sub-millisecond to few-millisecond stages of
// one Append on a local disk (a median read off secondBuckets could only
// say "between 1 and 2 ms").
var stageBuckets = []float64{.0001, .00025, .0005, .00075, .001, .0015, .002, .0025, .003, .004, .005, .0075, .01, .02, .05, .1, .5, 2}

func (in instruments) histogram(name, unit, desc string) metric.Float64Histogram {
	bounds := countBuckets
	if unit == "s" {
		bounds = secondBuckets
	}
	return in.histogramWith(name, unit, desc, bounds)
}

func (in instruments) histogramWith(name, unit, desc string, bounds []float64) metric.Float64Histogram {
	h, err := in.m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(bounds...))
	if err != nil {
		h, _ = in.noop.Float64Histogram(name)
	}
	return h
}

func newInstruments(m metric.Meter) instruments {
	if m == nil {
		m = defaultMeter()
	}
	return instruments{m: m, noop: noop.NewMeterProvider().Meter(instrumentationName)}
}

type producerMetrics struct {
	records         metric.Int64Counter
	bytes           metric.Int64Counter
	blockedAppends  metric.Int64Counter
	segments        metric.Int64Counter
	segmentBytes    metric.Int64Counter
	uploadRetries   metric.Int64Counter
	commits         metric.Int64Counter
	commitConflicts metric.Int64Counter
	commitRetries   metric.Int64Counter
	commitUnknown   metric.Int64Counter
	fenced          metric.Int64Counter
	halts           metric.Int64Counter
	commitLatency   metric.Float64Histogram
	commitSegments  metric.Float64Histogram
	// appendStage splits one Append's time to durability into the three
	// stages of the pipeline (stageSeal, stageUpload, stageCommit), one
	// observation per Append and stage, so an operator can tell a sealing
	// wait (group commit's minimum wait, a full pipeline) from a slow PUT
	// or a slow manifest commit.
	appendStage metric.Float64Histogram
}

// The append_stage attribute values, precomputed (Record is on the ack path).
var (
	// stageSeal: Append → sealed into a segment (group-commit wait).
	stageSeal = metric.WithAttributeSet(attribute.NewSet(attribute.String("stage", "seal")))
	// stageUpload: sealed → its segment PUT returned.
	stageUpload = metric.WithAttributeSet(attribute.NewSet(attribute.String("stage", "upload")))
	// stageCommit: PUT returned → the manifest commit naming it landed
	// (waiting for earlier segments' commits included).
	stageCommit = metric.WithAttributeSet(attribute.NewSet(attribute.String("stage", "commit")))
)

// observeStages records the stages of every Append of a committed segment.
func (pm *producerMetrics) observeStages(s *pipeSegment, committed time.Time) {
	ctx := context.Background()
	up := s.uploadedAt.Sub(s.sealedAt).Seconds()
	cm := committed.Sub(s.uploadedAt).Seconds()
	for _, g := range s.groups {
		pm.appendStage.Record(ctx, s.sealedAt.Sub(g.at).Seconds(), stageSeal)
		pm.appendStage.Record(ctx, up, stageUpload)
		pm.appendStage.Record(ctx, cm, stageCommit)
	}
}

func newProducerMetrics(m metric.Meter) *producerMetrics {
	in := newInstruments(m)
	pm := &producerMetrics{
		records:         in.counter("nereus.wal.producer.records", "{record}", "records committed"),
		bytes:           in.counter("nereus.wal.producer.bytes", "By", "record bytes committed"),
		blockedAppends:  in.counter("nereus.wal.producer.blocked_appends", "{append}", "Appends that waited for in-flight budget"),
		segments:        in.counter("nereus.wal.producer.segments", "{segment}", "segments uploaded"),
		segmentBytes:    in.counter("nereus.wal.producer.segment_bytes", "By", "segment object bytes uploaded"),
		uploadRetries:   in.counter("nereus.wal.producer.upload_retries", "{retry}", "segment upload retries"),
		commits:         in.counter("nereus.wal.producer.commits", "{commit}", "manifest commits that landed"),
		commitConflicts: in.counter("nereus.wal.producer.commit_conflicts", "{conflict}", "manifest CAS races lost (re-planned)"),
		commitRetries:   in.counter("nereus.wal.producer.commit_retries", "{retry}", "transient manifest commit retries"),
		commitUnknown:   in.counter("nereus.wal.producer.commit_unknown", "{commit}", "manifest commits whose outcome was unknown and resolved by re-reading"),
		fenced:          in.counter("nereus.wal.producer.fenced", "{event}", "times the producer found itself fenced"),
		halts:           in.counter("nereus.wal.producer.halts", "{event}", "producer halts on a fatal error"),
		commitLatency:   in.histogram("nereus.wal.producer.commit_duration", "s", "manifest commit duration including retries"),
		commitSegments:  in.histogram("nereus.wal.producer.commit_segments", "{segment}", "segments coalesced per manifest commit"),
		appendStage: in.histogramWith("nereus.wal.producer.append_stage", "s",
			"time of one Append in each producer stage: seal (waiting to be sealed into a segment), upload (segment PUT), commit (PUT done to manifest commit landed)",
			stageBuckets),
	}
	// Every counter is exported from the start (at zero): "no conflicts
	// yet" reads differently from "not exported".
	for _, c := range []metric.Int64Counter{pm.records, pm.bytes, pm.blockedAppends, pm.segments, pm.segmentBytes,
		pm.uploadRetries, pm.commits, pm.commitConflicts, pm.commitRetries, pm.commitUnknown, pm.fenced, pm.halts} {
		c.Add(context.Background(), 0)
	}
	return pm
}

type replicaMetrics struct {
	records  metric.Int64Counter
	segments metric.Int64Counter
	errors   metric.Int64Counter
	poll     metric.Float64Histogram
}

func newReplicaMetrics(m metric.Meter) *replicaMetrics {
	in := newInstruments(m)
	return &replicaMetrics{
		records:  in.counter("nereus.wal.replica.records_applied", "{record}", "records applied"),
		segments: in.counter("nereus.wal.replica.segments_applied", "{segment}", "segments applied"),
		errors:   in.counter("nereus.wal.replica.poll_errors", "{error}", "failed poll passes"),
		poll:     in.histogram("nereus.wal.replica.poll_duration", "s", "duration of a poll pass"),
	}
}

type gcMetrics struct {
	deleted   metric.Int64Counter
	truncated metric.Int64Counter
	kept      metric.Int64Counter
}

func newGCMetrics(m metric.Meter) *gcMetrics {
	in := newInstruments(m)
	return &gcMetrics{
		deleted:   in.counter("nereus.wal.gc.deleted_segments", "{segment}", "segment objects deleted"),
		truncated: in.counter("nereus.wal.gc.truncated_entries", "{entry}", "manifest entries truncated by the collector"),
		kept:      in.counter("nereus.wal.gc.kept_unreferenced", "{segment}", "unreferenced segments kept (grace or not provably dead)"),
	}
}
