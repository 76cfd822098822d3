package server

import (
	"context"
	"strings"
	"testing"

	"github.com/nereusstream/nereus-go/adminapi"
)

// BenchmarkRESTAppend measures the admin REST append path end to end over
// loopback HTTP (JSON encode, request, decode, storage append, response)
// with 100 entries of 1 KiB per request, on the in-memory storage, so it
// isolates the REST layer's own cost.
func BenchmarkRESTAppend(b *testing.B) {
	cfg := DefaultConfig()
	cfg.DataDir = b.TempDir()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.KafkaAddr, cfg.PulsarAddr = "", ""
	s, err := Start(cfg, quietLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	c, _ := adminapi.NewClient("http://"+s.HTTPAddr(), nil)
	ctx := context.Background()
	if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	payload := strings.Repeat("x", 1024)
	req := adminapi.AppendRequest{Entries: make([]adminapi.AppendEntry, 100)}
	for i := range req.Entries {
		req.Entries[i] = adminapi.AppendEntry{Text: &payload}
	}
	b.SetBytes(int64(100 * len(payload)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Append(ctx, "bench", req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "entries/s")
}
