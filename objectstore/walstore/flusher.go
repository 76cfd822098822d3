package walstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nereusstream/nereus-go/objectstore"
)

// flusher is the group commit: one goroutine fdatasyncs the active file
// as soon as something written is not yet durable, and the flush after it
// covers everything written meanwhile. There is no timer: a lone writer
// waits for one fdatasync, and under load each fdatasync covers every
// record written while the previous one ran.
type flusher struct {
	mu      sync.Mutex
	target  uint64   // highest sequence number written (all below it too)
	file    *logFile // the file holding target
	waiters []waiter // ascending seq
	err     error    // sticky: a write or flush failed
	closed  bool
	kick    chan struct{}

	// durable: every record with a sequence number up to it is durable.
	// Written under mu, read without it (records carry it as "synced").
	durable atomic.Uint64
	flushes atomic.Int64
}

type waiter struct {
	seq  uint64
	done chan error
}

func (fl *flusher) init() { fl.kick = make(chan struct{}, 1) }

// written records that every sequence number up to seq is written to f.
func (fl *flusher) written(seq uint64, f *logFile) {
	fl.mu.Lock()
	fl.target, fl.file = seq, f
	fl.mu.Unlock()
}

// wait returns once seq is durable, or with the error that means it may
// never be. The caller's context ends only the wait, not the write.
func (fl *flusher) wait(ctx context.Context, seq uint64) error {
	fl.mu.Lock()
	switch {
	case fl.err != nil:
		fl.mu.Unlock()
		return fl.err
	case fl.durable.Load() >= seq:
		fl.mu.Unlock()
		return nil
	case fl.closed:
		fl.mu.Unlock()
		return objectstore.ErrClosed
	}
	w := waiter{seq: seq, done: make(chan error, 1)}
	fl.waiters = append(fl.waiters, w)
	fl.mu.Unlock()
	select {
	case fl.kick <- struct{}{}:
	default:
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run flushes until stop is closed.
func (fl *flusher) run(stop <-chan struct{}) {
	for {
		select {
		case <-fl.kick:
		case <-stop:
			return
		}
		for fl.flushOnce() {
		}
	}
}

// flushOnce fdatasyncs the file holding the newest written record if it
// is not durable yet, and reports whether it did.
func (fl *flusher) flushOnce() bool {
	fl.mu.Lock()
	target, f := fl.target, fl.file
	if fl.err != nil || target <= fl.durable.Load() || len(fl.waiters) == 0 {
		fl.mu.Unlock()
		return false
	}
	fl.mu.Unlock()
	err := fdatasync(f.f)
	fl.flushes.Add(1)
	if err != nil {
		fl.fail(fmt.Errorf("walstore: flush %s: %w", f.path, err))
		return false
	}
	crashPoint("flushed")
	fl.markDurable(target)
	return true
}

// markDurable records that every sequence number up to seq is durable and
// answers the waiters it covers.
func (fl *flusher) markDurable(seq uint64) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if seq > fl.durable.Load() {
		fl.durable.Store(seq)
	}
	d := fl.durable.Load()
	i := 0
	for i < len(fl.waiters) && fl.waiters[i].seq <= d {
		fl.waiters[i].done <- nil
		i++
	}
	fl.waiters = append(fl.waiters[:0], fl.waiters[i:]...)
}

// fail makes err sticky (after a failed write or fdatasync the file's
// tail can no longer be trusted: the kernel may have dropped the dirty
// pages) and answers every waiter with it.
func (fl *flusher) fail(err error) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.err == nil {
		fl.err = fmt.Errorf("%w (the store must be reopened)", err)
	}
	for _, w := range fl.waiters {
		w.done <- fl.err
	}
	fl.waiters = nil
}

func (fl *flusher) failure() error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.err
}

// closeWaiters answers the waiters left at Close (none after the final
// flush, unless it failed).
func (fl *flusher) closeWaiters() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.closed = true
	err := fl.err
	if err == nil {
		err = objectstore.ErrClosed
	}
	for _, w := range fl.waiters {
		if w.seq <= fl.durable.Load() {
			w.done <- nil
		} else {
			w.done <- err
		}
	}
	fl.waiters = nil
}
