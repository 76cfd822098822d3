package etcdstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// Benchmarks against the package's embedded single-node etcd (fsync on):
//
//	go test -run '^$' -bench . -benchtime 1000x ./metadata/etcdstore/

func reportLatency(b *testing.B, lat []time.Duration, unit string) {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-µs/"+unit)
	b.ReportMetric(pct(0.99), "p99-µs/"+unit)
}

func BenchmarkCASSequential(b *testing.B) {
	s := openStore(b)
	defer s.Close()
	ctx := context.Background()
	v, err := s.Put(ctx, "head", []byte("0"), metadata.NotExists)
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if v, err = s.Put(ctx, "head", make([]byte, 64), v); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	reportLatency(b, lat, "op")
}

func BenchmarkCASConcurrent64(b *testing.B) {
	s := openStore(b)
	defer s.Close()
	ctx := context.Background()
	const writers = 64
	per := (b.N + writers - 1) / writers
	lats := make([][]time.Duration, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	b.ResetTimer()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("head/%03d", w)
			v := metadata.NotExists
			for range per {
				start := time.Now()
				nv, err := s.Put(ctx, key, make([]byte, 64), v)
				if err != nil {
					errs <- err
					return
				}
				lats[w] = append(lats[w], time.Since(start))
				v = nv
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	all := slices.Concat(lats...)
	b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "ops/s")
	reportLatency(b, all, "op")
}

func BenchmarkBatchCAS(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			s := openStore(b)
			defer s.Close()
			ctx := context.Background()
			ops := make([]metadata.Op, n)
			for i := range ops {
				ops[i] = metadata.Op{Kind: metadata.OpPut, Key: fmt.Sprintf("head/%06d", i), Value: make([]byte, 64), Expected: metadata.NotExists}
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
				if res, err = s.Batch(ctx, ops); err != nil {
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
