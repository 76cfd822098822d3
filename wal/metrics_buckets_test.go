package wal

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestHistogramBucketsFitTheirUnit: a 3 ms manifest commit lands in the
// (2 ms, 5 ms] bucket and a 3-segment commit in (2, 4] — with
// OpenTelemetry's default (millisecond-sized) buckets both fell into the
// first bucket and the histograms said nothing.
func TestHistogramBucketsFitTheirUnit(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	pm := newProducerMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"))
	ctx := context.Background()
	pm.commitLatency.Record(ctx, 0.003)
	pm.commitSegments.Record(ctx, 3)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{ // upper bound of the bucket holding the one sample, and the one below
		"nereus.wal.producer.commit_duration": {0.005, 0.002},
		"nereus.wal.producer.commit_segments": {4, 2},
	}
	seen := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			w, ok := want[m.Name]
			if !ok {
				continue
			}
			seen++
			h := m.Data.(metricdata.Histogram[float64])
			dp := h.DataPoints[0]
			for i, c := range dp.BucketCounts {
				if c == 0 {
					continue
				}
				if i == 0 || i >= len(dp.Bounds) || dp.Bounds[i] != w[0] || dp.Bounds[i-1] != w[1] {
					t.Errorf("%s: the sample fell in bucket %d of bounds %v, want (%v, %v]", m.Name, i, dp.Bounds, w[1], w[0])
				}
			}
		}
	}
	if seen != len(want) {
		t.Fatalf("found %d of %d histograms", seen, len(want))
	}
}
