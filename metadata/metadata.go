// Package metadata defines the coordination store Nereus commits through: a
// key space of small records, each with its own version, shaped after Oxia
// (per-key version, expected-version put, ephemeral records tied to a
// session, change notifications, many independent operations in one round
// trip) so that it maps onto bbolt, etcd and Oxia alike.
//
// It owns the contract of conditional writes and their closed outcomes. It
// must never promise atomicity across keys: every operation in a Batch
// succeeds or fails on its own, and callers that need an invariant across two
// keys must build it from single-key CAS steps plus recovery. An
// implementation that happens to be atomic across keys must not be relied on.
//
// Versions: every stored record has a Version > 0 that changes on every
// write to that key and is never reused for that key. Versions of different
// keys are not comparable in general (on bbolt and etcd they come from one
// monotonic counter; on Oxia per shard).
//
// Keys are byte-ordered strings. Range scans are half-open [min, max) in
// plain byte order, so callers zero-pad numbers they want ordered.
package metadata

import (
	"context"
	"errors"
	"time"

	"github.com/nereusstream/nereus-go/internal/outcome"
)

// Version is a record's per-key version.
type Version int64

// Expectation sentinels for Put and Delete.
const (
	// AnyVersion writes unconditionally.
	AnyVersion Version = 0
	// NotExists expects the key to be absent (create-only).
	NotExists Version = -1
)

// Errors. Classify maps them to outcomes; match with errors.Is.
var (
	// ErrKeyNotFound: Get of an absent key, or Delete/Put expecting a version
	// of a key that does not exist (then wrapped together with
	// ErrUnexpectedVersion so either check matches).
	ErrKeyNotFound = errors.New("metadata: key not found")
	// ErrUnexpectedVersion: a conditional Put or Delete lost: the key is not
	// at the expected version (or exists when NotExists was expected).
	// Nothing was written. Re-read and re-plan.
	ErrUnexpectedVersion = errors.New("metadata: unexpected version")
	// ErrInvalidArgument: rejected before any I/O (empty key, value too
	// large, bad range). Nothing was written.
	ErrInvalidArgument = errors.New("metadata: invalid argument")
	// ErrSessionExpired: the session an ephemeral write named is gone.
	// Nothing was written.
	ErrSessionExpired = errors.New("metadata: session expired")
	// ErrClosed: the store is closed. Nothing was written.
	ErrClosed = errors.New("metadata: store closed")
	// ErrUnavailable marks an error whose outcome is unknown because the
	// store could not be reached or did not answer (timeout, connection
	// loss, response lost). A write that returns it may have been applied.
	ErrUnavailable = errors.New("metadata: store unavailable, outcome unknown")
)

// Outcome is the closed classification of a mutating call's result (the
// shared vocabulary of internal/outcome; Classify below says which of this
// package's errors lands where).
type Outcome = outcome.Outcome

// The outcomes; see internal/outcome for their meaning.
const (
	Applied    = outcome.Applied
	NotApplied = outcome.NotApplied
	Conflict   = outcome.Conflict
	Unknown    = outcome.Unknown
)

// Classify maps an operation error onto the closed outcome set. Errors the
// store did not recognise (including context cancellation after the request
// may have been sent) classify as Unknown.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return Applied
	case errors.Is(err, ErrUnexpectedVersion):
		return Conflict
	case errors.Is(err, ErrKeyNotFound), errors.Is(err, ErrInvalidArgument),
		errors.Is(err, ErrSessionExpired), errors.Is(err, ErrClosed):
		return NotApplied
	default:
		return Unknown
	}
}

// Record is one stored key with its value and version.
type Record struct {
	Key     string
	Value   []byte
	Version Version
	// Session is non-zero for an ephemeral record: the session it dies with.
	Session SessionID
}

// SessionID names a liveness session. Zero means none.
type SessionID int64

// OpKind selects what an Op does.
type OpKind uint8

const (
	OpGet OpKind = iota + 1
	OpPut
	OpDelete
)

// Op is one operation of a Batch.
type Op struct {
	Kind OpKind
	Key  string
	// Value is the new value for OpPut.
	Value []byte
	// Expected is the precondition for OpPut and OpDelete: AnyVersion,
	// NotExists, or an exact Version.
	Expected Version
	// Session, for OpPut, makes the record ephemeral: it is deleted when the
	// session ends.
	Session SessionID
}

// Result is one Op's outcome. For OpGet, Record is filled and Err is
// ErrKeyNotFound for an absent key. For OpPut, Version is the new version.
type Result struct {
	Record  Record
	Version Version
	Err     error
}

// EventKind says what happened to a key.
type EventKind uint8

const (
	EventPut EventKind = iota + 1
	EventDelete
)

// Event is one change notification. Version is the new version (0 for a
// delete).
type Event struct {
	Kind    EventKind
	Key     string
	Version Version
}

// Store is the metadata store contract. All methods are safe for concurrent
// use. Returned slices belong to the caller; values passed in are not
// retained.
type Store interface {
	// Get returns the record at key, or ErrKeyNotFound.
	Get(ctx context.Context, key string) (Record, error)
	// Put writes value at key if the key is at expected (AnyVersion,
	// NotExists, or an exact version) and returns the new version.
	Put(ctx context.Context, key string, value []byte, expected Version) (Version, error)
	// PutEphemeral is Put bound to a session: the record is deleted when the
	// session ends (closed or expired).
	PutEphemeral(ctx context.Context, key string, value []byte, expected Version, session SessionID) (Version, error)
	// Delete removes key if it is at expected (AnyVersion or exact).
	// Deleting an absent key returns ErrKeyNotFound.
	Delete(ctx context.Context, key string, expected Version) error
	// RangeScan returns up to limit records with min <= key < max in key
	// order (limit <= 0: no limit).
	RangeScan(ctx context.Context, min, max string, limit int) ([]Record, error)
	// Batch runs independent operations in one round trip where the store
	// allows. Results are in op order; each op succeeds or fails on its own.
	// Ops on the same key take effect in op order (a Get sees an earlier
	// Put of the batch); ops on different keys may take effect in any
	// order and are never atomic together.
	// A non-nil error means the round trip itself failed: then every
	// mutating op's outcome is Unknown and the results are nil.
	Batch(ctx context.Context, ops []Op) ([]Result, error)
	// NewSession starts a liveness session that the store keeps alive in
	// the background until Close; if keep-alives fail for longer than ttl
	// the session expires, its ephemeral records are deleted, and Done is
	// closed. ttl <= 0 is ErrInvalidArgument.
	NewSession(ctx context.Context, ttl time.Duration) (Session, error)
	// Watch delivers change notifications for keys with the given prefix,
	// in commit order, from the time Watch returns until ctx ends. A slow
	// consumer may miss events only by receiving an Event with an empty Key
	// ("resync": re-read everything you care about). The channel is closed
	// when ctx ends or the store closes.
	Watch(ctx context.Context, prefix string) (<-chan Event, error)
	// Close releases resources. Sessions opened through the store end.
	// Later calls of any method return ErrClosed, except Close, which
	// returns the first Close's result.
	Close() error
}

// Session is a liveness session for ephemeral records.
type Session interface {
	ID() SessionID
	// Done is closed when the session has expired or been closed.
	Done() <-chan struct{}
	// Close ends the session and deletes its ephemeral records.
	Close(ctx context.Context) error
}
