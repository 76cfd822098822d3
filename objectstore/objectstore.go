// Package objectstore is the small blob interface everything physical in
// Nereus sits on: segments, manifests, generations. It owns the contract of
// conditional writes (create-if-absent and compare-and-swap on an opaque
// version) and the classification of their outcomes.
//
// It must never interpret the bytes it stores, and never hide an uncertain
// write: a conditional write either returns nil (applied), a typed sentinel
// that proves it did not apply, or an error whose outcome is unknown, which
// the caller resolves by re-reading (see Classify).
//
// Versions are opaque. On S3 they are ETags, which are content-derived: two
// PUTs of identical bytes yield the same version. Any object used as a CAS
// head must therefore carry its own monotonically increasing epoch or counter
// inside its bytes, or an ABA interleaving can slip through a CAS.
package objectstore

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/nereusstream/nereus-go/internal/outcome"
)

// Sentinel errors. Backends wrap them (errors.Is works); callers classify
// with errors.Is or Classify, never by message text.
var (
	// ErrNotFound: the key (or, for Get/Head/Delete, the object) does not
	// exist. Callers that want idempotent deletes can ignore it.
	ErrNotFound = errors.New("objectstore: object not found")
	// ErrAlreadyExists: a PutCreate lost because the key exists. Nothing was
	// written. Re-read to learn what is there.
	ErrAlreadyExists = errors.New("objectstore: object already exists")
	// ErrPreconditionFailed: a PutUpdate or conditional Delete lost because
	// the object's version changed since it was read. Nothing was written:
	// reload and re-plan.
	ErrPreconditionFailed = errors.New("objectstore: precondition failed (object changed)")
	// ErrConflict: the backend refused the write because a concurrent
	// conflicting operation was in progress (S3 409). Nothing was written, and
	// unlike ErrPreconditionFailed it says nothing about the current version:
	// retry with backoff after re-reading.
	ErrConflict = errors.New("objectstore: concurrent conflicting write, retry")
	// ErrInvalidArgument: the request was rejected before any I/O (bad key,
	// missing version for PutUpdate, negative range). Nothing was written.
	ErrInvalidArgument = errors.New("objectstore: invalid argument")
	// ErrClosed: the store was closed; nothing was written.
	ErrClosed = errors.New("objectstore: store closed")
	// ErrCorrupt: stored bytes (or a backend's own metadata about them)
	// failed their integrity check. Returned by reads instead of the bad
	// bytes; distinct from ErrNotFound so corruption never reads as absence.
	// Retrying re-reads the same bad bytes: stop and alert rather than spin.
	// A mutation that returns it (it could not read the current state to
	// check its precondition) did not apply.
	ErrCorrupt = errors.New("objectstore: stored object failed its integrity check (corrupt)")
)

// UpdateVersion is the opaque version of one stored object, used as the CAS
// precondition of PutUpdate and conditional Delete. Compare only with Equal;
// never parse it.
type UpdateVersion struct {
	// ETag is the backend's version token (an S3 ETag without quotes, a
	// filesystem generation, an in-memory counter).
	ETag string
}

// Equal reports whether two versions name the same stored object state.
func (v UpdateVersion) Equal(o UpdateVersion) bool { return v.ETag == o.ETag }

// IsZero reports whether v carries no version.
func (v UpdateVersion) IsZero() bool { return v.ETag == "" }

// ObjectInfo describes one stored object without its bytes.
type ObjectInfo struct {
	Key     string
	Size    int64
	Version UpdateVersion
	ModTime time.Time
}

// PutMode selects the precondition of a Put.
type PutMode uint8

const (
	// PutOverwrite writes unconditionally.
	PutOverwrite PutMode = iota
	// PutCreate writes only if the key does not exist (S3 If-None-Match: *).
	// Losing returns ErrAlreadyExists.
	PutCreate
	// PutUpdate writes only if the object exists at PutOptions.Version (S3
	// If-Match). Losing returns ErrPreconditionFailed (also when the object
	// has disappeared).
	PutUpdate
)

// PutOptions carries the precondition of a Put.
type PutOptions struct {
	Mode PutMode
	// Version is required for PutUpdate and ignored otherwise.
	Version UpdateVersion
	// DeferSync lets a store that makes each write durable with work of its
	// own (the filesystem store: a directory fsync per Put) return before
	// this write is known durable. It is durable at the latest once a later
	// Put without DeferSync, begun after this one returned, on the same
	// store, returns nil (a failed or not-applied later Put says nothing).
	// It is for an object that becomes reachable only through such a later
	// Put — a WAL segment, named only by the manifest commit that follows
	// it — so that the durable work is shared and ordered before the
	// reference is published. A nil error still means applied. Stores whose
	// writes are durable on return (S3, memory) ignore it.
	DeferSync bool
}

// ObjectStore is a flat key space of immutable-per-version blobs.
//
// Keys are slash-separated UTF-8 strings without a leading slash. Data passed
// to Put is not retained after Put returns; slices returned by Get and
// GetRange belong to the caller. All methods are safe for concurrent use.
//
// Outcome contract: a nil error means applied. ErrAlreadyExists,
// ErrPreconditionFailed, ErrConflict, ErrInvalidArgument, ErrNotFound,
// ErrCorrupt and ErrClosed mean definitely not applied. Any other error from a mutating call
// means the outcome is unknown: the write may have landed. Callers resolve
// unknown outcomes by re-reading (Get/Head), never by assuming.
type ObjectStore interface {
	// Get returns the whole object and its version.
	Get(ctx context.Context, key string) ([]byte, UpdateVersion, error)
	// GetRange returns length bytes starting at offset. length < 0 reads to
	// the end. A range past the end returns the bytes that exist (possibly
	// none); it is not an error.
	GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error)
	// Head returns the object's size and version without its bytes.
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// Put writes data under key with the given precondition and returns the
	// new version.
	Put(ctx context.Context, key string, data []byte, opts PutOptions) (UpdateVersion, error)
	// Delete removes key. With ifVersion non-nil the delete applies only if
	// the object is still at that version (ErrPreconditionFailed otherwise);
	// backends that cannot condition a delete return ErrInvalidArgument for
	// a conditional delete rather than silently deleting.
	Delete(ctx context.Context, key string, ifVersion *UpdateVersion) error
	// List yields every object whose key starts with prefix, in ascending
	// key order. An error about one object only (fsstore: its stored
	// header fails its checksum, or its file cannot be opened) is yielded
	// with that object's key in ObjectInfo.Key (nothing else set), and the
	// iteration goes on if the consumer keeps ranging: one unreadable
	// object must not hide every later one from a consumer that can skip
	// it. Any other error (ObjectInfo.Key empty) ends the iteration.
	List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error]
}

// RangeReader is an optional ObjectStore extension: a ranged read into a
// buffer the caller owns, so a reader that recycles its buffers (a
// catch-up read moves gigabytes through a few of them) allocates, zeroes
// and page-faults nothing per read. Use it through ReadRange, which falls
// back to GetRange for stores without it.
type RangeReader interface {
	// ReadRange reads the len(dst) bytes at offset of key into dst and
	// returns how many it read: fewer (possibly none) only when the object
	// ends first, as GetRange's range past the end. Errors are GetRange's.
	// dst belongs to the caller again once ReadRange returns.
	ReadRange(ctx context.Context, key string, offset int64, dst []byte, opts ReadRangeOptions) (int, error)
}

// PieceReader is an optional RangeReader extension for a reader that
// checks a long range as it arrives: one open of the object for the whole
// range, read in order in pieces, with the caller told after each piece
// how much of dst is filled. A caller that verifies each piece while the
// store reads the next (fsstore: the kernel's read-ahead keeps the device
// busy behind a sequential read of one open file) overlaps its checking
// with the device instead of waiting for the whole range and then
// checking it with the device idle; and it checks bytes that were just
// copied, while they are still in the CPU's cache. Use it through
// ReadRangePieces, which falls back to one ReadRange.
type PieceReader interface {
	// ReadRangePieces reads the len(dst) bytes at offset of key into dst,
	// in order, each read at most piece bytes, and after each one calls
	// filled with how many bytes of dst (a prefix) are read so far. An
	// error from filled stops the read and that error is returned; a store
	// may already be reading the piece after the one filled was given
	// (fsstore reads one piece ahead), but never more than that one, and
	// no piece past the failed one is ever handed to filled. Otherwise it
	// returns how many bytes it read, and errors, as ReadRange does (fewer only when the object ends first;
	// filled is then called with that count). dst belongs to the caller
	// again once ReadRangePieces returns.
	ReadRangePieces(ctx context.Context, key string, offset int64, dst []byte, piece int, opts ReadRangeOptions, filled func(n int) error) (int, error)
}

// ReadRangePieces is s.ReadRangePieces when s implements PieceReader, else
// one ReadRange followed by one call of filled (when it read anything).
func ReadRangePieces(ctx context.Context, s ObjectStore, key string, offset int64, dst []byte, piece int, opts ReadRangeOptions, filled func(n int) error) (int, error) {
	if p, ok := s.(PieceReader); ok {
		return p.ReadRangePieces(ctx, key, offset, dst, piece, opts, filled)
	}
	n, err := ReadRange(ctx, s, key, offset, dst, opts)
	if err != nil {
		return n, err
	}
	if n > 0 {
		if err := filled(n); err != nil {
			return n, err
		}
	}
	return n, nil
}

// ReadRangeOptions modify a ReadRange.
type ReadRangeOptions struct {
	// CallerVerifies says the caller checks every byte it reads against
	// checksums of its own before it uses or serves any of them (a
	// generation object's entry and block CRCs cover every byte of a span):
	// the store may then skip its own per-byte check of the data (fsstore's
	// block CRCs), so the bytes are checked once, not twice. The store
	// still checks its own metadata (fsstore's header: which object, how
	// long). Without it, ReadRange verifies exactly as GetRange does.
	CallerVerifies bool
}

// CacheProber is an optional ObjectStore extension of a store that serves
// reads from memory when it can (fsstore: the kernel's page cache) and can
// tell, without reading, whether a range is there. A reader uses it to pay
// for work that only helps when a read waits for a device (read-ahead)
// only when it does.
type CacheProber interface {
	// Cached reports whether every byte of [offset, offset+length) of key's
	// data is in memory now, so that a read of it would not wait for a
	// device. It neither reads the data nor starts I/O for it. It is a
	// hint: false when the store cannot tell, and the answer may be stale
	// by the time the caller acts on it. Errors are GetRange's.
	Cached(ctx context.Context, key string, offset, length int64) (bool, error)
}

// Cached is s.Cached when s implements CacheProber, else false (cannot
// tell).
func Cached(ctx context.Context, s ObjectStore, key string, offset, length int64) (bool, error) {
	if p, ok := s.(CacheProber); ok {
		return p.Cached(ctx, key, offset, length)
	}
	return false, nil
}

// ReadRange is s.ReadRange when s implements RangeReader, else GetRange
// copied into dst (same result, one more copy).
func ReadRange(ctx context.Context, s ObjectStore, key string, offset int64, dst []byte, opts ReadRangeOptions) (int, error) {
	if r, ok := s.(RangeReader); ok {
		return r.ReadRange(ctx, key, offset, dst, opts)
	}
	if len(dst) == 0 {
		_, err := s.GetRange(ctx, key, offset, 0)
		return 0, err
	}
	b, err := s.GetRange(ctx, key, offset, int64(len(dst)))
	if err != nil {
		return 0, err
	}
	return copy(dst, b), nil
}

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

// Classify maps a mutating call's error onto the closed outcome set.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return Applied
	case errors.Is(err, ErrAlreadyExists), errors.Is(err, ErrPreconditionFailed):
		return Conflict
	case errors.Is(err, ErrConflict), errors.Is(err, ErrInvalidArgument),
		errors.Is(err, ErrNotFound), errors.Is(err, ErrClosed),
		errors.Is(err, ErrCorrupt):
		return NotApplied
	default:
		return Unknown
	}
}
