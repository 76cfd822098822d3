package stream

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// dueRuntime is the real runtime on a hand-moved clock whose timers fire
// only when the test moves the clock past their due time (fireDue).
type dueRuntime struct {
	realRuntime
	mu     sync.Mutex
	at     time.Time
	timers []*dueTimer
}

type dueTimer struct {
	due     time.Time
	f       func()
	stopped bool
}

func (r *dueRuntime) now() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at
}

func (r *dueRuntime) afterFunc(d time.Duration, f func()) func() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &dueTimer{due: r.at.Add(d), f: f}
	r.timers = append(r.timers, t)
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		was := !t.stopped && slices.Contains(r.timers, t)
		t.stopped = true
		return was
	}
}

func (r *dueRuntime) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx) // the hand-moved clock never ends a pass
}

// advance moves the clock by d and runs, in due order, every timer due by
// then (timers those arm included).
func (r *dueRuntime) advance(d time.Duration) {
	r.mu.Lock()
	r.at = r.at.Add(d)
	r.mu.Unlock()
	for {
		r.mu.Lock()
		i := -1
		for j, t := range r.timers {
			if !t.due.After(r.at) && (i < 0 || t.due.Before(r.timers[i].due)) {
				i = j
			}
		}
		if i < 0 {
			r.mu.Unlock()
			return
		}
		t := r.timers[i]
		r.timers = slices.Delete(r.timers, i, i+1)
		r.mu.Unlock()
		if !t.stopped {
			t.f()
		}
	}
}

// retentionPassesIn counts the retention passes that start while the
// clock moves on by total in steps of step (each pass is waited for).
func retentionPassesIn(t *testing.T, c *Core, rt *dueRuntime, total, step time.Duration) int {
	t.Helper()
	n := 0
	last := c.shortRetention.lastStart.Load()
	for moved := time.Duration(0); moved < total; moved += step {
		rt.advance(step)
		for i := 0; c.retentionRunning.Load(); i++ {
			if i == 5000 {
				t.Fatal("a retention pass did not end")
			}
			time.Sleep(time.Millisecond)
		}
		if s := c.shortRetention.lastStart.Load(); s != last {
			n++
			last = s
		}
	}
	return n
}

// TestShortRetentionRunsMorePasses: with the default 1 s interval, an
// owned stream whose time retention is 5 s gets a retention pass every
// 250 ms (a twentieth of it, at most four per interval), so a source
// leaves within 250 ms of its expiry instead of within a second; a
// retention of an hour keeps the one pass per interval.
func TestShortRetentionRunsMorePasses(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention time.Duration
		want      int // passes in 2 s, once the first pass has seen the stream
	}{
		{"5s", 5 * time.Second, 8},
		{"1h", time.Hour, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rt := &dueRuntime{realRuntime: realRuntime{clock: time.Now}, at: time.Unix(1_700_000_000, 0)}
			objs := objmem.New()
			ow, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/b1"})
			if err != nil {
				t.Fatal(err)
			}
			c, err := Open(ctx, Config{Metadata: memstore.New(), ObjectWAL: ow, ObjectStore: objs, WriterID: "b1",
				RetentionInterval: time.Second, SessionTTL: time.Hour, runtime: rt,
				Lifecycle: LifecycleConfig{Interval: time.Hour, GCDisabled: true, DisableMaterialization: true}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Create(ctx, "s", CreateOptions{Retention: Retention{Time: tc.retention}}); err != nil {
				t.Fatal(err)
			}
			// The first pass (the tick's, at 1 s) learns the retention.
			if n := retentionPassesIn(t, c, rt, time.Second, 50*time.Millisecond); n != 1 {
				t.Fatalf("%d retention passes in the first second, want 1", n)
			}
			if n := retentionPassesIn(t, c, rt, 2*time.Second, 50*time.Millisecond); n != tc.want {
				t.Fatalf("retention %v: %d retention passes in 2 s, want %d", tc.retention, n, tc.want)
			}
		})
	}
}
