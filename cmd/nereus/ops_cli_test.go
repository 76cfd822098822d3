package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/server"
)

func TestCLIRetention(t *testing.T) {
	c := newCLI(t)
	c.ok("", "stream", "create", "kept")
	if out := c.ok("", "stream", "retention", "kept"); out != "kept retention: time unlimited, bytes unlimited\n" {
		t.Fatalf("initial retention: %q", out)
	}
	if out := c.ok("", "stream", "retention", "kept", "--time", "168h"); out != "kept retention: time 168h0m0s, bytes unlimited\n" {
		t.Fatalf("after --time: %q", out)
	}
	// Setting one limit keeps the other.
	if out := c.ok("", "stream", "retention", "kept", "--bytes", "10GiB"); out != "kept retention: time 168h0m0s, bytes 10GiB\n" {
		t.Fatalf("after --bytes: %q", out)
	}
	if out := c.ok("", "stream", "describe", "kept"); !strings.Contains(out, "time=168h0m0s bytes=10737418240") {
		t.Fatalf("describe does not show the retention:\n%s", out)
	}
	if out := c.ok("", "stream", "retention", "kept", "--format", "json"); !strings.Contains(out, `"bytes": 10737418240`) || !strings.Contains(out, `"timeMs": 604800000`) {
		t.Fatalf("json: %q", out)
	}
	if out := c.ok("", "stream", "retention", "kept", "--clear"); out != "kept retention: time unlimited, bytes unlimited\n" {
		t.Fatalf("after --clear: %q", out)
	}
	c.fails("--bytes \"lots\"", "", "stream", "retention", "kept", "--bytes", "lots")
	c.fails("cannot be combined", "", "stream", "retention", "kept", "--clear", "--time", "1h")
	c.fails("not found", "", "stream", "retention", "missing")
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "1KiB": 1 << 10, "64MiB": 64 << 20, "10GiB": 10 << 30, "2T": 2 << 40} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1.5GiB"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

// `nereus bench` finds the Kafka listener through /healthz, runs a short
// load and prints throughput and latency percentiles.
func TestCLIBench(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.KafkaAddr, cfg.PulsarAddr = "127.0.0.1:0", "127.0.0.1:0", ""
	s, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	c := newCLI(t)
	c.server = "http://" + s.HTTPAddr()
	r := c.run("", "bench", "--duration", "2s", "--warmup", "1s", "--partitions", "2", "--rate", "500", "--record-size", "256")
	if r.code != 0 {
		t.Fatalf("bench: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"produce:", "MB/s", "produce latency ms:", "p99", "end-to-end latency ms:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("bench output lacks %q:\n%s", want, r.stdout)
		}
	}
	// Its topics are gone afterwards.
	if out := c.ok("", "stream", "list"); strings.Contains(out, "bench-") {
		t.Errorf("bench left its topics' streams behind:\n%s", out)
	}
}
