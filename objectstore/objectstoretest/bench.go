package objectstoretest

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Benchmark runs the standard throughput benchmarks against one backend:
//
//	Put/create/<size>           sequential PutCreate of fresh keys (segment uploads)
//	Put/create-parallel/<size>  the same from GOMAXPROCS*4 goroutines
//	Put/cas/1KiB                sequential PutUpdate chain on one key (manifest commits)
//	Get/<size>                  whole-object reads, round-robin over 16 objects
//	GetRange/<n>-of-1MiB        ranged reads at scattered offsets of a 1 MiB object
//
// Sizes are 1 KiB and 1 MiB. b.SetBytes is set, so `go test -bench` reports
// MB/s. newStore must return an empty store.
func Benchmark(b *testing.B, newStore func(b *testing.B) objectstore.ObjectStore) {
	ctx := context.Background()
	sizes := []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}}

	for _, sz := range sizes {
		b.Run("Put/create/"+sz.name, func(b *testing.B) {
			s := newStore(b)
			data := randomBytes(1, sz.n)
			b.SetBytes(int64(sz.n))
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := s.Put(ctx, fmt.Sprintf("bench/%09d", i), data, create()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Put/create-parallel/"+sz.name, func(b *testing.B) {
			s := newStore(b)
			data := randomBytes(2, sz.n)
			var next atomic.Int64
			b.SetBytes(int64(sz.n))
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Put(ctx, fmt.Sprintf("bench/%09d", next.Add(1)), data, create()); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	b.Run("Put/cas/1KiB", func(b *testing.B) {
		s := newStore(b)
		data := randomBytes(3, 1<<10)
		v, err := s.Put(ctx, "head", data, create())
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(1 << 10)
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			data[0] = byte(i) // distinct content: S3 ETags are content-derived
			data[1] = byte(i >> 8)
			if v, err = s.Put(ctx, "head", data, update(v)); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, sz := range sizes {
		b.Run("Get/"+sz.name, func(b *testing.B) {
			s := newStore(b)
			const objects = 16
			for i := range objects {
				if _, err := s.Put(ctx, fmt.Sprintf("get/%02d", i), randomBytes(uint64(i), sz.n), create()); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(sz.n))
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, _, err := s.Get(ctx, fmt.Sprintf("get/%02d", i%objects)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, rn := range []struct {
		name string
		n    int64
	}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}} {
		b.Run("GetRange/"+rn.name+"-of-1MiB", func(b *testing.B) {
			s := newStore(b)
			const size = 1 << 20
			if _, err := s.Put(ctx, "range", randomBytes(9, size), create()); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(rn.n)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				off := int64(i*7919*1021) % (size - rn.n)
				got, err := s.GetRange(ctx, "range", off, rn.n)
				if err != nil || int64(len(got)) != rn.n {
					b.Fatalf("GetRange: %d bytes, %v", len(got), err)
				}
			}
		})
	}
}

// WALSteadyState is the Object WAL's steady state on one store: each op
// is one commit (a 40 KiB DeferSync segment Put — the size of a group
// commit at 10,000 1-KiB msg/s — then the manifest CAS that names it) plus
// the truncation of the segment committed 8 ops earlier (its Delete), so
// as many objects leave the namespace as enter it. It reports CPU
// (user+sys) and system time per op beside wall time: on a shared machine
// CPU/op is the steadier figure. Only the public API is used, so one
// backend can be compared with another, or with an older build of itself.
func WALSteadyState(b *testing.B, s objectstore.ObjectStore) {
	ctx := context.Background()
	seg := make([]byte, 40<<10)
	man := make([]byte, 4<<10)
	v, err := s.Put(ctx, "p/manifest", man, objectstore.PutOptions{})
	if err != nil {
		b.Fatal(err)
	}
	const lag = 8
	segKey := func(i int) string { return fmt.Sprintf("p/seg/run/%016x", i) }
	b.ResetTimer()
	stop := ReportCPU(b)
	for i := range b.N {
		if _, err := s.Put(ctx, segKey(i), seg, objectstore.PutOptions{Mode: objectstore.PutOverwrite, DeferSync: true}); err != nil {
			b.Fatal(err)
		}
		if v, err = s.Put(ctx, "p/manifest", man, objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: v}); err != nil {
			b.Fatal(err)
		}
		if i >= lag {
			if err := s.Delete(ctx, segKey(i-lag), nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	stop()
}

// ReportCPU starts measuring the process's CPU time; the returned func
// reports it per op of b (cpu-µs/op: user+sys, sys-µs/op). On a shared
// machine CPU/op is a steadier figure than wall time.
func ReportCPU(b *testing.B) (stop func()) {
	var r0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	return func() {
		var r1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		cpu := (r1.Utime.Nano() + r1.Stime.Nano()) - (r0.Utime.Nano() + r0.Stime.Nano())
		b.ReportMetric(float64(cpu)/float64(b.N)/1e3, "cpu-µs/op")
		b.ReportMetric(float64(r1.Stime.Nano()-r0.Stime.Nano())/float64(b.N)/1e3, "sys-µs/op")
	}
}
