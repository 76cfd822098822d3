// Package kafkaprom exports a Kafka front end's counters to Prometheus: a
// prometheus.Collector over kafka.Server.Stats, plus a request-latency
// histogram fed by kafka.Config.RequestHook.
//
// It owns only the metric names and their mapping. It must never change
// server behaviour, and it keeps the Prometheus dependency out of package
// kafka.
package kafkaprom

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka"
)

// Metrics is registered once per server.
type Metrics struct {
	server  *kafka.Server
	latency *prometheus.HistogramVec
	reqDesc *prometheus.Desc
}

// New builds the metrics; call Hook's result from kafka.Config.RequestHook
// (the server must exist before Collect is called: use Attach).
func New() *Metrics {
	m := &Metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nereus", Subsystem: "kafka", Name: "request_duration_seconds",
			Help:    "Time from reading a Kafka request to writing its response, by API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"api"}),
		reqDesc: prometheus.NewDesc("nereus_kafka_requests_total", "Kafka requests answered, by API.", []string{"api"}, nil),
	}
	return m
}

// RequestHook is the function to set as kafka.Config.RequestHook.
func (m *Metrics) RequestHook(key, _ int16, d time.Duration) {
	m.latency.WithLabelValues(apiName(key)).Observe(d.Seconds())
}

// Attach binds the metrics to a server's counters.
func (m *Metrics) Attach(s *kafka.Server) { m.server = s }

func apiName(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return strconv.Itoa(int(key))
}

type counter struct {
	name, help string
	get        func(*kafka.Stats) int64
}

var counters = []counter{
	{"connections_opened_total", "Kafka connections accepted.", func(s *kafka.Stats) int64 { return s.ConnectionsOpened.Load() }},
	{"connections_closed_total", "Kafka connections closed.", func(s *kafka.Stats) int64 { return s.ConnectionsClosed.Load() }},
	{"protocol_errors_total", "Connections closed for malformed, oversized or unsupported requests.", func(s *kafka.Stats) int64 { return s.ProtocolErrors.Load() }},
	{"received_bytes_total", "Request bytes read.", func(s *kafka.Stats) int64 { return s.BytesIn.Load() }},
	{"sent_bytes_total", "Response bytes written.", func(s *kafka.Stats) int64 { return s.BytesOut.Load() }},
	{"produced_batches_total", "Record batches committed by produce.", func(s *kafka.Stats) int64 { return s.ProducedBatches.Load() }},
	{"produced_records_total", "Records committed by produce.", func(s *kafka.Stats) int64 { return s.ProducedRecords.Load() }},
	{"produced_bytes_total", "Record batch bytes committed by produce.", func(s *kafka.Stats) int64 { return s.ProducedBytes.Load() }},
	{"produce_errors_total", "Partition produces answered with an error.", func(s *kafka.Stats) int64 { return s.ProduceErrors.Load() }},
	{"duplicate_batches_total", "Idempotent retries answered from the dedup window.", func(s *kafka.Stats) int64 { return s.DuplicateBatches.Load() }},
	{"fetched_bytes_total", "Record batch bytes served by fetch.", func(s *kafka.Stats) int64 { return s.FetchedBytes.Load() }},
	{"group_joins_total", "Successful JoinGroup answers (members entering a generation).", func(s *kafka.Stats) int64 { return s.GroupRebalances.Load() }},
	{"offset_commits_total", "Partition offsets committed.", func(s *kafka.Stats) int64 { return s.OffsetCommits.Load() }},
	{"sasl_authentications_total", "Successful SASL authentications and re-authentications.", func(s *kafka.Stats) int64 { return s.AuthSuccesses.Load() }},
	{"sasl_authentication_failures_total", "Failed or refused SASL exchanges (the connection was closed).", func(s *kafka.Stats) int64 { return s.AuthFailures.Load() }},
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range counters {
		ch <- prometheus.NewDesc("nereus_kafka_"+c.name, c.help, nil, nil)
	}
	ch <- m.reqDesc
	m.latency.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if m.server != nil {
		st := m.server.Stats()
		for _, c := range counters {
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("nereus_kafka_"+c.name, c.help, nil, nil),
				prometheus.CounterValue, float64(c.get(st)))
		}
		for key, v := range st.RequestsByKey() {
			ch <- prometheus.MustNewConstMetric(m.reqDesc, prometheus.CounterValue, float64(v[0]), apiName(key))
		}
	}
	m.latency.Collect(ch)
}
