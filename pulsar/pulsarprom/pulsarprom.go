// Package pulsarprom exports a Pulsar front end's per-topic state to
// Prometheus under Apache Pulsar's own metric names (topic level, as a
// broker with exposeTopicLevelMetricsInPrometheus=true, the default,
// reports them): pulsar_in_messages_total, pulsar_msg_backlog,
// pulsar_subscription_back_log, ... with the labels cluster, namespace,
// topic (and subscription), plus the dispatch counters and the managed
// cursor metrics (brk_ml_cursor_*) for each subscription.
//
// It owns only the names and their mapping. It must never change broker
// behaviour, and it keeps the Prometheus dependency out of package pulsar.
package pulsarprom

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/pulsar"
)

// Collector is a prometheus.Collector over a pulsar.Server.
type Collector struct {
	srv     *pulsar.Server
	cluster string
}

// New returns a collector for srv; cluster is the cluster label (Pulsar's
// clusterName, "standalone" by default).
func New(srv *pulsar.Server, cluster string) *Collector {
	return &Collector{srv: srv, cluster: cluster}
}

type metric struct {
	name, help string
	kind       prometheus.ValueType
	get        func(*pulsar.TopicMetrics) float64
}

var topicLabels = []string{"cluster", "namespace", "topic"}
var subLabels = []string{"cluster", "namespace", "topic", "subscription"}

var topicMetrics = []metric{
	{"pulsar_in_messages_total", "Messages published to the topic.", prometheus.CounterValue, func(m *pulsar.TopicMetrics) float64 { return float64(m.InMessages) }},
	{"pulsar_in_bytes_total", "Message bytes published to the topic.", prometheus.CounterValue, func(m *pulsar.TopicMetrics) float64 { return float64(m.InBytes) }},
	{"pulsar_out_messages_total", "Messages dispatched to consumers.", prometheus.CounterValue, func(m *pulsar.TopicMetrics) float64 { return float64(m.OutMessages) }},
	{"pulsar_out_bytes_total", "Message bytes dispatched to consumers.", prometheus.CounterValue, func(m *pulsar.TopicMetrics) float64 { return float64(m.OutBytes) }},
	{"pulsar_rate_in", "Messages per second published (last second).", prometheus.GaugeValue, func(m *pulsar.TopicMetrics) float64 { return m.RateIn }},
	{"pulsar_rate_out", "Messages per second dispatched (last second).", prometheus.GaugeValue, func(m *pulsar.TopicMetrics) float64 { return m.RateOut }},
	{"pulsar_throughput_in", "Bytes per second published (last second).", prometheus.GaugeValue, func(m *pulsar.TopicMetrics) float64 { return m.TputIn }},
	{"pulsar_throughput_out", "Bytes per second dispatched (last second).", prometheus.GaugeValue, func(m *pulsar.TopicMetrics) float64 { return m.TputOut }},
	{"pulsar_producers_count", "Attached producers.", prometheus.GaugeValue, func(m *pulsar.TopicMetrics) float64 { return float64(m.Producers) }},
	{"pulsar_consumers_count", "Attached consumers.", prometheus.GaugeValue, func(m *pulsar.TopicMetrics) float64 { return float64(m.Consumers) }},
	{"pulsar_subscriptions_count", "Loaded subscriptions.", prometheus.GaugeValue, func(m *pulsar.TopicMetrics) float64 { return float64(len(m.Subscriptions)) }},
	{"pulsar_storage_size", "Bytes committed to the topic's stream.", prometheus.GaugeValue, func(m *pulsar.TopicMetrics) float64 { return float64(m.StorageSize) }},
	{"pulsar_msg_backlog", "Unacknowledged entries summed over the subscriptions.", prometheus.GaugeValue, func(m *pulsar.TopicMetrics) float64 { return float64(m.Backlog) }},
}

type subMetric struct {
	name, help string
	kind       prometheus.ValueType
	get        func(*pulsar.SubscriptionMetrics) float64
}

var subscriptionMetrics = []subMetric{
	{"pulsar_subscription_back_log", "Unacknowledged entries of the subscription.", prometheus.GaugeValue, func(s *pulsar.SubscriptionMetrics) float64 { return float64(s.Backlog) }},
	{"pulsar_subscription_consumers_count", "Consumers attached to the subscription.", prometheus.GaugeValue, func(s *pulsar.SubscriptionMetrics) float64 { return float64(s.Consumers) }},
	{"pulsar_subscription_unacked_messages", "Entries delivered and not yet acknowledged.", prometheus.GaugeValue, func(s *pulsar.SubscriptionMetrics) float64 { return float64(s.Unacked) }},
	{"nereus_pulsar_dispatched_entries_total", "Entries sent to the subscription's consumers.", prometheus.CounterValue, func(s *pulsar.SubscriptionMetrics) float64 { return float64(s.Dispatched) }},
	{"nereus_pulsar_redelivered_entries_total", "Entries queued for redelivery (nacks, ack timeouts, consumer loss).", prometheus.CounterValue, func(s *pulsar.SubscriptionMetrics) float64 { return float64(s.Redeliveries) }},
	{"brk_ml_cursor_nonContiguousDeletedMessagesRange", "Individually acknowledged ranges above the mark-delete position.", prometheus.GaugeValue, func(s *pulsar.SubscriptionMetrics) float64 { return float64(s.NonContiguous) }},
	{"brk_ml_cursor_persistZookeeperSucceed", "Cursor state writes applied to the metadata store.", prometheus.CounterValue, func(s *pulsar.SubscriptionMetrics) float64 { return float64(s.PersistOK) }},
	{"brk_ml_cursor_persistZookeeperErrors", "Cursor state writes that failed.", prometheus.CounterValue, func(s *pulsar.SubscriptionMetrics) float64 { return float64(s.PersistFailures) }},
}

// publishStageDesc is the broker-side split of one SEND's publish latency
// (pulsar.PublishStageNames); not per topic, so it costs one histogram per
// stage however many topics are loaded.
var publishStageDesc = prometheus.NewDesc("nereus_pulsar_publish_stage_seconds",
	"Broker-side latency of SENDs answered with a receipt, per stage: admit = frame read until the append is handed to the stream, "+
		"storage = handed over until its outcome is back, total = frame read until the SEND_RECEIPT is queued to the connection's writer.",
	[]string{"stage"}, nil)

func topicDesc(m metric) *prometheus.Desc {
	return prometheus.NewDesc(m.name, m.help, topicLabels, nil)
}
func subDesc(m subMetric) *prometheus.Desc { return prometheus.NewDesc(m.name, m.help, subLabels, nil) }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range topicMetrics {
		ch <- topicDesc(m)
	}
	for _, m := range subscriptionMetrics {
		ch <- subDesc(m)
	}
	ch <- publishStageDesc
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, st := range c.srv.PublishStages() {
		ch <- prometheus.MustNewConstHistogram(publishStageDesc, uint64(st.Count()), st.Sum.Seconds(), st.Cumulative(), pulsar.PublishStageNames[i])
	}
	for _, tm := range c.srv.Metrics(ctx) {
		tl := []string{c.cluster, tm.Namespace, tm.Topic}
		for _, m := range topicMetrics {
			ch <- prometheus.MustNewConstMetric(topicDesc(m), m.kind, m.get(&tm), tl...)
		}
		for i := range tm.Subscriptions {
			sm := &tm.Subscriptions[i]
			sl := append(append([]string(nil), tl...), sm.Name)
			for _, m := range subscriptionMetrics {
				ch <- prometheus.MustNewConstMetric(subDesc(m), m.kind, m.get(sm), sl...)
			}
		}
	}
}
