package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/bench/kafkabench"
)

// newBenchCmd is `nereus bench`: a one-command load test of a running
// server through its Kafka listener (franz-go producers and a consumer
// group, bench/kafkabench), printing MB/s and produce / end-to-end latency
// percentiles.
func newBenchCmd(e env) *cobra.Command {
	o := &streamOpts{}
	var w kafkabench.Workload
	var bootstrap string
	var keep bool
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load-test a running server through its Kafka listener; prints MB/s and latency percentiles",
		Long: `Load-test a running Nereus server through its Kafka listener.

It asks the server (--server, or NEREUS_SERVER, or ` + defaultServer + `) for its Kafka
listener (or uses --bootstrap), creates fresh topics, runs --producers Kafka
producers at --rate records/s (0: as fast as the server takes them) and a
consumer group of --consumers members for --warmup + --duration, then prints
throughput (MB/s = 10^6 bytes of record values per second) and the produce
(send -> ack) and end-to-end (send -> consumed) latency percentiles, and
deletes its topics (unless --keep-topics). Producers send by schedule, so a
slow server shows up as latency, not as silently reduced load.`,
		Args: argsWithHelp(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if bootstrap == "" {
				c, err := o.client(e)
				if err != nil {
					return err
				}
				hctx, cancel := o.reqCtx(ctx, 0)
				h, err := c.Health(hctx)
				cancel()
				if err != nil {
					return fmt.Errorf("asking the server for its Kafka listener: %w (or pass --bootstrap)", err)
				}
				bootstrap = h.Listeners["kafka"]
				if bootstrap == "" {
					return errors.New("the server has no Kafka listener (started with --kafka-addr \"\"?); pass --bootstrap")
				}
			}
			w.Bootstrap = bootstrap
			if w.Label == "" {
				w.Label = "nereus " + bootstrap
			}
			var bar *progressbar.ProgressBar
			if e.isTerminal(e.stderr) {
				total := w.Warmup + w.Duration
				bar = progressbar.NewOptions64(int64(total/time.Second),
					progressbar.OptionSetWriter(e.stderr),
					progressbar.OptionSetDescription(fmt.Sprintf("bench %s (warm-up %v, measure %v)", bootstrap, w.Warmup, w.Duration)),
					progressbar.OptionShowCount(),
					progressbar.OptionSetPredictTime(false),
					progressbar.OptionClearOnFinish(),
				)
				done := make(chan struct{})
				defer close(done)
				go func() {
					t := time.NewTicker(time.Second)
					defer t.Stop()
					for {
						select {
						case <-done:
							return
						case <-t.C:
							_ = bar.Add(1)
						}
					}
				}()
			}
			res, err := kafkabench.Run(ctx, w)
			if bar != nil {
				_ = bar.Finish()
			}
			if len(res.Topics) > 0 && !keep {
				deleteBenchTopics(bootstrap, res.Topics)
			}
			if err != nil && res.Seconds == 0 {
				return fmt.Errorf("bench: %w", err)
			}
			res.Print(e.stdout)
			if res.ProduceErrors > 0 {
				return fmt.Errorf("bench: %d produce errors", res.ProduceErrors)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.server, "server", "", "server URL to ask for its Kafka listener (env NEREUS_SERVER, default "+defaultServer+")")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "timeout of the request to the server")
	f.StringVar(&bootstrap, "bootstrap", "", "Kafka bootstrap address (default: the server's Kafka listener)")
	f.StringVar(&w.Label, "label", "", "name of the system under test in the report")
	f.IntVar(&w.Topics, "topics", 1, "topics to create")
	f.IntVar(&w.PartitionsPerTopic, "partitions", 16, "partitions per topic")
	f.IntVar(&w.RecordSize, "record-size", 1024, "record value size in bytes (>= 16)")
	f.Float64Var(&w.ProduceRate, "rate", 0, "total producer rate in records/s (0: as fast as acknowledged)")
	f.IntVar(&w.Producers, "producers", 1, "producer clients")
	f.IntVar(&w.Consumers, "consumers", 1, "consumer group members (0: no consumers, no end-to-end latency)")
	f.StringVar(&w.Acks, "acks", "all", "producer acks: all, 1 or 0")
	f.DurationVar(&w.Linger, "linger", time.Millisecond, "producer linger")
	f.StringVar(&w.Compression, "compression", "none", "none, lz4, zstd, snappy or gzip")
	f.DurationVar(&w.Duration, "duration", 30*time.Second, "measured duration")
	f.DurationVar(&w.Warmup, "warmup", 5*time.Second, "warm-up before measuring")
	f.BoolVar(&keep, "keep-topics", false, "keep the topics the run created")
	return cmd
}

func deleteBenchTopics(bootstrap string, topics []string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topics...)
}
