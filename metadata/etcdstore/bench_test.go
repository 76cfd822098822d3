package etcdstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/metadatatest"
)

// Benchmarks against the package's embedded single-node etcd (fsync on):
//
//	go test -run '^$' -bench . -benchtime 1000x ./metadata/etcdstore/

func BenchmarkCASSequential(b *testing.B) { metadatatest.BenchCASSequential(b, openBench) }

// BenchmarkCASConcurrent64 is etcd's own shape (not metadatatest's): 64
// writers whose first CAS creates their head key, no batch delays.
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
	metadatatest.ReportLatency(b, all, "op")
}

func BenchmarkBatchCAS(b *testing.B) { metadatatest.BenchBatchCAS(b, openBench) }

// openBench is openStore for metadatatest's benchmarks (etcd has no
// batch delay to set).
func openBench(b *testing.B, _ time.Duration) metadata.Store {
	s := openStore(b)
	b.Cleanup(func() { _ = s.Close() })
	return s
}
