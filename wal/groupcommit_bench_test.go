package wal

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

// BenchmarkGroupCommitPattern replays two arrival patterns against a
// producer whose store takes a quiet local disk's time per PUT (segment
// 0.7 ms, manifest 1.0 ms: write + fdatasync + rename + directory fsync on
// this machine when nobody else uses the disk), with the default
// group-commit settings (2 ms minimum wait, 512 KiB), and reports what the
// sealing rule trades: the Append → durable latency and segments per MB.
//
//   - pulsar: one 12 KiB Append every 1.3 ms (a Pulsar producer at 10,000
//     msg/s of 1 KiB, batching every 1 ms: ~750 SENDs/s), 1,500 Appends.
//   - kafka: 5 clients in a closed loop, each a "request" of 16 Appends of
//     16 KiB (a ProducerPerformance request over 16 partitions) waited for
//     as a whole, 60 requests each.
//
// Figures depend on the machine's timer precision; compare variants
// alternated on the same load.
func BenchmarkGroupCommitPattern(b *testing.B) {
	setup := func(b *testing.B) (*Producer, *faultStore) {
		fs := newFaultStore(memstore.New())
		fs.setGate(func(op, key string) {
			if op != "put" {
				return
			}
			switch keyClass(key) {
			case "segment":
				time.Sleep(700 * time.Microsecond)
			case "manifest":
				time.Sleep(time.Millisecond)
			}
		})
		cfg := testConfig()
		cfg.GroupCommit = true
		cfg.FlushInterval = 5 * time.Millisecond
		cfg.GroupCommitMinWait, cfg.GroupCommitMinBytes = 2*time.Millisecond, 512<<10
		cfg.UploadConcurrency = 4
		return newTestProducer(b, fs, cfg), fs
	}
	report := func(b *testing.B, fs *faultStore, lat []time.Duration, bytes int, elapsed time.Duration) {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "p90-ms")
		b.ReportMetric(float64(fs.count("put", "x.segments/y"))/(float64(bytes)/1e6), "segments/MB")
		b.ReportMetric(float64(bytes)/1e6/elapsed.Seconds(), "MB/s")
	}
	b.Run("pulsar", func(b *testing.B) {
		for range b.N {
			p, fs := setup(b)
			ctx := testCtx(b)
			rec := make([]byte, 12<<10)
			var mu sync.Mutex
			var lat []time.Duration
			var wg sync.WaitGroup
			start := time.Now()
			tick := time.NewTicker(1300 * time.Microsecond)
			for range 1500 {
				<-tick.C
				at := time.Now()
				d, err := p.Append(ctx, [][]byte{rec}, nil)
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := d.Wait(ctx); err != nil {
						b.Error(err)
					}
					mu.Lock()
					lat = append(lat, time.Since(at))
					mu.Unlock()
				}()
			}
			tick.Stop()
			wg.Wait()
			report(b, fs, lat, 1500*len(rec), time.Since(start))
			_ = p.Close(context.Background())
		}
	})
	b.Run("kafka", func(b *testing.B) {
		for range b.N {
			p, fs := setup(b)
			ctx := testCtx(b)
			rec := make([]byte, 16<<10)
			var mu sync.Mutex
			var lat []time.Duration
			var wg sync.WaitGroup
			start := time.Now()
			for range 5 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 60 {
						at := time.Now()
						ds := make([]*Durability, 16)
						for i := range ds {
							d, err := p.Append(ctx, [][]byte{rec}, nil)
							if err != nil {
								b.Error(err)
								return
							}
							ds[i] = d
						}
						for _, d := range ds {
							if _, err := d.Wait(ctx); err != nil {
								b.Error(err)
								return
							}
						}
						mu.Lock()
						lat = append(lat, time.Since(at))
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			report(b, fs, lat, 5*60*16*len(rec), time.Since(start))
			_ = p.Close(context.Background())
		}
	})
}
