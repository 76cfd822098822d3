package objectstoretest

import (
	"context"
	"fmt"
	"sync/atomic"
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
