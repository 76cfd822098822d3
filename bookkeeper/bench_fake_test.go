package bookkeeper_test

import (
	"context"
	"testing"

	"github.com/nereusstream/nereus-go/bookkeeper"
)

// Client overhead against in-process fake bookies (loopback TCP, no disk):
// a lower bound for the real-bookie figures in package integration.
func BenchmarkFakeAppendSequential(b *testing.B) {
	fc, err := newBenchCluster(b)
	if err != nil {
		b.Fatal(err)
	}
	c, err := bookkeeper.New(bookkeeper.Config{Metadata: fc.Meta, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 1})
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 4096)
	b.SetBytes(4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := w.Append(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFakeAppendPipelined(b *testing.B) {
	fc, err := newBenchCluster(b)
	if err != nil {
		b.Fatal(err)
	}
	c, err := bookkeeper.New(bookkeeper.Config{Metadata: fc.Meta, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 1})
	if err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 4096)
	b.SetBytes(4096)
	b.ResetTimer()
	var last *bookkeeper.AddFuture
	for i := 0; i < b.N; i++ {
		if last, err = w.AppendAsync(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	if err := last.Wait(ctx); err != nil {
		b.Fatal(err)
	}
}
