package wal

import (
	"context"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"
)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// testSeed returns WAL_SEED if set, else a fixed seed, and logs it so a
// failure can be replayed.
func testSeed(t testing.TB) int64 {
	seed := int64(20260101)
	if s := os.Getenv("WAL_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("WAL_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (set WAL_SEED to replay)", seed)
	return seed
}

func newQuickRand(t testing.TB) *rand.Rand { return rand.New(rand.NewSource(testSeed(t))) }

// quietLogger discards everything.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
