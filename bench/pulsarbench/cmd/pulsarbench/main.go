// Command pulsarbench runs an OMB-style Pulsar workload against a service
// URL (or an in-process Nereus broker over in-memory storage when -url is
// empty) and prints throughput and latency percentiles.
//
//	go run ./bench/pulsarbench/cmd/pulsarbench -rate 0 -duration 30s -batching
//	go run ./bench/pulsarbench/cmd/pulsarbench -url pulsar://127.0.0.1:6650 -admin http://127.0.0.1:8080 -partitions 4
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/nereusstream/nereus-go/bench/pulsarbench"
)

func main() {
	var w pulsarbench.Workload
	url := flag.String("url", "", "Pulsar service URL (empty: start an in-process Nereus broker over in-memory storage)")
	admin := flag.String("admin", "", "admin HTTP URL (needed for -partitions > 1 against an external broker)")
	flag.StringVar(&w.Name, "name", "1-topic-1KB", "workload label")
	flag.IntVar(&w.Topics, "topics", 1, "topics")
	flag.IntVar(&w.PartitionsPerTopic, "partitions", 1, "partitions per topic")
	flag.IntVar(&w.MessageSize, "size", 1024, "message size in bytes")
	flag.IntVar(&w.ProducersPerTopic, "producers", 1, "producers per topic")
	flag.IntVar(&w.SubscriptionsPerTopic, "subscriptions", 1, "subscriptions per topic")
	flag.IntVar(&w.ConsumerPerSubscription, "consumers", 1, "consumers per subscription")
	flag.IntVar(&w.ProducerRate, "rate", 0, "total producer rate in messages/s (0: as fast as possible)")
	flag.DurationVar(&w.TestDuration, "duration", 30*time.Second, "measured duration")
	flag.DurationVar(&w.WarmupDuration, "warmup", 5*time.Second, "warm-up duration (not measured)")
	flag.BoolVar(&w.BatchingEnabled, "batching", true, "producer batching")
	flag.DurationVar(&w.BatchingMaxPublishDelay, "batch-delay", time.Millisecond, "batching max publish delay")
	flag.IntVar(&w.MaxPendingMessages, "max-pending", 1000, "max pending messages per producer")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	serviceURL, adminURL := *url, *admin
	if serviceURL == "" {
		b, err := pulsarbench.StartInProcess()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer b.Close()
		serviceURL, adminURL = b.ServiceURL, b.AdminURL
	}
	res, err := pulsarbench.Run(ctx, serviceURL, adminURL, w)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(res)
}
