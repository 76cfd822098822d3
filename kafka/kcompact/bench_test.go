package kcompact

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

var (
	benchMiB  = flag.Int("compact.mib", 256, "payload MiB BenchmarkCompaction writes")
	benchKeys = flag.Int("compact.keys", 10000, "distinct keys BenchmarkCompaction writes")
)

// BenchmarkCompaction: one full compaction pass (both passes, view objects
// built and stored, view published) over a partition stream of
// -compact.mib MiB of uncompressed Kafka batches (16 records of 1 KiB per
// batch, -compact.keys distinct keys), on the core over in-memory stores.
// MB/s is source payload per second of the pass. Not run in CI
// (benchmarks run only with -bench).
//
//	go test -run '^$' -bench Compaction -benchtime 3x ./kafka/kcompact/
func BenchmarkCompaction(b *testing.B) {
	ctx := context.Background()
	meta, objs := memstore.New(), objmem.New()
	w, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/b", FlushInterval: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	c, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: w, ObjectStore: objs, WriterID: "b",
		RetentionInterval: time.Hour, Lifecycle: stream.LifecycleConfig{GCInterval: time.Hour, DisableMaterialization: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	info, err := c.Create(ctx, "kafka/bench/0", stream.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: "b"})
	if err != nil {
		b.Fatal(err)
	}
	val := make([]byte, 1024)
	total, k := int64(0), 0
	var futs []*stream.AppendFuture
	for total < int64(*benchMiB)<<20 {
		var es []stream.Entry
		for j := 0; j < 16; j++ {
			var rs []kbatch.Record
			for r := 0; r < 16; r++ {
				rs = append(rs, kbatch.Record{Key: []byte(fmt.Sprintf("key-%08d", k%*benchKeys)), Value: val})
				k++
			}
			p := kbatch.Build(kbatch.BuildOptions{BaseTimestamp: 1, ProducerID: -1, BaseSequence: -1}, rs)
			es = append(es, stream.Entry{Payload: p, RecordCount: 16, Timestamp: 1})
			total += int64(len(p))
		}
		futs = append(futs, c.AppendAsync(s, stream.AppendRequest{Entries: es, ExpectedStart: -1}))
		if len(futs) >= 64 {
			for _, f := range futs {
				if _, err := f.Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
			futs = futs[:0]
		}
	}
	for _, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	end, _, _ := c.Notify(ctx, info.ID)
	b.ResetTimer()
	var src, kept int64
	for i := 0; i < b.N; i++ {
		// Each iteration is a full pass under a fresh view kind (a pass over
		// an existing view would only see the dirty range).
		st, err := c.Compact(ctx, info.ID, fmt.Sprintf("bench-%d", i), end, New(Options{NowMs: 2, DeleteRetentionMs: 1 << 40}))
		if err != nil {
			b.Fatal(err)
		}
		src += st.SourceBytes
		kept = st.KeptBytes
	}
	b.StopTimer()
	b.SetBytes(src / int64(b.N))
	b.ReportMetric(float64(kept)/float64(src/int64(b.N)), "kept/source")
}
