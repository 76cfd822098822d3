// Package kafkatest starts a Kafka front end for client tests. By default it
// runs a real `nereus serve` process (durable core, loopback ports, a
// temporary data dir) through internal/testserver; with NEREUS_KAFKA_ADDR set
// it points the tests at that external server; with NEREUS_KAFKA_INPROCESS=1
// it starts the front end in-process over the in-memory stream storage and
// metadata store (fast, for iterating on the front end itself).
//
// It is for tests only.
package kafkatest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testserver"
	"github.com/nereusstream/nereus-go/kafka"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

// EnvAddr names the environment variable with an external bootstrap address.
const EnvAddr = "NEREUS_KAFKA_ADDR"

// EnvInProcess selects the in-process broker over in-memory storage.
const EnvInProcess = "NEREUS_KAFKA_INPROCESS"

// Broker is a running front end (or an external one).
type Broker struct {
	Addr   string
	Server *kafka.Server // nil for an external broker or a nereus serve process
	proc   *testserver.Server
	ln     net.Listener
	done   chan error
}

// Options tweak the in-process server.
type Options struct {
	Config kafka.Config
	// Verbose logs to stderr instead of discarding logs.
	Verbose bool
}

// Start returns the external broker named by NEREUS_KAFKA_ADDR, or starts an
// in-process one over streammem + memstore on 127.0.0.1:0.
func Start(opts Options) (*Broker, error) {
	if addr := os.Getenv(EnvAddr); addr != "" {
		return &Broker{Addr: addr}, nil
	}
	if os.Getenv(EnvInProcess) == "1" {
		return StartLocal(opts)
	}
	// A short KIP-848 heartbeat interval keeps incremental rebalances in
	// tests to a few seconds (Kafka's default is 5s).
	proc, err := testserver.Launch(testserver.Options{DisablePulsar: true, Args: []string{"--kafka-consumer-heartbeat-interval", "500ms"}})
	if err != nil {
		return nil, fmt.Errorf("starting nereus serve: %w", err)
	}
	return &Broker{Addr: proc.KafkaAddr(), proc: proc}, nil
}

// StartLocal always starts an in-process broker.
func StartLocal(opts Options) (*Broker, error) {
	cfg := opts.Config
	if cfg.Logger == nil {
		if opts.Verbose {
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		} else {
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		}
	}
	if cfg.MinSessionTimeout == 0 {
		cfg.MinSessionTimeout = 100 * time.Millisecond
	}
	srv, err := kafka.NewServer(cfg, streammem.New(), memstore.New())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Broker{Addr: ln.Addr().String(), Server: srv, ln: ln, done: make(chan error, 1)}
	go func() { b.done <- srv.Serve(ln) }()
	return b, nil
}

// External reports whether the broker runs outside this process.
func (b *Broker) External() bool { return b.Server == nil }

// RequestCount reports how many requests of an API key the broker has
// answered: from the in-process server's stats, or from a launched nereus
// serve's /metrics. ok is false for an external broker.
func (b *Broker) RequestCount(key int16) (n int64, ok bool) {
	switch {
	case b.Server != nil:
		return b.Server.Stats().RequestsByKey()[key][0], true
	case b.proc != nil:
		resp, err := http.Get(b.proc.URL() + "/metrics")
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		want := fmt.Sprintf(`nereus_kafka_requests_total{api=%q} `, kmsg.NameForKey(key))
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, want) {
				v, err := strconv.ParseFloat(strings.TrimPrefix(line, want), 64)
				return int64(v), err == nil
			}
		}
		return 0, true
	}
	return 0, false
}

// LogTail returns the last lines of a launched nereus serve's log ("" for
// other brokers), for diagnosing a failed test.
func (b *Broker) LogTail(n int) string {
	if b.proc == nil {
		return ""
	}
	return b.proc.LogTail(n)
}

// Close shuts an in-process broker down (no-op for an external one).
func (b *Broker) Close() error {
	if b.proc != nil {
		b.proc.Close()
		return nil
	}
	if b.Server == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := b.Server.Shutdown(ctx)
	<-b.done
	return err
}

// Require fails or skips t when an external dependency is missing, per the
// project rule: with NEREUS_REQUIRE_EXTERNAL=1 it fails, otherwise it skips.
func Require(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	testenv.SkipOrFail(t, "%s not available", what)
}
