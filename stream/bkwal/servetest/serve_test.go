// Package servetest runs the real `nereus serve` with --bookkeeper-zk
// against real bookies: a BOOKKEEPER_WAL_ONLY stream takes appends through
// the admin API while the server is SIGKILLed (with appends in flight) and
// restarted; every acknowledged append must read back at its offset,
// exactly once, in order per writer, and every cycle must make progress
// (internal/testenv/restload).
package servetest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/bookkeeper/bktest"
	"github.com/nereusstream/nereus-go/internal/testenv/restload"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

var env bktest.Env

func TestMain(m *testing.M) { os.Exit(env.Main(m)) }

func TestServeBookKeeperWALOnlySurvivesKill9(t *testing.T) {
	env.Require(t)
	srv := testserver.Start(t, testserver.Options{DisableKafka: true, DisablePulsar: true,
		Args: []string{"--bookkeeper-zk", env.ZK, "--bookkeeper-root", env.Root}})
	c := srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const name = "bk-crash"
	if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: name, Profile: "BOOKKEEPER_WAL_ONLY"}); err != nil {
		t.Fatal(err)
	}
	// REST writers; SIGKILL once each cycle made progress and with an
	// append in flight; every acknowledged entry checked after each
	// restart (exactly once, at its offset, in order per writer).
	load := restload.New(c, name)
	restload.KillCycles(t, srv, load, 3, 30, 5)
	t.Logf("%d acknowledged appends on BOOKKEEPER_WAL_ONLY survived 3 SIGKILL restarts", load.Acks.Count())
}
