package server

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

// kafkaLagCollector exports Kafka consumer-group lag at scrape time, with
// the names kafka_exporter made the convention for Grafana dashboards and
// alerts (under the nereus_kafka_ prefix): per group, topic and partition
// the committed offset and the lag (partition end offset minus committed
// offset), and per group the total lag. Partitions without a committed
// offset have no lag series. At most limit partition series are exported
// (--metrics-stream-limit), in group, topic, partition order.
type kafkaLagCollector struct {
	streams stream.Storage
	meta    metadata.Store
	nodeID  string
	logger  *slog.Logger
	limit   int

	lag, offset, total *prometheus.Desc
}

func newKafkaLagCollector(streams stream.Storage, meta metadata.Store, nodeID string, logger *slog.Logger, limit int) *kafkaLagCollector {
	l := []string{"group", "topic", "partition"}
	return &kafkaLagCollector{streams: streams, meta: meta, nodeID: nodeID, logger: logger, limit: limit,
		lag:    prometheus.NewDesc("nereus_kafka_consumergroup_lag", "Partition end offset minus the group's committed offset.", l, nil),
		offset: prometheus.NewDesc("nereus_kafka_consumergroup_current_offset", "The group's committed offset of the partition.", l, nil),
		total:  prometheus.NewDesc("nereus_kafka_consumergroup_lag_sum", "The group's lag summed over its partitions with committed offsets.", []string{"group"}, nil),
	}
}

func (c *kafkaLagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	ch <- c.offset
	ch <- c.total
}

func (c *kafkaLagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, groups, err := kafkaView(ctx, c.streams, c.meta, c.nodeID, c.logger)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.lag, err)
		return
	}
	n := 0
	for _, g := range groups {
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(g.TotalLag), g.Group)
		for _, o := range g.Offsets {
			if n >= c.limit {
				continue
			}
			n++
			lv := []string{g.Group, o.Topic, strconv.Itoa(int(o.Partition))}
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(o.Lag), lv...)
			ch <- prometheus.MustNewConstMetric(c.offset, prometheus.GaugeValue, float64(o.Committed), lv...)
		}
	}
}
