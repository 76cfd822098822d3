package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/stream"
)

// streamCollector exports per-stream gauges at scrape time, labelled by
// stream name and profile, for at most limit streams (in name order): a
// scrape costs one metadata range scan per 256 streams, and the label
// cardinality an operator accepts is theirs to choose
// (--metrics-stream-limit; 0 disables). nereus_streams reports how many
// streams exist up to limit+1, so a truncated listing is visible.
type streamCollector struct {
	streams stream.Storage
	limit   int
	timeout time.Duration

	start, end, records, bytes, retained, materialized, streamCount, truncated *prometheus.Desc
}

func newStreamCollector(s stream.Storage, limit int) *streamCollector {
	labels := []string{"stream", "profile"}
	return &streamCollector{streams: s, limit: limit, timeout: 5 * time.Second,
		start:        prometheus.NewDesc("nereus_stream_start_offset", "First readable offset of the stream (its trim point).", labels, nil),
		end:          prometheus.NewDesc("nereus_stream_end_offset", "Committed end offset of the stream (the offset the next append receives).", labels, nil),
		records:      prometheus.NewDesc("nereus_stream_retained_offsets", "Offsets readable in the stream: end - start.", labels, nil),
		bytes:        prometheus.NewDesc("nereus_stream_size_bytes", "Payload bytes ever committed to the stream (cumulative; trimming does not lower it).", labels, nil),
		retained:     prometheus.NewDesc("nereus_stream_retained_bytes", "Payload bytes of the stream's readable offsets [start, end).", labels, nil),
		materialized: prometheus.NewDesc("nereus_stream_materialized_through_offset", "Offset below which the stream's reads are served by generations (read-optimized objects).", labels, nil),
		streamCount:  prometheus.NewDesc("nereus_streams", "Live streams, counted up to --metrics-stream-limit + 1.", nil, nil),
		truncated:    prometheus.NewDesc("nereus_stream_metrics_truncated", "1 if more streams exist than --metrics-stream-limit exports.", nil, nil),
	}
}

func (sc *streamCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sc.start, sc.end, sc.records, sc.bytes, sc.retained, sc.materialized, sc.streamCount, sc.truncated} {
		ch <- d
	}
}

func (sc *streamCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), sc.timeout)
	defer cancel()
	infos, err := sc.streams.List(ctx, "", "", sc.limit+1)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sc.streamCount, err)
		return
	}
	truncated := 0.0
	if len(infos) > sc.limit {
		truncated = 1
	}
	ch <- prometheus.MustNewConstMetric(sc.streamCount, prometheus.GaugeValue, float64(len(infos)))
	ch <- prometheus.MustNewConstMetric(sc.truncated, prometheus.GaugeValue, truncated)
	for i, in := range infos {
		if i >= sc.limit {
			break
		}
		lv := []string{in.Name, in.Profile.String()}
		ch <- prometheus.MustNewConstMetric(sc.start, prometheus.GaugeValue, float64(in.StartOffset), lv...)
		ch <- prometheus.MustNewConstMetric(sc.end, prometheus.GaugeValue, float64(in.EndOffset), lv...)
		ch <- prometheus.MustNewConstMetric(sc.records, prometheus.GaugeValue, float64(in.EndOffset-in.StartOffset), lv...)
		ch <- prometheus.MustNewConstMetric(sc.bytes, prometheus.GaugeValue, float64(in.CommittedBytes), lv...)
		ch <- prometheus.MustNewConstMetric(sc.retained, prometheus.GaugeValue, float64(in.RetainedBytes), lv...)
		ch <- prometheus.MustNewConstMetric(sc.materialized, prometheus.GaugeValue, float64(in.MaterializedThrough), lv...)
	}
}
