package stream

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// BenchmarkCommitManyStreams measures the commit pipeline's cost per
// append when every append is its own head CAS: 1,000 streams, one append
// in flight on each, in-memory stores, no background passes. An op is one
// append; cpu-ns/append is the process's CPU time (steadier than ns/op on
// a shared machine), and allocs/op counts everything the append caused
// (admission, WAL write, head CAS, resolution).
//
//	go test ./stream -run '^$' -bench CommitManyStreams -benchmem -count 5
func BenchmarkCommitManyStreams(b *testing.B) {
	for _, shards := range []int{1, 2} {
		b.Run(fmt.Sprint("shards=", shards), func(b *testing.B) { benchCommitManyStreams(b, 1000, shards) })
	}
}

func benchCommitManyStreams(b *testing.B, streams, shards int) {
	ctx := context.Background()
	c, err := Open(ctx, Config{Metadata: memstore.New(), ObjectWAL: memprovider.New(1, memprovider.Faults{}), WriterID: "bench",
		CommitShards: shards, RetentionInterval: time.Hour,
		Lifecycle: LifecycleConfig{GCDisabled: true, DisableMaterialization: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sessions := make([]Session, streams)
	for i := range sessions {
		info, err := c.Create(ctx, fmt.Sprintf("s%05d", i), CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if sessions[i], err = c.AcquireSession(ctx, info.ID, SessionOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	futs := make([]*AppendFuture, streams)
	payload := make([]byte, 100)
	round := func(n int) {
		for i := 0; i < n; i++ {
			futs[i] = c.AppendAsync(sessions[i], AppendRequest{Entries: []Entry{{Payload: payload, RecordCount: 1}}, ExpectedStart: -1})
		}
		for _, f := range futs[:n] {
			if _, err := f.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	round(streams) // warm: every stream has committed once
	b.ReportAllocs()
	cpu0 := cpuNow()
	b.ResetTimer()
	for done := 0; done < b.N; done += streams {
		round(min(streams, b.N-done))
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuNow()-cpu0)/float64(b.N), "cpu-ns/append")
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
