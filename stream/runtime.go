package stream

import (
	"context"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// runtime is everything the driver takes from the outside world besides
// the stores: the clock, timers, where asynchronous work runs, and how the
// metadata calls of the commit pipeline are issued. The real runtime uses
// goroutines and the wall clock (Config.Now); the simulator
// (simulation_test.go) supplies one that runs every callback from one
// seeded event queue on a simulated clock, which is what makes a run
// replayable from its seed. Nothing in the core reads the clock, starts a
// goroutine or sleeps except through it.
type runtime interface {
	now() time.Time
	// afterFunc runs f once d has passed; stop cancels it if it has not
	// run yet.
	afterFunc(d time.Duration, f func()) (stop func() bool)
	// goFunc runs f asynchronously.
	goFunc(f func())
	// sleep waits d or until ctx ends (blocking paths only: retry loops of
	// Create, AcquireSession, mutations, intent settlement).
	sleep(ctx context.Context, d time.Duration) error
	// batch runs a commit round's metadata Batch and reports it to done.
	// It reports whether done already ran (the real runtime calls the store
	// on the calling goroutine, the committer's); the simulator delivers
	// the request and the response later, as separate events.
	batch(ctx context.Context, meta metadata.Store, ops []metadata.Op, done func([]metadata.Result, error)) (completed bool)
	// scan runs a RangeScan asynchronously and reports it to done (index
	// probes; never on the committer's goroutine).
	scan(ctx context.Context, meta metadata.Store, min, max string, limit int, done func([]metadata.Record, error))
	// random returns 64 random bits (stream IDs, session tokens,
	// incarnations, generation object keys).
	random() uint64
	// await blocks until ch is closed (nil) or ctx ends (its error): the
	// one place a background task waits for the commit pipeline (a head
	// mutation of an owned stream). The simulator parks the waiting task
	// and runs other events until ch closes.
	await(ctx context.Context, ch <-chan struct{}) error
	// withTimeout is context.WithTimeout on the runtime's clock (a
	// simulated pass's deadline passes in simulated time).
	withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc)
	// block returns once ready() holds, before a wait the runtime cannot
	// see (a sync.WaitGroup in Close): the simulator parks the caller and
	// polls ready after every event; the real runtime returns at once and
	// the caller's own wait blocks.
	block(ready func() bool)
}

type realRuntime struct{ clock func() time.Time }

func (r realRuntime) now() time.Time { return r.clock() }

func (realRuntime) afterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

func (realRuntime) goFunc(f func()) { go f() }

func (realRuntime) sleep(ctx context.Context, d time.Duration) error { return sleepCtx(ctx, d) }

func (realRuntime) batch(ctx context.Context, meta metadata.Store, ops []metadata.Op, done func([]metadata.Result, error)) bool {
	// A bounded round: a store that stops answering (etcd down: its client
	// waits for a connection) must show up as failing rounds — unknown
	// outcomes settled by re-reading, and a degraded Core.Health — not as
	// one round that hangs until the store returns.
	ctx, cancel := context.WithTimeout(ctx, metadataRoundTimeout)
	defer cancel()
	done(meta.Batch(ctx, ops))
	return true
}

// metadataRoundTimeout bounds one commit round's metadata Batch.
const metadataRoundTimeout = 10 * time.Second

func (realRuntime) scan(ctx context.Context, meta metadata.Store, min, max string, limit int, done func([]metadata.Record, error)) {
	go func() { done(meta.RangeScan(ctx, min, max, limit)) }()
}

func (realRuntime) random() uint64 { return randomUint64() }

func (realRuntime) await(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (realRuntime) block(func() bool) {}

func (realRuntime) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
