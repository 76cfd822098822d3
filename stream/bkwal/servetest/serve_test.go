// Package servetest runs the real `nereus serve` with --bookkeeper-zk
// against real bookies: a BOOKKEEPER_WAL_ONLY stream takes appends through
// the admin API while the server is SIGKILLed and restarted, and every
// acknowledged append must read back at its offset, exactly once.
package servetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/bookkeeper/bktest"
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
	var mu sync.Mutex
	acked := map[int64]string{}
	for cycle := 0; cycle < 3; cycle++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					p := fmt.Sprintf("c%d.w%d.%d", cycle, w, i)
					actx, acancel := context.WithTimeout(ctx, 10*time.Second)
					resp, err := c.Append(actx, name, adminapi.AppendRequest{Entries: []adminapi.AppendEntry{{Text: &p}}})
					acancel()
					if err != nil {
						var ae *adminapi.Error
						if !errors.As(err, &ae) {
							time.Sleep(20 * time.Millisecond) // server down: retry until stopped
						}
						continue
					}
					mu.Lock()
					acked[resp.Start] = p
					mu.Unlock()
				}
			}(w)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			mu.Lock()
			n := len(acked)
			mu.Unlock()
			if n >= (cycle+1)*30 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		srv.Kill()
		close(stop)
		wg.Wait()
		srv.Restart()
	}
	seen := map[string]int64{}
	from := int64(0)
	for {
		rr, err := c.Read(ctx, name, adminapi.ReadOptions{From: &from, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range rr.Entries {
			if prev, dup := seen[string(e.Payload)]; dup {
				t.Fatalf("%s committed twice (%d, %d)", e.Payload, prev, e.Offset)
			}
			seen[string(e.Payload)] = e.Offset
		}
		if len(rr.Entries) == 0 || rr.Next >= rr.EndOffset {
			break
		}
		from = rr.Next
	}
	mu.Lock()
	defer mu.Unlock()
	for off, p := range acked {
		if got, ok := seen[p]; !ok || got != off {
			t.Fatalf("acknowledged %s@%d reads back at %d (present %v)", p, off, got, ok)
		}
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}
	t.Logf("%d acknowledged appends on BOOKKEEPER_WAL_ONLY survived 3 SIGKILL restarts", len(acked))
}
