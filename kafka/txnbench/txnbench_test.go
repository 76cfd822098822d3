// Package txnbench measures what transactions cost on the Nereus Kafka
// front end, on one server in one run: produce MB/s of a transactional
// producer committing every 100 ms against an idempotent producer with the
// same settings, and read_committed against read_uncommitted fetch MB/s
// over the same transactional data.
//
//	go test -run XXX -bench . -benchtime 20000x ./kafka/txnbench/
//
// It starts a real `nereus serve` (internal/testserver) unless
// NEREUS_KAFKA_ADDR names a running server (then NEREUS_SERVER_PID may name
// its process). Besides MB/s every benchmark reports the server's CPU time
// per MiB moved (server-cpu-ms/MiB, from /proc/<pid>/task/*/schedstat;
// steadier than MB/s on a shared machine). Benchmarks only: `go test` without -bench
// runs nothing and starts nothing.
package txnbench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/internal/testserver"
)

const (
	partitions     = 16
	recordSize     = 1024
	commitInterval = 100 * time.Millisecond
)

var (
	once    sync.Once
	addr    string
	srvPid  int
	srvErr  error
	seq     int
	payload = func() []byte { b := make([]byte, recordSize); _, _ = rand.Read(b); return b }()
)

func server(b *testing.B) string {
	once.Do(func() {
		if a := os.Getenv("NEREUS_KAFKA_ADDR"); a != "" {
			addr = a
			srvPid, _ = strconv.Atoi(os.Getenv("NEREUS_SERVER_PID"))
			return
		}
		s, err := testserver.Launch(testserver.Options{DisablePulsar: true})
		if err != nil {
			srvErr = err
			return
		}
		addr = s.KafkaAddr() // left running until the benchmark binary exits
		srvPid = s.Pid()
	})
	if srvErr != nil {
		b.Fatal(srvErr)
	}
	return addr
}

// serverCPU is the server process's CPU time so far: the sum of its
// threads' run time from /proc/<pid>/task/*/schedstat (nanoseconds; Go
// rarely retires threads, and /proc/<pid>/stat's 10 ms ticks are too coarse
// for a server that moves a GiB in a few hundred ms). 0 when unknown: no
// pid, or no /proc.
func serverCPU() time.Duration {
	if srvPid == 0 {
		return 0
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", srvPid))
	if err != nil {
		return 0
	}
	var total int64
	for _, t := range tasks {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", srvPid, t.Name()))
		if err != nil {
			continue // the thread is gone
		}
		if f := strings.Fields(string(raw)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			total += ns
		}
	}
	return time.Duration(total)
}

// measureCPU reports the server CPU spent since start per MiB of bytes.
func measureCPU(b *testing.B, start time.Duration, bytes int64) {
	if start == 0 || bytes <= 0 {
		return
	}
	b.ReportMetric(float64(serverCPU()-start)/1e6/(float64(bytes)/(1<<20)), "server-cpu-ms/MiB")
}

func newTopic(b *testing.B, prefix string) string {
	seq++
	topic := fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, seq)
	cl, err := kgo.NewClient(kgo.SeedBrokers(server(b)))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		b.Fatal(err)
	}
	return topic
}

func producerOpts(topic string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5 * time.Millisecond),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MaxBufferedRecords(10000)}
}

// produce sends n records; with txn it commits every commitInterval.
func produce(b *testing.B, topic string, n int, txn bool) {
	opts := producerOpts(topic)
	if txn {
		opts = append(opts, kgo.TransactionalID("bench-"+topic))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	var failed error
	var mu sync.Mutex
	cb := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			failed = err
			mu.Unlock()
		}
	}
	commits := 0
	var flushTime, endTime time.Duration
	if txn {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
	}
	last := time.Now()
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Value: payload}, cb)
		if txn && time.Since(last) >= commitInterval {
			t0 := time.Now()
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
			flushTime += t1.Sub(t0)
			endTime += time.Since(t1)
			commits++
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
			last = time.Now()
		}
	}
	if txn {
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
		commits++
	} else if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if failed != nil {
		b.Fatal(failed)
	}
	if txn {
		b.ReportMetric(float64(commits)/b.Elapsed().Seconds(), "commits/s")
		if commits > 1 {
			b.ReportMetric(float64(flushTime.Milliseconds())/float64(commits-1), "flush-ms/commit")
			b.ReportMetric(float64(endTime.Milliseconds())/float64(commits-1), "endtxn-ms/commit")
		}
	}
}

func BenchmarkProduceIdempotent(b *testing.B) {
	topic := newTopic(b, "bench-idem")
	b.SetBytes(recordSize)
	cpu := serverCPU()
	b.ResetTimer()
	produce(b, topic, b.N, false)
	measureCPU(b, cpu, int64(b.N)*recordSize)
}

func BenchmarkProduceTransactional100ms(b *testing.B) {
	topic := newTopic(b, "bench-txn")
	b.SetBytes(recordSize)
	cpu := serverCPU()
	b.ResetTimer()
	produce(b, topic, b.N, true)
	measureCPU(b, cpu, int64(b.N)*recordSize)
}

// fetchAll reads n records of topic from the start at the isolation level.
func fetchAll(b *testing.B, topic string, n int, level kgo.IsolationLevel) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("read %d of %d", got, n)
		}
		got += fs.NumRecords()
	}
}

var fetchData struct {
	once  sync.Once
	topic string
	n     int
}

// transactionalData produces the fetch benchmarks' data set once: 64 MiB
// committed in 100 ms transactions, every fourth one aborted.
func transactionalData(b *testing.B) (string, int) {
	fetchData.once.Do(func() {
		topic := newTopic(b, "bench-fetch")
		cl, err := kgo.NewClient(append(producerOpts(topic), kgo.TransactionalID("bench-"+topic))...)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		ctx := context.Background()
		const total = 64 << 20 / recordSize
		committed, inTxn, txns := 0, 0, 0
		_ = cl.BeginTransaction()
		last := time.Now()
		for i := 0; i < total; i++ {
			cl.Produce(ctx, &kgo.Record{Value: payload}, nil)
			inTxn++
			if time.Since(last) >= commitInterval || i == total-1 {
				commit := txns%4 != 3
				if err := cl.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
					b.Fatal(err)
				}
				if commit {
					committed += inTxn
				}
				inTxn, txns, last = 0, txns+1, time.Now()
				_ = cl.BeginTransaction()
			}
		}
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		fetchData.topic, fetchData.n = topic, committed
	})
	return fetchData.topic, fetchData.n
}

func BenchmarkFetchReadUncommitted(b *testing.B) {
	topic, n := transactionalData(b)
	b.SetBytes(int64(n) * recordSize)
	cpu := serverCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fetchAll(b, topic, n, kgo.ReadUncommitted())
	}
	measureCPU(b, cpu, int64(b.N)*int64(n)*recordSize)
}

func BenchmarkFetchReadCommitted(b *testing.B) {
	topic, n := transactionalData(b)
	b.SetBytes(int64(n) * recordSize)
	cpu := serverCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fetchAll(b, topic, n, kgo.ReadCommitted())
	}
	measureCPU(b, cpu, int64(b.N)*int64(n)*recordSize)
}
