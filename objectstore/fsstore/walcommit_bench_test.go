package fsstore

import (
	"fmt"
	"os"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/objectstoretest"
)

// BenchmarkWALCommit is the Object WAL's durable step on this store: one
// segment Put (40 KiB, the size of a group commit at 10,000 1-KiB msg/s)
// then the manifest CAS that names it, in series, as the producer's ack
// path does. Variants: the temp-file pool on or off (off = every Put
// creates its temp file, the old path) and the segment's directory fsync
// deferred to the manifest Put or not. Reports CPU (user+sys) per commit
// besides wall time: on the shared machine CPU/op is the steadier figure.
//
//	go test -run '^$' -bench WALCommit -count 3 ./objectstore/fsstore/
func BenchmarkWALCommit(b *testing.B) {
	for _, pool := range []bool{false, true} {
		for _, deferSync := range []bool{false, true} {
			b.Run(fmt.Sprintf("pool=%v/defer=%v", pool, deferSync), func(b *testing.B) {
				s, err := Open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = s.Close() }()
				if !pool {
					s.hk.shutdown()
					s.hk = newHousekeeper(s.tmp.dir, &s.tmpSeq)
					s.hk.release = make(chan *os.File) // closes on the caller's path, as before
					close(s.hk.done)
				}
				seg := make([]byte, 40<<10)
				man := make([]byte, 4<<10)
				v, err := s.Put(ctx(), "p/manifest", man, objectstore.PutOptions{})
				if err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				stop := objectstoretest.ReportCPU(b)
				for i := range b.N {
					key := fmt.Sprintf("p/seg/run/%016x", i)
					if _, err := s.Put(ctx(), key, seg, objectstore.PutOptions{Mode: objectstore.PutOverwrite, DeferSync: deferSync}); err != nil {
						b.Fatal(err)
					}
					if v, err = s.Put(ctx(), "p/manifest", man, objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: v}); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				stop()
			})
		}
	}
}

// BenchmarkWALSteadyState: objectstoretest.WALSteadyState on this store —
// the case recycled inodes (recycle.go) are for.
//
//	go test -run '^$' -bench WALSteadyState -benchtime 500x ./objectstore/fsstore/
func BenchmarkWALSteadyState(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	objectstoretest.WALSteadyState(b, s)
}
