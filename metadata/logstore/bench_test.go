package logstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/logstore"
)

// Benchmarks run on a file under the test's temp dir with real fsync.
//
//	go test -run '^$' -bench . -benchtime 2000x ./metadata/logstore/

func openBench(b *testing.B, opts logstore.Options) *logstore.Store {
	b.Helper()
	s, err := logstore.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func reportLatency(b *testing.B, lat []time.Duration, unit string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-µs/"+unit)
	b.ReportMetric(pct(0.99), "p99-µs/"+unit)
}

// BenchmarkCASSequential: one writer, one CAS at a time on one key; each
// CAS is its own commit (fsync).
func BenchmarkCASSequential(b *testing.B) {
	s := openBench(b, logstore.Options{})
	ctx := context.Background()
	v, err := s.Put(ctx, "head", []byte("0"), metadata.NotExists)
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	value := make([]byte, 64)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		v, err = s.Put(ctx, "head", value, v)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	reportLatency(b, lat, "op")
}

// BenchmarkCASConcurrent64: 64 writers, each a CAS chain on its own head
// key, for several batch delays.
func BenchmarkCASConcurrent64(b *testing.B) {
	for _, delay := range []time.Duration{0, 100 * time.Microsecond, 200 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond} {
		name := "delay=" + delay.String()
		if delay == 0 {
			name = "delay=none"
		}
		b.Run(name, func(b *testing.B) { benchConcurrent(b, 64, delay) })
	}
}

func benchConcurrent(b *testing.B, writers int, delay time.Duration) {
	s := openBench(b, logstore.Options{MaxBatchDelay: delay})
	ctx := context.Background()
	versions := make([]metadata.Version, writers)
	for w := range writers {
		v, err := s.Put(ctx, fmt.Sprintf("head/%03d", w), []byte("0"), metadata.NotExists)
		if err != nil {
			b.Fatal(err)
		}
		versions[w] = v
	}
	per := (b.N + writers - 1) / writers
	lats := make([][]time.Duration, writers)
	before := s.Stats()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	value := make([]byte, 64)
	b.ResetTimer()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("head/%03d", w)
			v := versions[w]
			lat := make([]time.Duration, 0, per)
			for range per {
				start := time.Now()
				nv, err := s.Put(ctx, key, value, v)
				if err != nil {
					errs <- err
					return
				}
				lat = append(lat, time.Since(start))
				v = nv
			}
			lats[w] = lat
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	all := slices.Concat(lats...)
	after := s.Stats()
	b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(after.Ops-before.Ops)/float64(after.Commits-before.Commits), "ops/commit")
	reportLatency(b, all, "op")
}

// BenchmarkBatchCAS: one caller, each round trip a Batch of n head CASes
// (the stream core's group commit shape).
func BenchmarkBatchCAS(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			s := openBench(b, logstore.Options{})
			ctx := context.Background()
			ops := make([]metadata.Op, n)
			value := make([]byte, 64)
			for i := range ops {
				ops[i] = metadata.Op{Kind: metadata.OpPut, Key: fmt.Sprintf("head/%06d", i), Value: value, Expected: metadata.NotExists}
			}
			res, err := s.Batch(ctx, ops)
			if err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				for i := range ops {
					ops[i].Expected = res[i].Version
				}
				start := time.Now()
				res, err = s.Batch(ctx, ops)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				for i := range res {
					if res[i].Err != nil {
						b.Fatal(res[i].Err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "ops/s")
			reportLatency(b, lat, "roundtrip")
		})
	}
}
