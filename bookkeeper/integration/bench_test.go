package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
)

// Benchmarks against the real bookies (loopback, journalSyncData=false by
// default in the env; set BK_JOURNAL_SYNC=true for fsync-before-ack). One
// producer, acknowledgement at the ack quorum, 4 KiB entries.
//
//	go test -run XXX -bench . -benchtime 5000x ./bookkeeper/integration/
//
// Sequential: one add in flight (append, wait for the ack, repeat):
// appends/s and p50/p99 ack latency. Pipelined: up to MaxPendingAdds in
// flight: MB/s of payload.
var benchQuorums = []struct{ e, wq, aq int }{{3, 2, 2}, {3, 3, 2}}

const benchEntry = 4096

func BenchmarkRealAppendSequential(b *testing.B) {
	env.Require(b)
	c, _ := newClient(b, nil)
	for _, q := range benchQuorums {
		b.Run(fmt.Sprintf("E%dW%dA%d", q.e, q.wq, q.aq), func(b *testing.B) {
			ctx := ctxFor(b, 30*time.Minute)
			w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: newLedgerID(), EnsembleSize: q.e, WriteQuorum: q.wq, AckQuorum: q.aq})
			if err != nil {
				b.Fatal(err)
			}
			p := payload(0, 0, benchEntry)
			// Warm the connections and the bookies' JIT.
			for i := 0; i < 2000; i++ {
				if _, err := w.Append(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.SetBytes(benchEntry)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := w.Append(ctx, p); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
			b.ReportMetric(ms(lat[len(lat)*50/100]), "p50-ms")
			b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]), "p99-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
			if _, err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func BenchmarkRealAppendPipelined(b *testing.B) {
	env.Require(b)
	c, _ := newClient(b, nil)
	for _, q := range benchQuorums {
		b.Run(fmt.Sprintf("E%dW%dA%d", q.e, q.wq, q.aq), func(b *testing.B) {
			ctx := ctxFor(b, 30*time.Minute)
			w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: newLedgerID(), EnsembleSize: q.e, WriteQuorum: q.wq, AckQuorum: q.aq})
			if err != nil {
				b.Fatal(err)
			}
			p := payload(0, 0, benchEntry)
			for i := 0; i < 2000; i++ {
				if _, err := w.Append(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(benchEntry)
			b.ResetTimer()
			start := time.Now()
			futs := make([]*bookkeeper.AddFuture, 0, b.N)
			for i := 0; i < b.N; i++ {
				f, err := w.AppendAsync(ctx, p)
				if err != nil {
					b.Fatal(err)
				}
				futs = append(futs, f)
			}
			// Futures complete in entry order: the last one done means all are.
			if err := futs[len(futs)-1].Wait(ctx); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			for _, f := range futs {
				if err := f.Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
			if _, err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
