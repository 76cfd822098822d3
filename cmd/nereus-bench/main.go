// Command nereus-bench runs a Kafka load (OpenMessaging-Benchmark style
// parameters) against a bootstrap address, or, without one, against an
// in-process Nereus Kafka front end over the in-memory stream storage (which
// validates the harness and measures the front end alone, not durable
// storage: the report says so).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/nereusstream/nereus-go/bench/kafkabench"
	"github.com/nereusstream/nereus-go/kafka/kafkatest"
)

func main() {
	var w kafkabench.Workload
	var asJSON bool
	flag.StringVar(&w.Bootstrap, "bootstrap", "", "Kafka bootstrap address (empty: start an in-process Nereus front end over in-memory storage)")
	flag.StringVar(&w.Label, "label", "", "name of the system under test in the report")
	flag.IntVar(&w.Topics, "topics", 1, "number of topics")
	flag.IntVar(&w.PartitionsPerTopic, "partitions", 16, "partitions per topic")
	flag.IntVar(&w.RecordSize, "record-size", 1024, "record value size in bytes (>= 16)")
	flag.Float64Var(&w.ProduceRate, "rate", 0, "total producer rate in records/s (0: max)")
	flag.IntVar(&w.Producers, "producers", 1, "producer clients")
	flag.IntVar(&w.Consumers, "consumers", 1, "consumer group members (0: none)")
	flag.StringVar(&w.Acks, "acks", "all", "producer acks: all, 1 or 0")
	flag.DurationVar(&w.Linger, "linger", time.Millisecond, "producer linger")
	flag.StringVar(&w.Compression, "compression", "none", "none, lz4, zstd, snappy, gzip")
	flag.DurationVar(&w.Duration, "duration", 30*time.Second, "measured duration")
	flag.DurationVar(&w.Warmup, "warmup", 5*time.Second, "warm-up before measuring")
	flag.BoolVar(&asJSON, "json", false, "print one JSON result line after the report")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (client and any in-process server) to this file")
	tlsCA := flag.String("tls-ca-file", "", "connect over TLS, trusting this PEM CA (an SSL or SASL_SSL listener)")
	saslMech := flag.String("sasl-mechanism", "", "SASL mechanism: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN (with --sasl-user)")
	saslUser := flag.String("sasl-user", "", "SASL user")
	saslPassFile := flag.String("sasl-password-file", "", "file with the SASL password (or NEREUS_BENCH_SASL_PASSWORD)")
	flag.Parse()
	opts, err := securityOpts(*tlsCA, *saslMech, *saslUser, *saslPassFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	w.ClientOpts = opts
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}

	if w.Bootstrap == "" {
		b, err := kafkatest.StartLocal(kafkatest.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "start in-process front end:", err)
			os.Exit(1)
		}
		defer b.Close()
		w.Bootstrap = b.Addr
		if w.Label == "" {
			w.Label = "nereus-inprocess-streammem (front end only, in-memory storage, NOT durable)"
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := kafkabench.Run(ctx, w)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
	res.Print(os.Stdout)
	if asJSON {
		fmt.Println("RESULT " + res.JSON())
	}
}

// securityOpts builds the TLS and SASL client options of the flags.
func securityOpts(caFile, mech, user, passFile string) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca-file %s holds no PEM certificate", caFile)
		}
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	if mech == "" {
		return opts, nil
	}
	pass := os.Getenv("NEREUS_BENCH_SASL_PASSWORD")
	if passFile != "" {
		b, err := os.ReadFile(passFile)
		if err != nil {
			return nil, err
		}
		pass = strings.TrimSpace(string(b))
	}
	switch strings.ToUpper(mech) {
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	default:
		return nil, fmt.Errorf("--sasl-mechanism %q: want SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", mech)
	}
	return opts, nil
}
