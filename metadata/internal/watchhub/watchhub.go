// Package watchhub fans committed change events out to prefix watchers for
// the in-process metadata stores (memstore, boltstore, and etcdstore's
// bridge from etcd watches).
//
// It owns per-watcher buffering and the overflow rule of the metadata
// contract: a watcher that falls behind by more than its buffer loses events
// only by receiving one Event with an empty Key ("resync") in their place. It
// must never block a publisher (publishers are commit paths) and never
// reorder events: callers must call Publish in commit order, one call at a
// time or serialised by their own lock.
package watchhub

import (
	"context"
	"strings"
	"sync"

	"github.com/nereusstream/nereus-go/metadata"
)

// DefaultBuffer is the per-watcher event buffer used when a store's option
// leaves it zero.
const DefaultBuffer = 1024

type watcher struct {
	prefix string
	ch     chan metadata.Event
	// lost is true from the moment events were dropped until the forwarder
	// has taken the resync marker off ch. While it is true, further events
	// for this watcher are dropped: the pending resync already covers them.
	lost bool
}

// Hub is a set of watchers. The zero value is not usable; call New.
type Hub struct {
	mu       sync.Mutex
	watchers map[*watcher]struct{}
	buffer   int
	closed   bool
}

// New returns a hub whose watchers buffer up to buffer events (<= 0:
// DefaultBuffer).
func New(buffer int) *Hub {
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	return &Hub{watchers: map[*watcher]struct{}{}, buffer: buffer}
}

// Watch registers a watcher for keys starting with prefix. Events published
// after Watch returns are delivered. The channel closes when ctx ends or the
// hub closes. A closed hub returns metadata.ErrClosed.
func (h *Hub) Watch(ctx context.Context, prefix string) (<-chan metadata.Event, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, metadata.ErrClosed
	}
	w := &watcher{prefix: prefix, ch: make(chan metadata.Event, h.buffer)}
	h.watchers[w] = struct{}{}
	out := make(chan metadata.Event)
	go h.forward(ctx, w, out)
	return out, nil
}

// forward moves events from the watcher's buffer to the consumer. It exists
// so the consumer-facing channel can close on ctx without the publisher ever
// touching a channel that might be closed.
func (h *Hub) forward(ctx context.Context, w *watcher, out chan<- metadata.Event) {
	defer close(out)
	defer func() {
		h.mu.Lock()
		delete(h.watchers, w)
		h.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ch:
			if !ok {
				return
			}
			if ev.Key == "" {
				// Events dropped so far happened before this point; the
				// consumer re-reads after receiving the marker, so it sees
				// them. From here on, deliver again.
				h.mu.Lock()
				w.lost = false
				h.mu.Unlock()
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}
}

// Publish delivers events, in order, to every matching watcher without
// blocking.
func (h *Hub) Publish(events ...metadata.Event) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		for _, ev := range events {
			if w.lost {
				break
			}
			if !strings.HasPrefix(ev.Key, w.prefix) {
				continue
			}
			select {
			case w.ch <- ev:
			default:
				// Behind by a full buffer: replace the oldest buffered event
				// with nothing and append the resync marker, so the consumer
				// still sees everything older in order and then re-reads.
				w.lost = true
				select {
				case <-w.ch:
				default:
				}
				w.ch <- metadata.Event{}
			}
		}
	}
}

// Close closes every watcher channel; later Watch calls fail with
// metadata.ErrClosed.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for w := range h.watchers {
		close(w.ch)
		delete(h.watchers, w)
	}
}
