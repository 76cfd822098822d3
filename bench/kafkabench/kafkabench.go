// Package kafkabench is a Kafka load generator with OpenMessaging-Benchmark
// style parameters (topics, partitions per topic, record size, producer
// rate or max, producers, consumers, duration, warm-up). It drives any Kafka
// bootstrap address with franz-go and reports throughput and produce and
// end-to-end latency percentiles (HdrHistogram).
//
// It owns only measurement. It must never judge correctness (the client
// tests do that) and never hide what it measured against: results carry the
// target label the caller gives. Latency is measured from the moment a
// record is handed to the client (produce) or stamped into the record value
// (end-to-end) to the ack callback / the consumer poll that returns it; the
// producer schedules sends by intended time at a fixed rate, so a slow
// server shows up as latency, not as silently reduced load.
package kafkabench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Workload is one benchmark run's parameters.
type Workload struct {
	Bootstrap string
	// Label names the system under test in the report (e.g. "nereus",
	// "apache-kafka-4.1.1").
	Label string
	// Topics and PartitionsPerTopic shape the topics (created if missing,
	// with a name prefix unique to the run).
	Topics             int
	PartitionsPerTopic int
	// RecordSize is the value size in bytes (>= 16; the first 16 bytes
	// carry the send timestamp and a sequence).
	RecordSize int
	// ProduceRate is the total target records/second over all producers;
	// 0 means as fast as possible.
	ProduceRate float64
	Producers   int
	// Consumers is the number of consumer-group members per topic's
	// subscription (0: no consumers, no end-to-end latency).
	Consumers int
	// Acks: "all" (default), "1" or "0".
	Acks string
	// Linger and BatchMaxBytes tune the producer (defaults 1ms, 1 MiB).
	Linger        time.Duration
	BatchMaxBytes int32
	// Compression: "none" (default), "lz4", "zstd", "snappy", "gzip".
	Compression string
	Duration    time.Duration
	Warmup      time.Duration
	// ClientOpts are added to every franz-go client of the run (TLS, SASL:
	// kgo.DialTLSConfig, kgo.SASL).
	ClientOpts []kgo.Opt `json:"-"`
}

func (w *Workload) defaults() {
	if w.Topics <= 0 {
		w.Topics = 1
	}
	if w.PartitionsPerTopic <= 0 {
		w.PartitionsPerTopic = 16
	}
	if w.RecordSize < 16 {
		w.RecordSize = 1024
	}
	if w.Producers <= 0 {
		w.Producers = 1
	}
	if w.Acks == "" {
		w.Acks = "all"
	}
	if w.Linger <= 0 {
		w.Linger = time.Millisecond
	}
	if w.BatchMaxBytes <= 0 {
		w.BatchMaxBytes = 1 << 20
	}
	if w.Compression == "" {
		w.Compression = "none"
	}
	if w.Duration <= 0 {
		w.Duration = 30 * time.Second
	}
	if w.Label == "" {
		w.Label = w.Bootstrap
	}
}

// Latency summarises a latency histogram in milliseconds.
type Latency struct {
	Count                    int64
	P50, P99, P999, Max, Avg float64
}

func summarize(h *hdrhistogram.Histogram) Latency {
	us := func(v int64) float64 { return float64(v) / 1000 }
	return Latency{Count: h.TotalCount(), P50: us(h.ValueAtQuantile(50)), P99: us(h.ValueAtQuantile(99)),
		P999: us(h.ValueAtQuantile(99.9)), Max: us(h.Max()), Avg: h.Mean() / 1000}
}

// Result is what one run measured (after warm-up).
type Result struct {
	Workload        Workload
	Seconds         float64
	ProducedRecords int64
	ProduceRate     float64 // records/s
	ProduceMBps     float64 // MB/s (10^6 bytes of record values)
	ProduceErrors   int64
	ConsumedRecords int64
	ConsumeMBps     float64
	ProduceLatency  Latency
	EndToEnd        Latency
	// Topics are the topics the run created (the caller may delete them).
	Topics []string
}

// Print writes a human-readable report.
func (r Result) Print(out io.Writer) {
	w := r.Workload
	rate := "max"
	if w.ProduceRate > 0 {
		rate = fmt.Sprintf("%.0f rec/s", w.ProduceRate)
	}
	fmt.Fprintf(out, "== %s: topics=%d partitions/topic=%d record=%dB rate=%s producers=%d consumers=%d acks=%s compression=%s linger=%v duration=%v warmup=%v\n",
		w.Label, w.Topics, w.PartitionsPerTopic, w.RecordSize, rate, w.Producers, w.Consumers, w.Acks, w.Compression, w.Linger, w.Duration, w.Warmup)
	fmt.Fprintf(out, "produce:  %10.0f rec/s  %8.2f MB/s  (%d records, %d errors)\n", r.ProduceRate, r.ProduceMBps, r.ProducedRecords, r.ProduceErrors)
	fmt.Fprintf(out, "produce latency ms:     p50 %7.2f  p99 %7.2f  p99.9 %7.2f  max %7.2f\n", r.ProduceLatency.P50, r.ProduceLatency.P99, r.ProduceLatency.P999, r.ProduceLatency.Max)
	if w.Consumers > 0 {
		fmt.Fprintf(out, "consume:  %10.0f rec/s  %8.2f MB/s\n", float64(r.ConsumedRecords)/r.Seconds, r.ConsumeMBps)
		fmt.Fprintf(out, "end-to-end latency ms:  p50 %7.2f  p99 %7.2f  p99.9 %7.2f  max %7.2f\n", r.EndToEnd.P50, r.EndToEnd.P99, r.EndToEnd.P999, r.EndToEnd.Max)
	}
}

// JSON returns the result as one JSON line.
func (r Result) JSON() string {
	b, _ := json.Marshal(r)
	return string(b)
}

func acksOpt(a string) (kgo.Opt, bool) {
	switch a {
	case "0":
		return kgo.RequiredAcks(kgo.NoAck()), false
	case "1":
		return kgo.RequiredAcks(kgo.LeaderAck()), false
	default:
		return kgo.RequiredAcks(kgo.AllISRAcks()), true
	}
}

func compressionOpt(c string) kgo.Opt {
	switch c {
	case "lz4":
		return kgo.ProducerBatchCompression(kgo.Lz4Compression())
	case "zstd":
		return kgo.ProducerBatchCompression(kgo.ZstdCompression())
	case "snappy":
		return kgo.ProducerBatchCompression(kgo.SnappyCompression())
	case "gzip":
		return kgo.ProducerBatchCompression(kgo.GzipCompression())
	default:
		return kgo.ProducerBatchCompression(kgo.NoCompression())
	}
}

// recorder is a histogram safe for concurrent use.
type recorder struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

func newRecorder() *recorder { return &recorder{h: hdrhistogram.New(1, 120_000_000, 3)} } // 1µs..120s

func (r *recorder) record(d time.Duration) {
	us := max(d.Microseconds(), 1)
	r.mu.Lock()
	_ = r.h.RecordValue(min(us, 120_000_000))
	r.mu.Unlock()
}

// Run executes the workload and returns its measurements.
func Run(ctx context.Context, w Workload) (Result, error) {
	w.defaults()
	prefix := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e9)
	topics := make([]string, w.Topics)
	for i := range topics {
		topics[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	admCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(w.Bootstrap)}, w.ClientOpts...)...)
	if err != nil {
		return Result{}, err
	}
	adm := kadm.NewClient(admCl)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	resp, err := adm.CreateTopics(cctx, int32(w.PartitionsPerTopic), 1, nil, topics...)
	cancel()
	if err == nil {
		err = resp.Error()
	}
	admCl.Close()
	if err != nil {
		return Result{}, fmt.Errorf("create topics: %w", err)
	}

	var (
		measuring   atomic.Bool
		produced    atomic.Int64
		prodErrs    atomic.Int64
		consumed    atomic.Int64
		consumedB   atomic.Int64
		prodLat     = newRecorder()
		e2eLat      = newRecorder()
		runCtx, end = context.WithCancel(ctx)
	)
	defer end()

	// Consumers: one group per topic set, Consumers members.
	var cwg sync.WaitGroup
	group := prefix + "-group"
	ready := make(chan struct{}, w.Consumers)
	for i := 0; i < w.Consumers; i++ {
		cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), w.ClientOpts...), kgo.SeedBrokers(w.Bootstrap), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(100*time.Millisecond),
			kgo.DisableAutoCommit(), kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
				select {
				case ready <- struct{}{}:
				default:
				}
			}))...)
		if err != nil {
			return Result{}, err
		}
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			defer cl.Close()
			for runCtx.Err() == nil {
				fs := cl.PollFetches(runCtx)
				now := time.Now()
				fs.EachRecord(func(r *kgo.Record) {
					if !measuring.Load() || len(r.Value) < 16 {
						return
					}
					sent := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
					e2eLat.record(now.Sub(sent))
					consumed.Add(1)
					consumedB.Add(int64(len(r.Value)))
				})
			}
		}()
	}
	if w.Consumers > 0 {
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			return Result{}, fmt.Errorf("consumers were not assigned partitions within 30s")
		}
	}

	acks, idem := acksOpt(w.Acks)
	var pwg sync.WaitGroup
	perProducer := w.ProduceRate / float64(w.Producers)
	for i := 0; i < w.Producers; i++ {
		opts := append(append([]kgo.Opt(nil), w.ClientOpts...), kgo.SeedBrokers(w.Bootstrap), acks, compressionOpt(w.Compression),
			kgo.ProducerLinger(w.Linger), kgo.ProducerBatchMaxBytes(w.BatchMaxBytes),
			kgo.MaxBufferedRecords(100_000), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		if !idem {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return Result{}, err
		}
		pwg.Add(1)
		go func(seed uint64) {
			defer pwg.Done()
			defer cl.Close()
			rng := rand.New(rand.NewPCG(seed, 7))
			payload := make([]byte, w.RecordSize)
			for i := range payload {
				payload[i] = byte(rng.IntN(256))
			}
			var interval time.Duration
			if perProducer > 0 {
				interval = time.Duration(float64(time.Second) / perProducer)
			}
			next := time.Now()
			for seq := uint64(0); runCtx.Err() == nil; seq++ {
				if interval > 0 {
					next = next.Add(interval)
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
				}
				v := make([]byte, w.RecordSize)
				copy(v, payload)
				start := time.Now()
				binary.BigEndian.PutUint64(v, uint64(start.UnixNano()))
				binary.BigEndian.PutUint64(v[8:], seq)
				topic := topics[int(seq)%len(topics)]
				cl.Produce(runCtx, &kgo.Record{Topic: topic, Value: v}, func(r *kgo.Record, err error) {
					if !measuring.Load() {
						return
					}
					if err != nil {
						if runCtx.Err() == nil {
							prodErrs.Add(1)
						}
						return
					}
					prodLat.record(time.Since(start))
					produced.Add(1)
				})
			}
			fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = cl.Flush(fctx)
			fcancel()
		}(uint64(i + 1))
	}

	select {
	case <-time.After(w.Warmup):
	case <-ctx.Done():
	}
	measuring.Store(true)
	start := time.Now()
	select {
	case <-time.After(w.Duration):
	case <-ctx.Done():
	}
	secs := time.Since(start).Seconds()
	measuring.Store(false)
	end()
	pwg.Wait()
	cwg.Wait()

	n := produced.Load()
	res := Result{
		Workload:        w,
		Seconds:         secs,
		ProducedRecords: n,
		ProduceRate:     float64(n) / secs,
		ProduceMBps:     float64(n) * float64(w.RecordSize) / secs / 1e6,
		ProduceErrors:   prodErrs.Load(),
		ConsumedRecords: consumed.Load(),
		ConsumeMBps:     float64(consumedB.Load()) / secs / 1e6,
		ProduceLatency:  summarize(prodLat.h),
		EndToEnd:        summarize(e2eLat.h),
		Topics:          topics,
	}
	return res, ctx.Err()
}
