// Package kafkatest starts a Kafka front end for client tests: in-process on
// a free loopback port over the in-memory stream storage and metadata store,
// or, when NEREUS_KAFKA_ADDR is set, it points the tests at that external
// server (a real `nereus serve`).
//
// It is for tests only: the in-process server keeps everything in memory.
package kafkatest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/kafka"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

// EnvAddr names the environment variable with an external bootstrap address.
const EnvAddr = "NEREUS_KAFKA_ADDR"

// Broker is a running front end (or an external one).
type Broker struct {
	Addr   string
	Server *kafka.Server // nil for an external broker
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
	return StartLocal(opts)
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

// Close shuts an in-process broker down (no-op for an external one).
func (b *Broker) Close() error {
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
	if os.Getenv("NEREUS_REQUIRE_EXTERNAL") == "1" {
		t.Fatalf("%s is required (NEREUS_REQUIRE_EXTERNAL=1) but not available", what)
	}
	t.Skipf("%s not available; skipping (set NEREUS_REQUIRE_EXTERNAL=1 to fail instead)", what)
}
