// Package simrt is the runtime seam shared by the components a
// deterministic simulator runs for real (the Object WAL producer in wal,
// the BookKeeper WAL provider in stream/bkwal): the clock, timers,
// goroutines and randomness they take from the outside world, and the
// helpers that keep their waits replayable.
//
// It owns only that seam. It must never hold state of its own, never
// import a Nereus package, and never change behaviour under the real
// runtime: there the waits are the plain blocking selects they would be
// without a seam (no closure is called, nothing is allocated).
//
// A simulator runs one goroutine at a time and cannot see one block on a
// channel, so before every blocking wait a component tells it what it
// waits for (RT.Wait). Block may also return with ready() false where the
// runtime cannot park (on its event loop): the component's waits then do
// not block either (a sleep ends early; nothing else waits there). And a
// select picks at random among its ready cases, which a simulator cannot
// replay: under a cooperative runtime Only makes every case but one nil,
// so the choice is fixed — and any fixed choice is one the real select
// could make.
package simrt

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	mrand "math/rand/v2"
	"time"
)

// Runtime is the outside world of a simulated component.
type Runtime interface {
	Now() time.Time
	// AfterFunc runs f once d has passed; stop cancels it if it has not
	// run yet.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
	// Go runs f asynchronously (the component's own goroutines).
	Go(f func())
	// Block returns once ready() holds (see the package doc).
	Block(ready func() bool)
	// Uint64 returns 64 random bits (IDs, backoff jitter).
	Uint64() uint64
}

// Real is the default runtime: the wall clock, time.AfterFunc, the go
// statement and math/rand.
func Real() Runtime { return realRuntime{} }

type realRuntime struct{}

func (realRuntime) Now() time.Time { return time.Now() }

func (realRuntime) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

func (realRuntime) Go(f func()) { go f() }

func (realRuntime) Block(func() bool) {}

func (realRuntime) Uint64() uint64 { return mrand.Uint64() }

// RT is a component's runtime with the real one as default; a supplied
// runtime is cooperative: its Block is called before every wait.
type RT struct {
	Runtime
	coop bool
}

// New returns r as an RT, or the real runtime if r is nil.
func New(r Runtime) RT {
	if r == nil {
		return RT{Runtime: realRuntime{}}
	}
	return RT{Runtime: r, coop: true}
}

// Coop reports whether the runtime was supplied (a simulator's).
func (r RT) Coop() bool { return r.coop }

// Wait calls Block under a cooperative runtime and does nothing under the
// real one; ready must be cheap and side-effect free.
func (r RT) Wait(ready func() bool) {
	if r.coop {
		r.Block(ready)
	}
}

// Only returns ch, or nil if the runtime is cooperative and ch is not the
// case it chose (chosen false): a nil channel's case never fires.
func Only[T any](r RT, ch <-chan T, chosen bool) <-chan T {
	if r.coop && !chosen {
		return nil
	}
	return ch
}

// Sleep waits d or until ctx ends (ctx's error).
func (r RT) Sleep(ctx context.Context, d time.Duration) error {
	if !r.coop {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	fired := make(chan struct{})
	stop := r.AfterFunc(d, func() { close(fired) })
	defer stop()
	r.Block(func() bool { return IsClosed(fired) || ctx.Err() != nil })
	// Fired, cancelled, or the runtime could not park here (the sleep
	// then ends early); a cancelled ctx wins.
	return ctx.Err()
}

// WithTimeout is context.WithTimeout on the runtime's clock.
func (r RT) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if !r.coop {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancelCause(parent)
	stop := r.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}

// Entropy is an io.Reader over the runtime's randomness: crypto/rand
// under the real runtime, Uint64 under a cooperative one (so IDs replay).
func (r RT) Entropy() io.Reader {
	if !r.coop {
		return rand.Reader
	}
	return entropyReader{r.Runtime}
}

type entropyReader struct{ r Runtime }

func (e entropyReader) Read(b []byte) (int, error) {
	for i := 0; i < len(b); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], e.r.Uint64())
		copy(b[i:], w[:])
	}
	return len(b), nil
}

// IsClosed reports whether ch is closed (or holds a value), without
// blocking.
func IsClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
