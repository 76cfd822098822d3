package objectwal

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/provider"
	"github.com/nereusstream/nereus-go/wal"
)

// TestDurableWritesCompleteInOneGroup: writes that are durable by the time
// the waiter gets to them are resolved inside ONE completion group (the
// core's hooks around them), in append order, so the core commits them in
// one round; every done callback runs inside a group, and groups are
// balanced. The first callback waits until every write is durable, so the
// test does not depend on how fast the waiter wakes.
func TestDurableWritesCompleteInOneGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A long interval: all writes land in one segment and one manifest
	// commit.
	p, err := Open(ctx, Config{Store: osmem.New(), Prefix: "wal/g", FlushMode: FlushOnInterval, FlushInterval: 50 * time.Millisecond, TruncateInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)

	const n = 12
	var mu sync.Mutex
	var durs []*wal.Durability
	testHookAppended = func(d *wal.Durability) {
		mu.Lock()
		durs = append(durs, d)
		mu.Unlock()
	}
	defer func() { testHookAppended = nil }()

	var depth, groups atomic.Int32
	var order []uint64
	inGroup := make([]int32, 0, n)
	p.SetCompletionHooks(func() {
		depth.Add(1)
		groups.Add(1)
	}, func() {
		depth.Add(-1)
	})
	done := make(chan struct{})
	for i := range n {
		run := provider.Run{Stream: uint64(i + 1), Epoch: 1, Token: 1, Commit: 1, Start: 0, Entries: []provider.Entry{{RecordCount: 1, Payload: []byte{byte(i)}}}}
		p.Write(run, func(_ provider.Target, err error) {
			// Callbacks run on the waiter, one at a time.
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
			if len(order) == 0 {
				mu.Lock()
				all := append([]*wal.Durability(nil), durs...)
				mu.Unlock()
				for _, d := range all {
					select {
					case <-d.Done():
					case <-ctx.Done():
						t.Error("writes never became durable")
						return
					}
				}
			}
			order = append(order, run.Stream)
			inGroup = append(inGroup, depth.Load())
			if len(order) == n {
				close(done)
			}
		})
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("not every write completed")
	}
	for i, s := range order {
		if s != uint64(i+1) {
			t.Fatalf("completion order %v, want append order", order)
		}
		if inGroup[i] != 1 {
			t.Fatalf("callback %d ran at group depth %d, want 1", i, inGroup[i])
		}
	}
	if g := groups.Load(); g != 1 {
		t.Fatalf("%d writes durable together completed in %d groups, want 1", n, g)
	}
}
