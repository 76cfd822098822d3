package metadatatest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// Benchmarks shared by the stores (boltstore and logstore all four,
// etcdstore the sequential and batch ones): the store package's Benchmark
// functions are one-liners over these, so they measure the same shapes.

// CommitCounter is implemented by stores whose committer counts its
// rounds; BenchCASConcurrent64 then also reports ops per commit.
type CommitCounter interface {
	// CommitStats returns the ops and the commit rounds so far.
	CommitStats() (ops, commits int64)
}

// BenchOpen opens a fresh store (or an isolated namespace of one) for b,
// closed by a cleanup, whose committer waits up to maxBatchDelay to fill a
// batch (0: the store's default; a store without the knob ignores it).
type BenchOpen func(b *testing.B, maxBatchDelay time.Duration) metadata.Store

// ReportLatency reports the p50 and p99 of lat (µs) per unit.
func ReportLatency(b *testing.B, lat []time.Duration, unit string) {
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

// BenchCASSequential: one writer, one CAS at a time on one key; each CAS
// is its own commit (fsync).
func BenchCASSequential(b *testing.B, open BenchOpen) {
	s := open(b, 0)
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
	ReportLatency(b, lat, "op")
}

// BenchCASConcurrent64: 64 writers, each a CAS chain on its own head key,
// for several batch delays.
func BenchCASConcurrent64(b *testing.B, open BenchOpen) {
	for _, delay := range []time.Duration{0, 100 * time.Microsecond, 200 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond} {
		name := "delay=" + delay.String()
		if delay == 0 {
			name = "delay=none"
		}
		b.Run(name, func(b *testing.B) { benchConcurrent(b, open, 64, delay) })
	}
}

func benchConcurrent(b *testing.B, open BenchOpen, writers int, delay time.Duration) {
	s := open(b, delay)
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
	cc, counted := s.(CommitCounter)
	var opsBefore, commitsBefore int64
	if counted {
		opsBefore, commitsBefore = cc.CommitStats()
	}
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
	b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "ops/s")
	if counted {
		opsAfter, commitsAfter := cc.CommitStats()
		b.ReportMetric(float64(opsAfter-opsBefore)/float64(commitsAfter-commitsBefore), "ops/commit")
	}
	ReportLatency(b, all, "op")
}

// BenchBatchCAS: one caller, each round trip a Batch of n head CASes
// (the stream core's group commit shape).
func BenchBatchCAS(b *testing.B, open BenchOpen) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			s := open(b, 0)
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
			ReportLatency(b, lat, "roundtrip")
		})
	}
}

// BenchHeadRounds is the stream core's commit shape at 10,000 streams:
// 10,000 head keys of 270 bytes, each round trip one Batch of 2,000 CASes
// on keys spread over the whole key space (a different fifth each round).
// CPU per op (user+system of the whole process, so the flushes' kernel
// time counts) and bytes written to the device per op (/proc/self/io) are
// the figures load does not distort much.
func BenchHeadRounds(b *testing.B, open BenchOpen) {
	const keys, perRound = 10000, 2000
	s := open(b, 0)
	ctx := context.Background()
	value := make([]byte, 270)
	versions := make([]metadata.Version, keys)
	all := make([]metadata.Op, keys)
	for i := range all {
		all[i] = metadata.Op{Kind: metadata.OpPut, Key: fmt.Sprintf("s/%08d/head", i*7919%keys), Value: value, Expected: metadata.NotExists}
	}
	res, err := s.Batch(ctx, all)
	if err != nil {
		b.Fatal(err)
	}
	for i := range res {
		versions[i] = res[i].Version
	}
	ops := make([]metadata.Op, perRound)
	b.ReportAllocs()
	cpu0, io0 := benchCPU(), benchWriteBytes()
	b.ResetTimer()
	for n := range b.N {
		for j := range ops {
			k := (j*(keys/perRound) + n%(keys/perRound)) % keys
			ops[j] = metadata.Op{Kind: metadata.OpPut, Key: all[k].Key, Value: value, Expected: versions[k]}
		}
		res, err := s.Batch(ctx, ops)
		if err != nil {
			b.Fatal(err)
		}
		for j := range res {
			if res[j].Err != nil {
				b.Fatal(res[j].Err)
			}
			versions[(j*(keys/perRound)+n%(keys/perRound))%keys] = res[j].Version
		}
	}
	b.StopTimer()
	total := float64(b.N * perRound)
	b.ReportMetric((benchCPU()-cpu0).Seconds()*1e6/total, "cpu-µs/op")
	b.ReportMetric(float64(benchWriteBytes()-io0)/total, "wbytes/op")
}

// benchCPU is the process's user+system CPU time so far.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchWriteBytes is write_bytes of /proc/self/io (bytes this process
// caused to be sent to the storage layer); 0 where it is unavailable.
func benchWriteBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
