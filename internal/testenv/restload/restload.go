// Package restload drives a crash test's write load through the admin REST
// API of a real `nereus serve`: writers append to one stream, every
// acknowledged entry is recorded in an acklog, and KillCycles SIGKILLs the
// server while appends are in flight, restarts it and verifies the whole
// stream after each cycle. It owns the load and the cycle; the verdict is
// acklog's, the process is testserver's.
//
// Tests only.
package restload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testenv/acklog"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

// Load runs REST append writers against one stream and records every
// acknowledged entry (offset, payload) in an acklog. An append that fails
// (the server died under it) is not retried: its payload is never sent
// again, so it may be committed at most once and the acklog's
// exactly-once check holds for acknowledged and unacknowledged writes
// alike. Nor is it ordered: the server settles a failed append detached
// from the client (server/api.go), so one the client gave up on may still
// commit after the writer's later appends. A writer therefore takes a new
// key (generation) after every failed append; the acklog's per-key order
// check then covers exactly the appends each issued only once the one
// before it was acknowledged.
type Load struct {
	c      *adminapi.Client
	stream string
	Acks   *acklog.Log // every acknowledged entry
	// Pad, if set, is added to every payload (to fill a disk faster).
	Pad    string
	maxEnd atomic.Int64 // highest acknowledged end offset
	cycles int          // KillCycles run so far: their payloads never repeat

	mu    sync.Mutex
	fatal error
}

// New returns a load on stream through c.
func New(c *adminapi.Client, stream string) *Load {
	return &Load{c: c, stream: stream, Acks: acklog.New()}
}

// Retarget points the load at another server on the same data (a test
// that restarts a data dir under a new testserver.Server).
func (l *Load) Retarget(c *adminapi.Client) { l.c = c }

func (l *Load) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fatal == nil {
		l.fatal = err
	}
}

// Err is the first fatal error a writer hit (a broken acknowledgement), or
// nil.
func (l *Load) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal
}

// Run starts writers for one cycle; they stop when ctx ends (the returned
// WaitGroup then drains).
func (l *Load) Run(ctx context.Context, cycle, writers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen := 0
			key := fmt.Sprintf("c%d-w%d", cycle, w) + l.Pad
			rng := rand.New(rand.NewPCG(uint64(cycle), uint64(w)))
			for seq := 0; ctx.Err() == nil; seq++ {
				n := 1 + rng.IntN(5)
				payloads := make([]string, n)
				entries := make([]adminapi.AppendEntry, n)
				for i := range n {
					payloads[i] = acklog.Payload(key, seq*8+i)
					entries[i] = adminapi.AppendEntry{Text: &payloads[i]}
				}
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				l.Acks.Begin()
				resp, err := l.c.Append(rctx, l.stream, adminapi.AppendRequest{Entries: entries})
				l.Acks.End()
				cancel()
				if err != nil {
					// Unknown outcome: order from here on is a new key's.
					gen++
					key = fmt.Sprintf("c%d-w%d.g%d", cycle, w, gen) + l.Pad
					// The server is going down or restarting: back off
					// (bounded by ctx, which the cycle ends). A server
					// that keeps refusing fails the cycle's progress
					// requirement.
					select {
					case <-ctx.Done():
					case <-time.After(5 * time.Millisecond):
					}
					continue
				}
				if len(resp.Offsets) != n || resp.End-resp.Start != int64(n) {
					l.fail(fmt.Errorf("append of %d entries returned %+v", n, resp))
					return
				}
				for i, off := range resp.Offsets {
					if err := l.Acks.Ack(l.stream, acklog.Pos{Offset: off}, payloads[i]); err != nil {
						l.fail(err)
						return
					}
				}
				for end := l.maxEnd.Load(); resp.End > end && !l.maxEnd.CompareAndSwap(end, resp.End); end = l.maxEnd.Load() {
				}
			}
		}()
	}
	return &wg
}

// Verify reads the whole stream back and checks it against the acklog,
// and that the end offset never moved below an acknowledged end.
func (l *Load) Verify(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var read []acklog.Entry
	var from, end int64
	for {
		rr, err := l.c.Read(ctx, l.stream, adminapi.ReadOptions{From: &from, Limit: 5000})
		if err != nil {
			t.Fatalf("read from %d: %v", from, err)
		}
		end = rr.EndOffset
		for _, e := range rr.Entries {
			read = append(read, acklog.Entry{Pos: acklog.Pos{Offset: e.Offset}, Payload: string(e.Payload)})
		}
		if len(rr.Entries) == 0 || rr.Next >= rr.EndOffset {
			break
		}
		from = rr.Next
	}
	if end < l.maxEnd.Load() {
		t.Fatalf("stream end offset %d is below the highest acknowledged end %d: offsets moved back", end, l.maxEnd.Load())
	}
	if err := l.Acks.Verify(l.stream, read); err != nil {
		t.Fatal(err)
	}
}

// KillCycles runs cycles of: append load until at least minProgress more
// appends are acknowledged (a random extra amount, so kills land at varied
// points) with one in flight, SIGKILL while it is, restart, verify.
func KillCycles(t *testing.T, srv *testserver.Server, load *Load, cycles, minProgress int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	for cycle := range cycles {
		before := load.Acks.Count()
		lctx, stopLoad := context.WithCancel(context.Background())
		wg := load.Run(lctx, load.cycles, 4)
		load.cycles++
		wctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		err := load.Acks.WaitKillPoint(wctx, before, minProgress+rng.IntN(minProgress), load.Err)
		cancel()
		if err != nil {
			stopLoad()
			wg.Wait()
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		srv.Kill()
		stopLoad()
		wg.Wait()
		if err := load.Err(); err != nil {
			t.Fatal(err)
		}
		srv.Restart()
		load.Verify(t)
		t.Logf("cycle %d: %d acknowledged entries verified after SIGKILL mid-append + restart", cycle, load.Acks.Count())
	}
}
