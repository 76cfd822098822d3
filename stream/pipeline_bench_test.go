package stream

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// BenchmarkPipelinedObjectWAL: one stream, 64 appends in flight, the real
// Object WAL on an in-memory store (the provider's callbacks race the
// admissions, which is when a callback hands its batch off; owner.go
// flushFromProviderLocked). cpu-ns/append is the process CPU per append.
//
//	go test ./stream -run '^$' -bench PipelinedObjectWAL -benchtime 3s
func BenchmarkPipelinedObjectWAL(b *testing.B) {
	ctx := context.Background()
	w, err := objectwal.Open(ctx, objectwal.Config{Store: objmem.New(), Prefix: "wal/x", TruncateInterval: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	c, err := Open(ctx, Config{Metadata: memstore.New(), ObjectWAL: w, WriterID: "x", RetentionInterval: time.Hour,
		Lifecycle: LifecycleConfig{GCDisabled: true, DisableMaterialization: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	info, _ := c.Create(ctx, "s", CreateOptions{})
	s, _ := c.AcquireSession(ctx, info.ID, SessionOptions{})
	payload := make([]byte, 100)
	const inflight = 64
	q := make([]*AppendFuture, 0, inflight)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(q) == inflight {
			if _, err := q[0].Wait(ctx); err != nil {
				b.Fatal(err)
			}
			q = q[1:]
		}
		q = append(q, c.AppendAsync(s, AppendRequest{Entries: []Entry{{Payload: payload, RecordCount: 1}}, ExpectedStart: -1}))
	}
	for _, f := range q {
		if _, err := f.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/append")
}
