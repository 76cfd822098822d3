package wal

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
)

// BenchmarkProducerKafkaShape drives the producer the way `nereus serve`
// does under Apache Kafka's ProducerPerformance (16 partitions, 16 KiB
// batches): requests of 16 Appends of one 16 KiB record each, in a closed
// loop with at most inflight unresolved (5 is the Java producer's default;
// 1 is a request at a time, each finding the producer idle), on the
// filesystem store with serve's group-commit defaults (5 ms max delay,
// 2 ms / 512 KiB minimum under load). One op is one request. It is the WAL
// alone: what `nereus serve` adds (the Kafka handler, the core's head-CAS
// round, the metadata store's fsync) is not in it, so comparing its figures
// with serve's under the tool says how much of the request latency and of
// the segments per MB is the WAL's.
//
//	go test -run '^$' -bench KafkaShape -benchtime 300x ./wal
//
// Reported: MB/s (SetBytes), segment and manifest PUTs per MB, process CPU
// per MB (getrusage: user+system of the whole test process, including the
// store's background goroutines) and the request latency p50/p99.
func BenchmarkProducerKafkaShape(b *testing.B) {
	for _, inFlight := range []int{5, 1} {
		b.Run(fmt.Sprintf("inflight=%d", inFlight), func(b *testing.B) {
			benchKafkaShape(b, inFlight)
		})
	}
}

func benchKafkaShape(b *testing.B, inFlight int) {
	const partitions, batchBytes = 16, 16 << 10
	fs, err := fsstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer fs.Close()
	store := &kafkaShapeStore{ObjectStore: fs}
	cfg := ProducerConfig{
		ManifestPath:        testManifest,
		GroupCommit:         true,
		FlushInterval:       5 * time.Millisecond,
		FlushBytes:          8 << 20,
		GroupCommitMinWait:  2 * time.Millisecond,
		GroupCommitMinBytes: 512 << 10,
		Logger:              quietLogger(),
	}
	p, err := NewProducer(context.Background(), store, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	batch := benchRecords(1)[0]
	batch = slices.Repeat(batch, batchBytes/len(batch))
	ctx := context.Background()
	slots := make(chan struct{}, inFlight)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	store.reset()
	cpu0 := processCPU()
	b.SetBytes(partitions * batchBytes)
	b.ResetTimer()
	for range b.N {
		slots <- struct{}{}
		start := time.Now()
		ds := make([]*Durability, partitions)
		for i := range ds {
			if ds[i], err = p.Append(ctx, [][]byte{batch}, nil); err != nil {
				b.Fatal(err)
			}
		}
		wg.Go(func() {
			for _, d := range ds {
				if _, err := d.Wait(ctx); err != nil {
					b.Error(err)
				}
			}
			mu.Lock()
			lat = append(lat, time.Since(start))
			mu.Unlock()
			<-slots
		})
	}
	wg.Wait()
	b.StopTimer()
	mb := float64(b.N*partitions*batchBytes) / 1e6
	segs, commits := store.counts()
	slices.Sort(lat)
	b.ReportMetric(float64(segs)/mb, "segments/MB")
	b.ReportMetric(float64(commits)/mb, "commits/MB")
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/mb, "cpu-µs/MB")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// kafkaShapeStore counts segment and manifest PUTs.
type kafkaShapeStore struct {
	objectstore.ObjectStore
	mu              sync.Mutex
	segs, manifests int
}

func (s *kafkaShapeStore) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	s.mu.Lock()
	if key == testManifest {
		s.manifests++
	} else {
		s.segs++
	}
	s.mu.Unlock()
	return s.ObjectStore.Put(ctx, key, data, opts)
}

func (s *kafkaShapeStore) reset() {
	s.mu.Lock()
	s.segs, s.manifests = 0, 0
	s.mu.Unlock()
}

func (s *kafkaShapeStore) counts() (segs, manifests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.segs, s.manifests
}

// processCPU is the process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
