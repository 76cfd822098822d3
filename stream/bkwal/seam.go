package bkwal

import (
	"context"
	"crypto/rand"
	"encoding/binary"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/namespace"
	"github.com/nereusstream/nereus-go/internal/simrt"
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

// Runtime is the clock, timers, goroutines and randomness of the provider:
// the shared seam (package internal/simrt, the shape of wal.Runtime; a
// simulator's runtime serves both).
type Runtime = simrt.Runtime

// rt is the provider's runtime; a supplied one is cooperative (its Block
// is called before every wait; the real runtime's waits stay plain
// selects).
type rt = simrt.RT

// incarnationID draws the provider's incarnation ID: from the runtime's
// randomness under a simulator (so a run replays), crypto/rand otherwise.
func incarnationID(r rt) [8]byte {
	var inc [8]byte
	if r.Coop() {
		binary.LittleEndian.PutUint64(inc[:], r.Uint64())
		return inc
	}
	_, _ = rand.Read(inc[:])
	return inc
}
