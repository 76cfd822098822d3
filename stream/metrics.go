package stream

import (
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/internal/latency"
)

// Metrics counts what the core did. All fields are monotonic counters read
// with Stats; the server exports them (e.g. to Prometheus) without the core
// depending on any metrics library.
type Metrics struct {
	streamsCreated, streamsDeleted    atomic.Int64
	sessionsAcquired, fenced          atomic.Int64
	appendsAdmitted, appendsCommitted atomic.Int64
	appendsFailed, duplicates         atomic.Int64
	bytesCommitted                    atomic.Int64
	metaRoundTrips, metaOps           atomic.Int64
	conflicts, unknownOutcomes        atomic.Int64
	reads, tailHits, walReads         atomic.Int64
	genReads, readRetries             atomic.Int64
	roundNanos                        atomic.Int64
	roundBuckets                      [len(roundBucketBounds) + 1]atomic.Int64
	stages                            [numAppendStages]latency.Histogram // committed appends per stage (stage_metrics.go)
}

// roundBucketBounds are the upper bounds of the commit-round latency
// histogram.
var roundBucketBounds = [...]time.Duration{
	250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond,
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

func (m *Metrics) add(c machineCounters) {
	if c == (machineCounters{}) {
		return
	}
	add := func(a *atomic.Int64, n int64) {
		if n != 0 {
			a.Add(n)
		}
	}
	add(&m.appendsAdmitted, c.admitted)
	add(&m.appendsCommitted, c.committed)
	add(&m.appendsFailed, c.failed)
	add(&m.duplicates, c.duplicates)
	add(&m.bytesCommitted, c.bytesCommitted)
	add(&m.conflicts, c.conflicts)
	add(&m.unknownOutcomes, c.unknowns)
	add(&m.fenced, c.fenced)
}

func (m *Metrics) observeRound(d time.Duration) {
	m.roundNanos.Add(int64(d))
	for i, b := range roundBucketBounds {
		if d <= b {
			m.roundBuckets[i].Add(1)
			return
		}
	}
	m.roundBuckets[len(roundBucketBounds)].Add(1)
}

// Stats is a snapshot of Metrics.
type Stats struct {
	StreamsCreated, StreamsDeleted    int64
	SessionsAcquired, Fenced          int64
	AppendsAdmitted, AppendsCommitted int64
	AppendsFailed, Duplicates         int64
	BytesCommitted                    int64
	// MetadataRoundTrips counts commit rounds (one metadata Batch each);
	// MetadataOps the operations they carried.
	MetadataRoundTrips, MetadataOps int64
	Conflicts, UnknownOutcomes      int64
	Reads, TailHits, WALReads       int64
	// GenerationReads counts parts read from generation objects;
	// ReadRetries reads that resolved again after GC moved a source.
	GenerationReads, ReadRetries int64
	// GenerationReadAheads counts generation spans fetched ahead of
	// sequential readers; GenerationReadAheadHits those a read used;
	// GenerationReadAheadsCached those not started because the object
	// store said the span was in memory (a warm reader fetches nothing
	// ahead).
	GenerationReadAheads, GenerationReadAheadHits int64
	GenerationReadAheadsCached                    int64
	// GenerationFootersAhead counts footers of the next generation object
	// loaded ahead of a reader crossing into it.
	GenerationFootersAhead int64
	OwnedStreams           int
	// CommitRoundSeconds is the total time spent in commit rounds;
	// CommitRoundBuckets counts rounds per latency bucket (upper bounds in
	// CommitRoundBounds, last bucket unbounded).
	CommitRoundSeconds float64
	CommitRoundBuckets []int64
	CommitRoundBounds  []time.Duration
	// AppendStages are the latencies of committed appends per stage
	// (names in AppendStageNames): wal = handed to the WAL provider →
	// durable there, commit = WAL durable → committed by a head CAS.
	AppendStages [numAppendStages]latency.Snapshot
}

// Stats returns a snapshot of the core's counters.
func (c *Core) Stats() Stats {
	m := &c.metrics
	s := Stats{
		StreamsCreated: m.streamsCreated.Load(), StreamsDeleted: m.streamsDeleted.Load(),
		SessionsAcquired: m.sessionsAcquired.Load(), Fenced: m.fenced.Load(),
		AppendsAdmitted: m.appendsAdmitted.Load(), AppendsCommitted: m.appendsCommitted.Load(),
		AppendsFailed: m.appendsFailed.Load(), Duplicates: m.duplicates.Load(),
		BytesCommitted:     m.bytesCommitted.Load(),
		MetadataRoundTrips: m.metaRoundTrips.Load(), MetadataOps: m.metaOps.Load(),
		Conflicts: m.conflicts.Load(), UnknownOutcomes: m.unknownOutcomes.Load(),
		Reads: m.reads.Load(), TailHits: m.tailHits.Load(), WALReads: m.walReads.Load(),
		GenerationReads: m.genReads.Load(), ReadRetries: m.readRetries.Load(),
		CommitRoundSeconds: float64(m.roundNanos.Load()) / 1e9,
		CommitRoundBounds:  roundBucketBounds[:],
	}
	for i := range m.roundBuckets {
		s.CommitRoundBuckets = append(s.CommitRoundBuckets, m.roundBuckets[i].Load())
	}
	for i := range m.stages {
		s.AppendStages[i] = m.stages[i].Snapshot()
	}
	if c.gens != nil {
		rs := c.gens.r.Stats()
		s.GenerationReadAheads, s.GenerationReadAheadHits = rs.ReadAheads, rs.ReadAheadHits
		s.GenerationReadAheadsCached = rs.ReadAheadsCached
		s.GenerationFootersAhead = rs.FootersAhead
	}
	c.mu.Lock()
	s.OwnedStreams = len(c.owners)
	c.mu.Unlock()
	return s
}
