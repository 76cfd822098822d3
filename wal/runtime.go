package wal

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	mrand "math/rand/v2"
	"time"
)

// Runtime is what the producer takes from the outside world besides the
// object store: the clock, timers, goroutines and randomness. The default
// (ProducerConfig.Runtime nil) is the wall clock, time.AfterFunc, the go
// statement and crypto/rand — behaviour unchanged. A deterministic
// simulator supplies its own: then every goroutine, sleep and clock read
// of the producer goes through it, so a run replays from a seed.
//
// A simulator runs one goroutine at a time and cannot see one block on a
// channel, so before every blocking wait the producer tells it what it
// waits for (Block). Block may also return with ready() false where the
// runtime cannot park (on its event loop): the producer's waits then do
// not block either (a sleep ends early; nothing else waits there).
type Runtime interface {
	Now() time.Time
	// AfterFunc runs f once d has passed; stop cancels it if it has not
	// run yet.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
	// Go runs f asynchronously (the producer's pipeline goroutines).
	Go(f func())
	// Block returns once ready() holds (see the type's doc).
	Block(ready func() bool)
	// Uint64 returns 64 random bits (run IDs, backoff jitter).
	Uint64() uint64
}

// rt is the producer's runtime with the real one as default; coop is set
// for a supplied runtime, whose Block the waits call (the real runtime's
// waits are plain blocking selects: no closure, no allocation).
type rt struct {
	Runtime
	coop bool
}

func newRT(r Runtime) rt {
	if r == nil {
		return rt{Runtime: realRuntime{}}
	}
	return rt{Runtime: r, coop: true}
}

// block calls Block for a supplied runtime; ready must be cheap and
// side-effect free.
func (r rt) block(ready func() bool) {
	if r.coop {
		r.Block(ready)
	}
}

// A select picks at random among its ready cases, which a simulator cannot
// replay; under a cooperative runtime the waits make every case but one
// nil (a nil channel's case never fires) so the choice is fixed. Any fixed
// choice is one the real select could make.

// only returns ch, or nil if the runtime is cooperative and ch is not the
// case it chose (chosen false).
func only[T any](r rt, ch <-chan T, chosen bool) <-chan T {
	if r.coop && !chosen {
		return nil
	}
	return ch
}

// sleep waits d or until ctx ends (ctx's error).
func (r rt) sleep(ctx context.Context, d time.Duration) error {
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
	r.Block(func() bool { return isClosed(fired) || ctx.Err() != nil })
	// Fired, cancelled, or the runtime could not park here (the sleep
	// then ends early); a cancelled ctx wins.
	return ctx.Err()
}

// entropy is an io.Reader over the runtime's randomness (ULID run IDs).
func (r rt) entropy() io.Reader {
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

type realRuntime struct{}

func (realRuntime) Now() time.Time { return time.Now() }

func (realRuntime) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

func (realRuntime) Go(f func()) { go f() }

func (realRuntime) Block(func() bool) {}

func (realRuntime) Uint64() uint64 { return mrand.Uint64() }

// RealRuntime returns the default runtime (for packages that wrap the
// producer and need the same clock and goroutines).
func RealRuntime() Runtime { return realRuntime{} }
