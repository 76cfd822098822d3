// Package pulsarbench is a Pulsar load generator in the style of the
// OpenMessaging Benchmark (OMB) workloads: topics × partitions, producers
// and subscriptions per topic, a message size, a target producer rate, a
// warm-up and a test duration. It drives real pulsar-client-go producers and
// consumers against any Pulsar service URL (a Nereus broker started
// in-process by StartInProcess, `nereus serve`, or Apache Pulsar) and
// reports publish and end-to-end throughput and latency percentiles.
//
// It owns measurement only; it must never reach into broker internals, so
// the same numbers can be taken against any broker.
//
// End-to-end latency is measured from the producer's send call to the
// consumer's receipt, with the send time (monotonic nanoseconds of this
// process) carried in the first 8 bytes of each payload; producers and
// consumers therefore must run in one process, as here.
package pulsarbench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// Workload mirrors the OMB workload fields that matter for Pulsar.
type Workload struct {
	Name                    string        // label in the report
	Topics                  int           // default 1
	PartitionsPerTopic      int           // default 1 (0/1 = non-partitioned)
	MessageSize             int           // bytes, default 1024
	ProducersPerTopic       int           // default 1
	SubscriptionsPerTopic   int           // default 1
	ConsumerPerSubscription int           // default 1
	ProducerRate            int           // total messages/s across producers; 0 = as fast as possible
	TestDuration            time.Duration // default 30s
	WarmupDuration          time.Duration // default 5s
	BatchingEnabled         bool
	BatchingMaxPublishDelay time.Duration // default 1ms (OMB's Pulsar driver default)
	BatchingMaxMessages     int           // default 1000
	MaxPendingMessages      int           // per producer, default 1000
	// TopicPrefix names the topics (default "persistent://public/default/bench").
	TopicPrefix string
}

func (w Workload) withDefaults() Workload {
	if w.Topics <= 0 {
		w.Topics = 1
	}
	if w.MessageSize < 8 {
		w.MessageSize = 1024
	}
	if w.ProducersPerTopic <= 0 {
		w.ProducersPerTopic = 1
	}
	if w.SubscriptionsPerTopic <= 0 {
		w.SubscriptionsPerTopic = 1
	}
	if w.ConsumerPerSubscription <= 0 {
		w.ConsumerPerSubscription = 1
	}
	if w.TestDuration <= 0 {
		w.TestDuration = 30 * time.Second
	}
	if w.WarmupDuration < 0 {
		w.WarmupDuration = 0
	} else if w.WarmupDuration == 0 {
		w.WarmupDuration = 5 * time.Second
	}
	if w.BatchingMaxPublishDelay <= 0 {
		w.BatchingMaxPublishDelay = time.Millisecond
	}
	if w.BatchingMaxMessages <= 0 {
		w.BatchingMaxMessages = 1000
	}
	if w.MaxPendingMessages <= 0 {
		w.MaxPendingMessages = 1000
	}
	if w.TopicPrefix == "" {
		w.TopicPrefix = "persistent://public/default/bench"
	}
	return w
}

// Result is what one run measured (over TestDuration, after warm-up).
type Result struct {
	Workload         Workload
	Duration         time.Duration
	Published        int64
	PublishErrors    int64
	Consumed         int64
	PublishRate      float64 // messages/s
	PublishMBps      float64 // MiB/s of payload
	ConsumeRate      float64
	ConsumeMBps      float64
	PublishLatencyMs Percentiles
	EndToEndMs       Percentiles
}

// Percentiles of a latency distribution in milliseconds.
type Percentiles struct {
	P50, P99, P999, Max float64
}

func percentiles(h *hdrhistogram.Histogram) Percentiles {
	us := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	return Percentiles{P50: us(50), P99: us(99), P999: us(99.9), Max: float64(h.Max()) / 1000}
}

// String renders the result as a one-line OMB-like summary.
func (r Result) String() string {
	return fmt.Sprintf("%s: publish %.0f msg/s (%.1f MiB/s), consume %.0f msg/s (%.1f MiB/s); publish latency ms p50 %.2f p99 %.2f p99.9 %.2f max %.2f; end-to-end ms p50 %.2f p99 %.2f p99.9 %.2f max %.2f; errors %d",
		r.Workload.Name, r.PublishRate, r.PublishMBps, r.ConsumeRate, r.ConsumeMBps,
		r.PublishLatencyMs.P50, r.PublishLatencyMs.P99, r.PublishLatencyMs.P999, r.PublishLatencyMs.Max,
		r.EndToEndMs.P50, r.EndToEndMs.P99, r.EndToEndMs.P999, r.EndToEndMs.Max, r.PublishErrors)
}

type recorder struct {
	mu        sync.Mutex
	pub, e2e  *hdrhistogram.Histogram
	measuring atomic.Bool
	published atomic.Int64
	errors    atomic.Int64
	consumed  atomic.Int64
}

func (r *recorder) recordPublish(d time.Duration) {
	if !r.measuring.Load() {
		return
	}
	r.published.Add(1)
	r.mu.Lock()
	_ = r.pub.RecordValue(d.Microseconds())
	r.mu.Unlock()
}

func (r *recorder) recordConsume(d time.Duration) {
	if !r.measuring.Load() {
		return
	}
	r.consumed.Add(1)
	r.mu.Lock()
	_ = r.e2e.RecordValue(d.Microseconds())
	r.mu.Unlock()
}

var epoch = time.Now()

// Run executes the workload against serviceURL. When the workload has
// partitions, adminURL (http://...) is used to create partitioned topics.
func Run(ctx context.Context, serviceURL, adminURL string, w Workload) (Result, error) {
	w = w.withDefaults()
	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL: serviceURL, OperationTimeout: 30 * time.Second,
		Logger: plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		return Result{}, err
	}
	defer client.Close()
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	var topics []string
	for i := 0; i < w.Topics; i++ {
		t := fmt.Sprintf("%s-%s-%d", w.TopicPrefix, run, i)
		if w.PartitionsPerTopic > 1 {
			if err := createPartitioned(ctx, adminURL, t, w.PartitionsPerTopic); err != nil {
				return Result{}, err
			}
		}
		topics = append(topics, t)
	}
	rec := &recorder{pub: hdrhistogram.New(1, 60_000_000, 3), e2e: hdrhistogram.New(1, 60_000_000, 3)}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// Consumers first, so end-to-end latency covers every message.
	var consumers []pulsar.Consumer
	defer func() {
		for _, c := range consumers {
			c.Close()
		}
	}()
	for _, t := range topics {
		for s := 0; s < w.SubscriptionsPerTopic; s++ {
			for k := 0; k < w.ConsumerPerSubscription; k++ {
				c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: t, SubscriptionName: fmt.Sprintf("sub-%d", s),
					Type: pulsar.Shared, ReceiverQueueSize: 1000})
				if err != nil {
					return Result{}, fmt.Errorf("subscribe %s: %w", t, err)
				}
				consumers = append(consumers, c)
				wg.Add(1)
				go func() {
					defer wg.Done()
					consumeLoop(runCtx, c, rec)
				}()
			}
		}
	}
	var producers []pulsar.Producer
	defer func() {
		for _, p := range producers {
			p.Close()
		}
	}()
	nProducers := w.Topics * w.ProducersPerTopic
	for _, t := range topics {
		for i := 0; i < w.ProducersPerTopic; i++ {
			p, err := client.CreateProducer(pulsar.ProducerOptions{Topic: t, DisableBatching: !w.BatchingEnabled,
				BatchingMaxPublishDelay: w.BatchingMaxPublishDelay, BatchingMaxMessages: uint(w.BatchingMaxMessages),
				MaxPendingMessages: w.MaxPendingMessages, SendTimeout: 60 * time.Second})
			if err != nil {
				return Result{}, fmt.Errorf("producer %s: %w", t, err)
			}
			producers = append(producers, p)
		}
	}
	perProducerRate := 0.0
	if w.ProducerRate > 0 {
		perProducerRate = float64(w.ProducerRate) / float64(nProducers)
	}
	for _, p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			produceLoop(runCtx, p, w.MessageSize, perProducerRate, rec)
		}()
	}
	select {
	case <-time.After(w.WarmupDuration):
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	rec.mu.Lock()
	rec.pub.Reset()
	rec.e2e.Reset()
	rec.mu.Unlock()
	rec.measuring.Store(true)
	start := time.Now()
	select {
	case <-time.After(w.TestDuration):
	case <-ctx.Done():
	}
	rec.measuring.Store(false)
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	secs := elapsed.Seconds()
	mb := float64(w.MessageSize) / (1 << 20)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return Result{
		Workload: w, Duration: elapsed,
		Published: rec.published.Load(), PublishErrors: rec.errors.Load(), Consumed: rec.consumed.Load(),
		PublishRate: float64(rec.published.Load()) / secs, PublishMBps: float64(rec.published.Load()) * mb / secs,
		ConsumeRate: float64(rec.consumed.Load()) / secs, ConsumeMBps: float64(rec.consumed.Load()) * mb / secs,
		PublishLatencyMs: percentiles(rec.pub), EndToEndMs: percentiles(rec.e2e),
	}, ctx.Err()
}

func produceLoop(ctx context.Context, p pulsar.Producer, size int, rate float64, rec *recorder) {
	payload := make([]byte, size)
	var interval time.Duration
	if rate > 0 {
		interval = time.Duration(float64(time.Second) / rate)
	}
	next := time.Now()
	for ctx.Err() == nil {
		if interval > 0 {
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return
				}
			}
			next = next.Add(interval)
		}
		msg := make([]byte, size)
		copy(msg, payload)
		sent := time.Now()
		binary.BigEndian.PutUint64(msg, uint64(sent.Sub(epoch)))
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: msg}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				if ctx.Err() == nil {
					rec.errors.Add(1)
				}
				return
			}
			rec.recordPublish(time.Since(sent))
		})
	}
}

func consumeLoop(ctx context.Context, c pulsar.Consumer, rec *recorder) {
	ch := c.Chan()
	for {
		select {
		case <-ctx.Done():
			return
		case cm, ok := <-ch:
			if !ok {
				return
			}
			if pl := cm.Payload(); len(pl) >= 8 {
				sent := time.Duration(binary.BigEndian.Uint64(pl))
				rec.recordConsume(time.Since(epoch) - sent)
			}
			_ = c.Ack(cm.Message)
		}
	}
}

func createPartitioned(ctx context.Context, adminURL, topic string, n int) error {
	if adminURL == "" {
		return fmt.Errorf("partitioned topics need the admin URL")
	}
	path := strings.Replace(strings.TrimPrefix(topic, "persistent://"), "persistent://", "", 1)
	return httpPut(ctx, strings.TrimRight(adminURL, "/")+"/admin/v2/persistent/"+path+"/partitions", fmt.Sprint(n))
}
