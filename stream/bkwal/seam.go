package bkwal

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	mrand "math/rand/v2"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/namespace"
)

// The provider's two seams to the outside world, so a deterministic
// simulator (stream's sim_bookkeeper_test.go) can run the real provider:
//
//   - Ledgers: what it needs of BookKeeper — ledger-ID allocation and the
//     guarded create/delete of the namespace, recovery-open, non-recovery
//     open and metadata reads of the client, and of the writers and readers
//     they return. The default (Config.Ledgers nil) is Config.Client and
//     Config.Namespace, unchanged.
//   - Runtime: the clock, timers, goroutines and randomness (the same shape
//     as wal.Runtime). The default is the wall clock, time.AfterFunc, the go
//     statement and crypto/rand; behaviour unchanged.

// Ledgers is the BookKeeper side of the provider.
type Ledgers interface {
	// Reservation is the namespace reservation IDs are allocated from.
	Reservation() namespace.Reservation
	// Allocate, CreateLedger, DeleteLedger: namespace.Namespace's.
	Allocate(ctx context.Context) (int64, error)
	CreateLedger(ctx context.Context, o bookkeeper.CreateOptions) (LedgerWriter, error)
	DeleteLedger(ctx context.Context, id int64, expected bookkeeper.Version) error
	// OpenLedger, RecoverLedger, ReadLedgerMetadata: bookkeeper.Client's.
	OpenLedger(ctx context.Context, id int64, o bookkeeper.OpenOptions) (LedgerReader, error)
	RecoverLedger(ctx context.Context, id int64, o bookkeeper.OpenOptions) (LedgerReader, error)
	ReadLedgerMetadata(ctx context.Context, id int64) (bookkeeper.LedgerInfo, error)
}

// LedgerWriter is what the provider uses of a *bookkeeper.Writer (same
// outcomes).
type LedgerWriter interface {
	MaxEntrySize() int
	AppendAsync(ctx context.Context, payload []byte) (AddFuture, error)
	Close(ctx context.Context) (bookkeeper.CloseResult, error)
}

// AddFuture is what the provider uses of a *bookkeeper.AddFuture.
type AddFuture interface {
	EntryID() int64
	Done() <-chan struct{}
	// Err is valid once Done is closed.
	Err() error
}

// LedgerReader is what the provider uses of a *bookkeeper.Reader.
type LedgerReader interface {
	LastAddConfirmed() int64
	Info() bookkeeper.LedgerInfo
	Read(ctx context.Context, first, last int64) ([]bookkeeper.Entry, error)
	ReadUnconfirmed(ctx context.Context, first, last int64) ([]bookkeeper.Entry, error)
}

// realLedgers is Ledgers on the real client and namespace.
type realLedgers struct {
	c  *bookkeeper.Client
	ns *namespace.Namespace
}

func (r realLedgers) Reservation() namespace.Reservation { return r.ns.Reservation() }

func (r realLedgers) Allocate(ctx context.Context) (int64, error) { return r.ns.Allocate(ctx) }

func (r realLedgers) CreateLedger(ctx context.Context, o bookkeeper.CreateOptions) (LedgerWriter, error) {
	w, err := r.ns.CreateLedger(ctx, o)
	if err != nil {
		return nil, err
	}
	return realWriter{w}, nil
}

func (r realLedgers) DeleteLedger(ctx context.Context, id int64, expected bookkeeper.Version) error {
	return r.ns.DeleteLedger(ctx, id, expected)
}

func (r realLedgers) OpenLedger(ctx context.Context, id int64, o bookkeeper.OpenOptions) (LedgerReader, error) {
	rd, err := r.c.OpenLedger(ctx, id, o)
	if err != nil {
		return nil, err
	}
	return rd, nil
}

func (r realLedgers) RecoverLedger(ctx context.Context, id int64, o bookkeeper.OpenOptions) (LedgerReader, error) {
	rd, err := r.c.RecoverLedger(ctx, id, o)
	if err != nil {
		return nil, err
	}
	return rd, nil
}

func (r realLedgers) ReadLedgerMetadata(ctx context.Context, id int64) (bookkeeper.LedgerInfo, error) {
	return r.c.ReadLedgerMetadata(ctx, id)
}

type realWriter struct{ *bookkeeper.Writer }

func (w realWriter) AppendAsync(ctx context.Context, payload []byte) (AddFuture, error) {
	f, err := w.Writer.AppendAsync(ctx, payload)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Runtime is the clock, timers, goroutines and randomness of the provider
// (the shape of wal.Runtime; a simulator's runtime serves both).
//
// A simulator runs one goroutine at a time and cannot see one block on a
// channel, so before every blocking wait the provider tells it what it
// waits for (Block), and where a real select could pick among several
// ready cases the provider picks a fixed one.
type Runtime interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
	Go(f func())
	Block(ready func() bool)
	Uint64() uint64
}

type realRuntime struct{}

func (realRuntime) Now() time.Time { return time.Now() }
func (realRuntime) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
func (realRuntime) Go(f func())       { go f() }
func (realRuntime) Block(func() bool) {}
func (realRuntime) Uint64() uint64    { return mrand.Uint64() }

// rt is the provider's runtime; coop is set for a supplied one (whose
// Block the waits call; the real runtime's waits stay plain selects).
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

func (r rt) block(ready func() bool) {
	if r.coop {
		r.Block(ready)
	}
}

// withTimeout is context.WithTimeout on the runtime's clock.
func (r rt) withTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if !r.coop {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancelCause(parent)
	stop := r.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() { stop(); cancel(context.Canceled) }
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
	return ctx.Err()
}

// incarnationID draws the provider's incarnation ID.
func (r rt) incarnationID() [8]byte {
	var inc [8]byte
	if r.coop {
		binary.LittleEndian.PutUint64(inc[:], r.Uint64())
		return inc
	}
	_, _ = rand.Read(inc[:])
	return inc
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
