package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
)

// TestServeCommandRunsAndDrains runs `nereus serve` in-process with JSON
// logs, a config file and an env override, then "sends SIGTERM".
func TestServeCommandRunsAndDrains(t *testing.T) {
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addrs.json")
	cfgFile := filepath.Join(dir, "nereus.yaml")
	if err := os.WriteFile(cfgFile, []byte("http-addr: 127.0.0.1:0\nkafka-addr: \"\"\nlog-level: debug\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sigCtx, sigCancel := context.WithCancel(context.Background())
	defer sigCancel()
	var stderr syncBuffer
	e := env{
		stdin: strings.NewReader(""), stdout: &stderr, stderr: &stderr,
		lookupEnv: func(k string) (string, bool) {
			if k == "NEREUS_PULSAR_ADDR" {
				return "", true
			}
			return "", false
		},
		signalContext: func(parent context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(parent)
			stop := context.AfterFunc(sigCtx, cancel)
			return ctx, func() { stop(); cancel() }
		},
		isTerminal: func(io.Writer) bool { return false },
	}
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), e, []string{"serve", "--config", cfgFile, "--data-dir", filepath.Join(dir, "data"),
			"--log-format", "json", "--addr-file", addrFile})
	}()
	var addrs map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && json.Unmarshal(b, &addrs) == nil {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d early: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no addr file; stderr: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := addrs["kafka"]; ok {
		t.Fatalf("kafka listener bound although disabled: %v", addrs)
	}
	c, err := adminapi.NewClient(addrs["http"], nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if h, err := c.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("health %+v %v", h, err)
	}
	sigCancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not drain")
	}
	// JSON logs, and they say the storage is the durable core.
	var sawWarn, sawDone bool
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		msg, _ := rec["msg"].(string)
		sawWarn = sawWarn || (msg == "nereus serving" && rec["durable"] == true)
		sawDone = sawDone || msg == "shutdown complete"
	}
	if !sawWarn || !sawDone {
		t.Fatalf("logs lack the durable serving line or the shutdown line: %s", stderr.String())
	}
}

func TestServeRejectsBadConfig(t *testing.T) {
	c := newCLI(t)
	c.fails("log-level", "", "serve", "--log-level", "loud", "--data-dir", t.TempDir())
	c.fails("unknown command \"extra\"", "", "serve", "extra")
}
