package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

// ackLog records every acknowledged append: offset -> payload.
type ackLog struct {
	mu     sync.Mutex
	byOff  map[int64]string
	maxEnd int64
}

func (a *ackLog) add(offsets []int64, payloads []string, end int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, off := range offsets {
		if prev, ok := a.byOff[off]; ok {
			return fmt.Errorf("offset %d acknowledged twice: %q and %q", off, prev, payloads[i])
		}
		a.byOff[off] = payloads[i]
	}
	a.maxEnd = max(a.maxEnd, end)
	return nil
}

func (a *ackLog) size() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byOff)
}

// load runs writers that append small batches until ctx ends, recording
// acknowledged appends. Failed appends (the server was killed under them)
// are simply not recorded: their outcome is unknown and they are not
// retried, so every payload is appended at most once.
func load(ctx context.Context, c *adminapi.Client, stream string, cycle, writers int, acks *ackLog, fatal chan<- error) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cycle), uint64(w)))
			for seq := 0; ctx.Err() == nil; seq++ {
				n := 1 + rng.IntN(5)
				payloads := make([]string, n)
				entries := make([]adminapi.AppendEntry, n)
				for i := range n {
					payloads[i] = fmt.Sprintf("c%d-w%d-s%d-i%d", cycle, w, seq, i)
					entries[i] = adminapi.AppendEntry{Text: &payloads[i]}
				}
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				resp, err := c.Append(rctx, stream, adminapi.AppendRequest{Entries: entries})
				cancel()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					// The server is going down or restarting: back off.
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if len(resp.Offsets) != n || resp.End-resp.Start != int64(n) {
					fatal <- fmt.Errorf("append of %d entries returned %+v", n, resp)
					return
				}
				if err := acks.add(resp.Offsets, payloads, resp.End); err != nil {
					fatal <- err
					return
				}
			}
		}()
	}
	return &wg
}

// verify reads the whole stream and checks every acknowledged append is at
// its offset, no payload appears twice, and the end never moved back.
func verify(t *testing.T, c *adminapi.Client, stream string, acks *ackLog) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got := map[int64]string{}
	seen := map[string]int64{}
	var from int64
	var end int64
	for {
		rr, err := c.Read(ctx, stream, adminapi.ReadOptions{From: &from, Limit: 5000})
		if err != nil {
			t.Fatalf("read from %d: %v", from, err)
		}
		end = rr.EndOffset
		for _, e := range rr.Entries {
			p := string(e.Payload)
			if prev, dup := seen[p]; dup {
				t.Fatalf("payload %q committed twice, at offsets %d and %d", p, prev, e.Offset)
			}
			seen[p] = e.Offset
			got[e.Offset] = p
		}
		if len(rr.Entries) == 0 || rr.Next >= rr.EndOffset {
			break
		}
		from = rr.Next
	}
	acks.mu.Lock()
	defer acks.mu.Unlock()
	if end < acks.maxEnd {
		t.Fatalf("stream end offset %d is below the highest acknowledged end %d: offsets moved back", end, acks.maxEnd)
	}
	lost := 0
	for off, want := range acks.byOff {
		if g, ok := got[off]; !ok || g != want {
			if lost < 10 {
				t.Errorf("acknowledged append %q at offset %d reads back as %q (present=%v)", want, off, g, ok)
			}
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged appends lost or moved", lost, len(acks.byOff))
	}
}

// TestCrashKill9LosesNoAcknowledgedAppend: `nereus serve` is SIGKILLed
// during a steady append load and restarted, many times; every
// acknowledged append must read back at the offset it was given.
//
// It needs a durable storage backend. While the server reports
// "durable": false in /healthz it runs the load and the live verification
// once (exercising the harness) and then skips.
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
	health := srv.Health()
	c := srv.Client()
	const name = "crash"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: name})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	acks := &ackLog{byOff: map[int64]string{}}
	fatal := make(chan error, 16)
	rng := rand.New(rand.NewPCG(1, 2))

	for cycle := range cycles {
		before := acks.size()
		lctx, stopLoad := context.WithCancel(context.Background())
		wg := load(lctx, c, name, cycle, 4, acks, fatal)
		// Let the load run until enough appends were acknowledged and a
		// random extra moment passed, so the kill lands mid-flight.
		deadline := time.Now().Add(60 * time.Second)
		for acks.size() < before+50 && time.Now().Before(deadline) {
			select {
			case err := <-fatal:
				stopLoad()
				t.Fatal(err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		if acks.size() < before+50 {
			stopLoad()
			t.Fatalf("cycle %d: only %d appends acknowledged in 60s", cycle, acks.size()-before)
		}
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)

		if !health.Durable {
			stopLoad()
			wg.Wait()
			verify(t, c, name, acks)
			t.Skipf("storage backend %q is not durable (/healthz durable=false): the load and live verification passed "+
				"(%d acknowledged appends); the SIGKILL/restart cycles need the durable stream core", health.Backend, acks.size())
		}

		srv.Kill()
		stopLoad()
		wg.Wait()
		select {
		case err := <-fatal:
			t.Fatal(err)
		default:
		}
		srv.Restart()
		verify(t, c, name, acks)
		t.Logf("cycle %d: %d acknowledged appends verified after SIGKILL+restart", cycle, acks.size())
	}
}
