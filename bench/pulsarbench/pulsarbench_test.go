package pulsarbench

import (
	"context"
	"testing"
	"time"
)

// TestRunSmoke runs a tiny workload against the in-process broker so the
// generator itself stays working (the measured runs are the benchmark and
// the command).
func TestRunSmoke(t *testing.T) {
	b, err := StartInProcess()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, b.ServiceURL, b.AdminURL, Workload{Name: "smoke", PartitionsPerTopic: 2, ProducerRate: 2000,
		TestDuration: time.Second, WarmupDuration: 200 * time.Millisecond, BatchingEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if res.Published == 0 || res.Consumed == 0 || res.PublishErrors != 0 {
		t.Fatalf("smoke run: %+v", res)
	}
}

// BenchmarkPublishEndToEnd is the OMB-style 1 KiB, batching-on workload at
// full speed against the in-process broker; it reports msg/s, MiB/s and
// latency percentiles as custom metrics. Run with
//
//	go test -run XXX -bench PublishEndToEnd -benchtime 1x ./bench/pulsarbench
func BenchmarkPublishEndToEnd(b *testing.B) {
	br, err := StartInProcess()
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	for i := 0; i < b.N; i++ {
		res, err := Run(context.Background(), br.ServiceURL, br.AdminURL, Workload{Name: "1-topic-1KB-batching",
			TestDuration: 15 * time.Second, WarmupDuration: 3 * time.Second, BatchingEnabled: true})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.PublishRate, "pub-msg/s")
		b.ReportMetric(res.PublishMBps, "pub-MiB/s")
		b.ReportMetric(res.ConsumeRate, "e2e-msg/s")
		b.ReportMetric(res.PublishLatencyMs.P50, "pub-p50-ms")
		b.ReportMetric(res.PublishLatencyMs.P99, "pub-p99-ms")
		b.ReportMetric(res.EndToEndMs.P50, "e2e-p50-ms")
		b.ReportMetric(res.EndToEndMs.P99, "e2e-p99-ms")
		b.Log(res)
	}
}
