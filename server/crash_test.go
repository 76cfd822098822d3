package server_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testenv/restload"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

// TestCrashKill9LosesNoAcknowledgedAppend: `nereus serve` is SIGKILLed
// while REST appends are in flight and restarted, many times; every
// acknowledged entry must read back at the offset it was given, nothing
// reads back twice, each writer's entries read back in order, and each
// cycle must make progress (see internal/testenv/restload and acklog).
//
// It needs a durable storage backend (the default): a server reporting
// "durable": false in /healthz is an environment it cannot test
// (testenv.SkipOrFail).
//
// NEREUS_CRASH_CYCLES overrides the number of kill/restart cycles
// (default 12; 3 with -short).
func TestCrashKill9LosesNoAcknowledgedAppend(t *testing.T) {
	cycles := 12
	if testing.Short() {
		cycles = 3
	}
	if v := os.Getenv("NEREUS_CRASH_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("NEREUS_CRASH_CYCLES=%q: want a positive integer", v)
		}
		cycles = n
	}
	srv := testserver.Start(t, testserver.Options{})
	if h := srv.Health(); !h.Durable {
		testenv.SkipOrFail(t, "storage backend %q is not durable (/healthz durable=false): SIGKILL cycles need the durable stream core", h.Backend)
	}
	c := srv.Client()
	const name = "crash"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: name})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	restload.KillCycles(t, srv, restload.New(c, name), cycles, 50, 1)
}
