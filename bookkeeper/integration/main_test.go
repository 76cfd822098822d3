package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/bktest"
)

var env bktest.Env

// The package kills and restarts bookies: it always runs its own cluster.
func TestMain(m *testing.M) {
	env.NeedControl = true
	os.Exit(env.Main(m))
}

// ledgerBase puts this run's ledger IDs high in the positive 63-bit space
// (bit 62 set, random middle), far from IDs BookKeeper's generator uses.
var ledgerBase = int64(1)<<62 | rand.Int64N(1<<40)<<16

var nextLedger int64

func newLedgerID() int64 {
	nextLedger++
	return ledgerBase + nextLedger
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func dialStore(t testing.TB) *bookkeeper.ZKStore {
	t.Helper()
	s, err := bookkeeper.DialZK(ctxFor(t, 30*time.Second), env.ZK, bookkeeper.ZKOptions{LedgersRoot: env.Root, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newClient(t testing.TB, mod func(*bookkeeper.Config)) (*bookkeeper.Client, *bookkeeper.ZKStore) {
	t.Helper()
	s := dialStore(t)
	cfg := bookkeeper.Config{Metadata: s, Logger: quiet(), AddTimeout: 20 * time.Second, RequestTimeout: 10 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	waitWritable(t, s, 3)
	c, err := bookkeeper.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, s
}

// waitWritable waits until n bookies are registered as writable (bookies
// re-register after a restart, and may briefly drop out on a loaded
// machine when their ZooKeeper session lapses).
func waitWritable(t testing.TB, store bookkeeper.MetadataStore, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		bs, err := store.WritableBookies(ctxFor(t, 10*time.Second))
		if err == nil && len(bs) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d writable bookies after 2m (%v)", len(bs), err)
		}
		time.Sleep(200 * time.Millisecond) // polling an external process, with a deadline
	}
}

// payload is the LedgerTool.java rule: "J<ledger>-E<entry>|" then byte(entry).
func payload(ledger, entry int64, size int) []byte {
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(entry)
	}
	copy(p, fmt.Sprintf("J%d-E%d|", ledger, entry))
	return p
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
