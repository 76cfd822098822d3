package objectwal

import (
	"context"
	"testing"
	"time"

	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/provider"
	"github.com/nereusstream/nereus-go/wal"
)

// TestTruncationWaitsForEarlierAppends: a write appended to the producer
// before another one, but handed to the waiter after it (two streams'
// owners call Write concurrently), must not have its segment truncated and
// deleted as garbage meanwhile. Before Write appended and queued under one
// lock, the later write could be processed first; the truncator then saw
// the earlier write's segment below the processed sequence with no
// outstanding run, deleted it, and the run was committed afterwards — an
// offset index naming a run in a deleted segment (the
// TestGCNeverDeletesNeededBytes failure of session 9).
func TestTruncationWaitsForEarlierAppends(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := osmem.New()
	// The truncator's ticker is kept out of the way: the test truncates
	// itself, at the one moment that matters.
	p, err := Open(ctx, Config{Store: store, Prefix: "wal/w1", FlushInterval: time.Millisecond, TruncateInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)

	type result struct {
		t   provider.Target
		err error
	}
	doneA, doneB := make(chan result, 1), make(chan result, 1)
	runB := provider.Run{Stream: 2, Epoch: 1, Token: 2, Commit: 1, Start: 0, Entries: []provider.Entry{{RecordCount: 1, Payload: []byte("b")}}}
	slipped := false
	first := true
	testHookAppended = func(d *wal.Durability) {
		if !first {
			return
		}
		first = false
		// A's segment is committed to the manifest before B is written,
		// so B lands in a later segment.
		<-d.Done()
		go p.Write(runB, func(t provider.Target, err error) { doneB <- result{t, err} })
		// Before the fix B overtakes A here (well within a second); with
		// it B waits for A to be queued, and this wait runs out.
		select {
		case r := <-doneB:
			slipped = true
			doneB <- r
		case <-time.After(time.Second):
		}
		p.mu.Lock()
		limit, any := p.resolvedThrough, p.resolvedAny
		p.mu.Unlock()
		if any {
			if err := p.truncate(ctx, limit); err != nil {
				t.Errorf("truncate: %v", err)
			}
		}
	}
	defer func() { testHookAppended = nil }()

	runA := provider.Run{Stream: 1, Epoch: 1, Token: 1, Commit: 1, Start: 0, Entries: []provider.Entry{{RecordCount: 1, Payload: []byte("a")}}}
	go p.Write(runA, func(t provider.Target, err error) { doneA <- result{t, err} })
	for name, ch := range map[string]chan result{"A": doneA, "B": doneB} {
		r := <-ch
		if r.err != nil {
			t.Fatalf("write %s: %v", name, r.err)
		}
		// The core commits the run now: its bytes must still be there.
		if _, err := p.Read(ctx, r.t, 0, 0, 1<<20); err != nil {
			t.Errorf("write %s (B overtook A: %v): its committed run's segment is gone: %v", name, slipped, err)
		}
		p.Release(r.t, true)
	}
}
