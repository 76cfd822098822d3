package corebench

import (
	"context"
	"flag"
	"testing"
	"time"
)

var (
	benchStreams = flag.Int("corebench.streams", 100, "streams")
	benchWindow  = flag.Int("corebench.window", 4, "appends in flight per stream")
	benchEntry   = flag.Int("corebench.entry", 1024, "entry bytes")
	benchDur     = flag.Duration("corebench.duration", 5*time.Second, "measured duration")
	benchDurable = flag.Bool("corebench.durable", true, "fsstore+boltstore instead of memory")
)

// TestSmoke runs a tiny in-memory benchmark so the harness itself stays
// working; it asserts nothing about speed.
func TestSmoke(t *testing.T) {
	res, err := Run(context.Background(), Config{Streams: 3, Window: 2, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Appends == 0 || res.Errors != 0 {
		t.Fatalf("smoke run: %v", res)
	}
}

// BenchmarkCore runs the load generator once with the flags above and
// reports its figures as custom metrics, e.g.
//
//	go test ./bench/corebench -run '^$' -bench Core -benchtime 1x -corebench.streams 10000 -corebench.window 1
func BenchmarkCore(b *testing.B) {
	for i := 0; i < b.N; i++ {
		res, err := Run(context.Background(), Config{Durable: *benchDurable, Streams: *benchStreams, Window: *benchWindow,
			EntryBytes: *benchEntry, Duration: *benchDur, Warmup: time.Second, Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.AppendsPerSec, "appends/s")
		b.ReportMetric(res.MBPerSec, "MB/s")
		b.ReportMetric(float64(res.P50.Microseconds()), "p50-µs")
		b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
		b.ReportMetric(res.RoundTripsPerSec, "meta-rt/s")
		b.ReportMetric(res.PutsPerSec, "puts/s")
		b.ReportMetric(float64(res.PeakRSSBytes)/(1<<20), "peakRSS-MiB")
		b.Log(res)
	}
}
