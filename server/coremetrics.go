package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/stream"
)

// coreCollector exports the stream core's counters (stream.Stats) at scrape
// time, so the core itself depends on no metrics library.
type coreCollector struct {
	core  *stream.Core
	descs map[string]*prometheus.Desc
	round *prometheus.Desc
	stage *prometheus.Desc
}

var coreCounters = []struct {
	name, help string
	get        func(stream.Stats) float64
	gauge      bool
}{
	{"nereus_stream_appends_committed_total", "Appends committed by a head CAS.", func(s stream.Stats) float64 { return float64(s.AppendsCommitted) }, false},
	{"nereus_stream_appends_failed_total", "Appends failed (not committed).", func(s stream.Stats) float64 { return float64(s.AppendsFailed) }, false},
	{"nereus_stream_appends_duplicate_total", "Appends recognised as producer duplicates.", func(s stream.Stats) float64 { return float64(s.Duplicates) }, false},
	{"nereus_stream_committed_bytes_total", "Payload bytes committed.", func(s stream.Stats) float64 { return float64(s.BytesCommitted) }, false},
	{"nereus_stream_metadata_round_trips_total", "Commit rounds (one metadata batch each).", func(s stream.Stats) float64 { return float64(s.MetadataRoundTrips) }, false},
	{"nereus_stream_metadata_ops_total", "Metadata operations carried by commit rounds.", func(s stream.Stats) float64 { return float64(s.MetadataOps) }, false},
	{"nereus_stream_cas_conflicts_total", "Head CASes that lost to another writer.", func(s stream.Stats) float64 { return float64(s.Conflicts) }, false},
	{"nereus_stream_cas_unknown_total", "Head CASes whose outcome was unknown and settled by re-reading.", func(s stream.Stats) float64 { return float64(s.UnknownOutcomes) }, false},
	{"nereus_stream_fenced_total", "Owners fenced by a newer session.", func(s stream.Stats) float64 { return float64(s.Fenced) }, false},
	{"nereus_stream_sessions_acquired_total", "Append sessions acquired.", func(s stream.Stats) float64 { return float64(s.SessionsAcquired) }, false},
	{"nereus_stream_reads_total", "Reads served.", func(s stream.Stats) float64 { return float64(s.Reads) }, false},
	{"nereus_stream_tail_cache_hits_total", "Reads served from the tail cache.", func(s stream.Stats) float64 { return float64(s.TailHits) }, false},
	{"nereus_stream_wal_reads_total", "Runs read back from the WAL.", func(s stream.Stats) float64 { return float64(s.WALReads) }, false},
	{"nereus_stream_generation_reads_total", "Parts read back from generation objects.", func(s stream.Stats) float64 { return float64(s.GenerationReads) }, false},
	{"nereus_stream_read_retries_total", "Reads resolved again because GC retired a source they had resolved.", func(s stream.Stats) float64 { return float64(s.ReadRetries) }, false},
	{"nereus_stream_owned_streams", "Streams whose append session this process holds.", func(s stream.Stats) float64 { return float64(s.OwnedStreams) }, true},
}

func newCoreCollector(c *stream.Core) *coreCollector {
	cc := &coreCollector{core: c, descs: map[string]*prometheus.Desc{}}
	for _, m := range coreCounters {
		cc.descs[m.name] = prometheus.NewDesc(m.name, m.help, nil, nil)
	}
	cc.round = prometheus.NewDesc("nereus_stream_commit_round_seconds", "Latency of commit rounds (one metadata batch).", nil, nil)
	cc.stage = prometheus.NewDesc("nereus_stream_append_stage_seconds",
		"Latency of committed appends per core stage: wal = handed to the WAL provider until durable there, "+
			"commit = WAL durable until committed by the stream's head CAS.", []string{"stage"}, nil)
	return cc
}

func (cc *coreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range cc.descs {
		ch <- d
	}
	ch <- cc.round
	ch <- cc.stage
}

func (cc *coreCollector) Collect(ch chan<- prometheus.Metric) {
	s := cc.core.Stats()
	for _, m := range coreCounters {
		t := prometheus.CounterValue
		if m.gauge {
			t = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(cc.descs[m.name], t, m.get(s))
	}
	buckets := map[float64]uint64{}
	var cum uint64
	var count uint64
	for i, n := range s.CommitRoundBuckets {
		count += uint64(n)
		if i < len(s.CommitRoundBounds) {
			cum += uint64(n)
			buckets[s.CommitRoundBounds[i].Seconds()] = cum
		}
	}
	ch <- prometheus.MustNewConstHistogram(cc.round, count, s.CommitRoundSeconds, buckets)
	for i, st := range s.AppendStages {
		ch <- prometheus.MustNewConstHistogram(cc.stage, uint64(st.Count()), st.Sum.Seconds(), st.Cumulative(), stream.AppendStageNames[i])
	}
}
