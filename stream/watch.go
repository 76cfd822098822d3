package stream

import (
	"context"
	"sync"

	"github.com/nereusstream/nereus-go/metadata"
)

// headWatch turns metadata change notifications on heads into per-stream
// "something changed" channels, for streams this process does not own (an
// owner closes its own channel on every commit). One metadata Watch serves
// every stream; it starts on first use.
type headWatch struct {
	c       *Core
	mu      sync.Mutex
	chans   map[ID]chan struct{}
	started bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the started loop ends
}

func newHeadWatch(c *Core) *headWatch { return &headWatch{c: c, chans: map[ID]chan struct{}{}} }

func (w *headWatch) channel(ctx context.Context, id ID) (<-chan struct{}, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		wctx, cancel := context.WithCancel(w.c.ctx)
		events, err := w.c.meta.Watch(wctx, headKeyPrefix)
		if err != nil {
			cancel()
			return nil, err
		}
		done := make(chan struct{})
		w.started, w.cancel, w.done = true, cancel, done
		w.c.rt.goFunc(func() {
			defer close(done)
			w.loop(events)
		})
	}
	ch := w.chans[id]
	if ch == nil {
		ch = make(chan struct{})
		w.chans[id] = ch
	}
	return ch, nil
}

func (w *headWatch) loop(events <-chan metadata.Event) {
	for ev := range events {
		if ev.Key == "" {
			w.fireAll()
			continue
		}
		if id, ok := parseHeadKey(ev.Key); ok {
			w.local(id)
		}
	}
	// The watch ended (store closed or core stopping): wake everyone and
	// let the next caller start a new one.
	w.mu.Lock()
	w.started = false
	w.mu.Unlock()
	w.fireAll()
}

// local fires the channel of one stream (also used after this process's own
// head changes).
func (w *headWatch) local(id ID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch := w.chans[id]; ch != nil {
		close(ch)
		delete(w.chans, id)
	}
}

func (w *headWatch) fireAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, ch := range w.chans {
		close(ch)
		delete(w.chans, id)
	}
}

// wait waits (until ctx ends) for the loop started last to end — the
// store closes a watch's channel once its context ends (stop) — so Close
// leaves no goroutine of it behind.
func (w *headWatch) wait(ctx context.Context) {
	w.mu.Lock()
	done := w.done
	w.mu.Unlock()
	if done != nil {
		_ = w.c.rt.await(ctx, done)
	}
}

func (w *headWatch) stop() {
	w.mu.Lock()
	cancel := w.cancel
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
