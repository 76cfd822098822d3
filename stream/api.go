package stream

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ID is a stream's stable identity. It never changes and is never reused,
// even after the stream is deleted and its name is taken again.
type ID uint64

func (id ID) String() string { return fmt.Sprintf("%016x", uint64(id)) }

// Profile is a stream's storage profile: which WAL holds its bytes and what
// the producer's acknowledgement waits for. Chosen at creation, never changed.
type Profile uint8

const (
	// ProfileUnspecified selects the default (ObjectWALAsyncObject).
	ProfileUnspecified Profile = iota
	// BookKeeperWALOnly: ack = bookie ack quorum + head CAS. Never
	// materialized: ledgers go when retention trims them.
	BookKeeperWALOnly
	// BookKeeperWALSyncObject: ack also waits for a published object
	// generation covering the append (consumers may read the BookKeeper
	// copy meanwhile: visibility is still the head).
	BookKeeperWALSyncObject
	// BookKeeperWALAsyncObject: ack = BookKeeper durable + head CAS; objects
	// are built in the background.
	BookKeeperWALAsyncObject
	// ObjectWALSyncObject: ack = object WAL durable + head CAS + the offset
	// index entry that makes the range visible on the read path; objects
	// are built in the background.
	ObjectWALSyncObject
	// ObjectWALAsyncObject: ack = object WAL durable + head CAS; objects are
	// built in the background. The default.
	ObjectWALAsyncObject
)

var profileNames = [...]string{
	ProfileUnspecified:       "UNSPECIFIED",
	BookKeeperWALOnly:        "BOOKKEEPER_WAL_ONLY",
	BookKeeperWALSyncObject:  "BOOKKEEPER_WAL_SYNC_OBJECT",
	BookKeeperWALAsyncObject: "BOOKKEEPER_WAL_ASYNC_OBJECT",
	ObjectWALSyncObject:      "OBJECT_WAL_SYNC_OBJECT",
	ObjectWALAsyncObject:     "OBJECT_WAL_ASYNC_OBJECT",
}

// DefaultProfile is used when a stream is created without a profile.
const DefaultProfile = ObjectWALAsyncObject

func (p Profile) String() string {
	if int(p) < len(profileNames) {
		return profileNames[p]
	}
	return fmt.Sprintf("Profile(%d)", uint8(p))
}

// ParseProfile parses a profile name (case-insensitive; '-' and '_' are
// interchangeable). The empty string yields DefaultProfile.
func ParseProfile(s string) (Profile, error) {
	if s == "" {
		return DefaultProfile, nil
	}
	norm := strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
	for p, name := range profileNames {
		if p != int(ProfileUnspecified) && name == norm {
			return Profile(p), nil
		}
	}
	return ProfileUnspecified, fmt.Errorf("%w: unknown storage profile %q (want one of %s)",
		ErrInvalidArgument, s, strings.Join(profileNames[1:], ", "))
}

// UsesBookKeeper reports whether the profile's primary WAL is BookKeeper.
func (p Profile) UsesBookKeeper() bool {
	return p == BookKeeperWALOnly || p == BookKeeperWALSyncObject || p == BookKeeperWALAsyncObject
}

// State is a stream's lifecycle state.
type State uint8

const (
	StateActive State = iota + 1
	StateSealed
	StateDeleting
	StateDeleted
)

func (s State) String() string {
	switch s {
	case StateActive:
		return "ACTIVE"
	case StateSealed:
		return "SEALED"
	case StateDeleting:
		return "DELETING"
	case StateDeleted:
		return "DELETED"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Retention bounds how much history a stream keeps. The core trims (advances
// the start offset past) whole entries that are older than Time or push the
// retained size above Bytes. Zero means unlimited.
type Retention struct {
	Time  time.Duration
	Bytes int64
}

// CreateOptions configures a new stream.
type CreateOptions struct {
	Profile Profile
	// Attributes are immutable key/value labels stored with the stream
	// (e.g. which protocol binding created it).
	Attributes map[string]string
	Retention  Retention
}

// Info describes a stream at one committed head version.
type Info struct {
	ID      ID
	Name    string
	Profile Profile
	State   State
	// Attributes is shared by every Info of the stream (a stream's
	// attributes never change after Create, and Describe runs on every
	// Kafka fetch): read it, never modify it — copy it first.
	Attributes map[string]string
	Retention  Retention
	CreatedAt  time.Time
	// StartOffset is the first readable offset (the trim point).
	StartOffset int64
	// EndOffset is the committed end: the offset the next append receives.
	// Offsets in [StartOffset, EndOffset) are readable.
	EndOffset int64
	// CommittedBytes is the cumulative payload size ever committed.
	CommittedBytes int64
	// RetainedBytes is the payload size of [StartOffset, EndOffset) at the
	// granularity of trimmed runs (a run partly before the start counts
	// whole), i.e. what the stream occupies for its readers.
	RetainedBytes int64
	// MaterializedThrough is the offset below which reads are served by
	// published generations (read-optimized objects); offsets at and above
	// it are read from the WAL.
	MaterializedThrough int64
	// Session is the current append session, if any.
	Session SessionInfo
}

// SessionInfo describes the append session recorded in a stream's head.
type SessionInfo struct {
	// Epoch increases with every new session on the stream; it is the
	// fencing epoch (the Kafka adapter reports it as the leader epoch).
	Epoch    uint64
	WriterID string
	// AuthorityEpoch is the optional external authority's epoch (0: none).
	AuthorityEpoch int64
	Expires        time.Time
}

// SessionOptions configures AcquireSession.
type SessionOptions struct {
	// WriterID names the writer (a broker). Acquiring again with the same
	// WriterID while its session is live renews that session and keeps its
	// epoch, so several front ends in one process share one owner.
	WriterID string
	// TTL is how long the session lives without renewal (default 30s). The
	// core renews sessions it holds in the background until released.
	TTL time.Duration
	// AuthorityEpoch, when > 0, is an external authority's epoch (e.g. a
	// protocol leader epoch). A strictly higher authority epoch takes over a
	// live session held by another writer; a lower one is refused with
	// ErrFenced.
	AuthorityEpoch int64
	// StealExpired allows taking over a session of another writer once it
	// has expired. Without it an expired foreign session still blocks.
	StealExpired bool
}

// Session is a handle on an acquired append session. It is a value; the core
// keeps the authoritative state.
type Session struct {
	Stream ID
	Epoch  uint64
	// Token is a random fencing token; together with Epoch it identifies
	// this acquisition.
	Token    uint64
	WriterID string
}

// Entry is one unit of append: a complete protocol entry (a Kafka
// RecordBatch, a Pulsar entry) whose payload is stored and returned
// byte-for-byte and which covers RecordCount consecutive offsets.
type Entry struct {
	Payload []byte
	// RecordCount is the number of logical offsets the entry covers (>= 1).
	RecordCount uint32
	// Timestamp is the entry's maximum event time in Unix milliseconds; the
	// core's time index answers OffsetForTimestamp from it.
	Timestamp int64
}

// SequenceMode selects how producer sequence numbers are checked.
type SequenceMode uint8

const (
	// SequenceContiguous (Kafka idempotence): a producer's next FirstSeq
	// must be its last LastSeq+1; a repeat of one of its last 5 batches is a
	// duplicate; anything else is out of order. A new epoch starts at 0.
	SequenceContiguous SequenceMode = iota + 1
	// SequenceMonotonic (Pulsar dedup): an append whose LastSeq is not
	// greater than the producer's highest is a duplicate; gaps are allowed.
	SequenceMonotonic
)

// ProducerSequence identifies an append for producer deduplication. Its state
// is committed in the stream head together with the append, so
// deduplication survives crashes and ownership changes.
type ProducerSequence struct {
	Mode SequenceMode
	// Producer is the producer's identity (Kafka producer id, Pulsar
	// producer name).
	Producer string
	// Epoch is the producer epoch (Kafka); a lower epoch than the stored one
	// is fenced (ErrProducerFenced).
	Epoch int64
	// FirstSeq and LastSeq bound the sequence numbers this append carries.
	FirstSeq, LastSeq int64
	// HasAfter (SequenceMonotonic only) makes After the LastSeq of the
	// producer's previous append, and admits this one only while that one
	// is committed or still queued (the producer's highest sequence,
	// committed or queued, is at least After); otherwise it fails, not
	// committed (ErrStorageUnavailable). Gaps are allowed in this mode, so
	// once the previous append failed, committing a later one would turn
	// the failed one's resend into a "duplicate" that was never stored —
	// acknowledged and lost. (Apache Pulsar's broker fences a topic after a
	// failed write until its pending writes drained, for the same reason.)
	HasAfter bool
	After    int64
}

// AppendRequest is one atomic append: its entries receive consecutive
// offsets and commit together or not at all.
type AppendRequest struct {
	Entries []Entry
	// ExpectedStart, when >= 0, makes the append conditional: it commits
	// only if its first offset equals ExpectedStart (else ErrOffsetConflict).
	ExpectedStart int64
	// Sequence, when non-nil, enables producer deduplication.
	Sequence *ProducerSequence
}

// AppendResult reports the committed offset range [Start, End).
type AppendResult struct {
	Start, End int64
	// Duplicate is true when the append repeated an already committed one
	// (by producer sequence); Start/End are the original offsets and
	// nothing new was written.
	Duplicate bool
}

// ReadOptions bounds a read.
type ReadOptions struct {
	// MaxBytes bounds the payload bytes returned; at least one entry is
	// returned if any is available, even if larger (default 1 MiB).
	MaxBytes int
	// MaxEntries bounds the number of entries (default 1000).
	MaxEntries int
	// Wait, when > 0 and nothing is available at the requested offset,
	// waits up to this long for a commit (long poll).
	Wait time.Duration
	// Recycle lets the read put payloads in recycled buffers (generation
	// spans today) and the result's Entries in a recycled slice: the
	// caller then calls ReadResult.Release once it no longer uses any
	// entry or payload, and never touches them after. Without it (or if
	// Release is never called) entries and payloads are the caller's to
	// keep.
	Recycle bool
}

// ReadEntry is one committed entry as returned by Read.
type ReadEntry struct {
	// Offset is the entry's first offset; it covers
	// [Offset, Offset+RecordCount).
	Offset      int64
	RecordCount uint32
	Timestamp   int64
	Payload     []byte
}

// ReadResult is what Read found.
type ReadResult struct {
	Entries []ReadEntry
	// Next is the offset to read from next.
	Next int64
	// StartOffset and EndOffset are the stream's bounds when the read ran.
	StartOffset, EndOffset int64

	recycled *readBuffers // with ReadOptions.Recycle: the buffers the payloads alias
}

// Release hands the buffers and the Entries slice of a ReadOptions.Recycle
// read back for reuse; no entry or payload of the result may be used
// after it. Only the first call (on
// any copy of the result) does anything; a result that holds no recycled
// buffer (no Recycle, a Storage that does not recycle) ignores it.
func (r ReadResult) Release() { r.recycled.release() }

// Storage is the stream core's contract with the storage boundaries above it
// (the Kafka storage layer, the ManagedLedger facade, the admin API). It
// speaks only stream IDs and offsets.
//
// Error contract for Append: every error means the entries were NOT
// committed, except an error matching ErrCommitUnknown, which means the
// outcome could not be settled before ctx ended; a later Read settles it.
type Storage interface {
	// Create makes a new stream. If the name is taken it returns the existing
	// stream's Info together with ErrStreamExists.
	Create(ctx context.Context, name string, opts CreateOptions) (Info, error)
	// Lookup finds a live stream by name.
	Lookup(ctx context.Context, name string) (Info, error)
	// Describe returns a stream's current committed head.
	Describe(ctx context.Context, id ID) (Info, error)
	// List returns up to limit live streams whose names start with prefix
	// and sort after `after`, in name order.
	List(ctx context.Context, prefix, after string, limit int) ([]Info, error)

	// AcquireSession makes the caller the stream's writer (see
	// SessionOptions for takeover rules). The core keeps the session alive
	// until ReleaseSession or until it is fenced.
	AcquireSession(ctx context.Context, id ID, opts SessionOptions) (Session, error)
	// ReleaseSession ends the session; in-flight appends finish first.
	ReleaseSession(ctx context.Context, s Session) error

	// Append appends under the session and waits for the profile's ack
	// boundary.
	Append(ctx context.Context, s Session, req AppendRequest) (AppendResult, error)
	// AppendAsync enqueues the append and returns at once. Appends enqueued
	// on one stream commit in call order.
	//
	// Ownership: Append and AppendAsync take ownership of the entry payloads;
	// the caller must never modify them afterwards (the core may keep them
	// in its tail cache and hand them to readers).
	AppendAsync(s Session, req AppendRequest) *AppendFuture

	// Read returns committed entries starting with the entry that contains
	// offset from. Returned payloads may be shared with other readers and
	// caches: never modify them (copy before patching headers). from == EndOffset returns nothing (after waiting up to
	// opts.Wait); from outside [StartOffset, EndOffset] is
	// ErrOffsetOutOfRange.
	Read(ctx context.Context, id ID, from int64, opts ReadOptions) (ReadResult, error)
	// Notify returns the committed end offset and a channel closed at the
	// stream's next head change (commit, trim, seal, delete).
	Notify(ctx context.Context, id ID) (end int64, changed <-chan struct{}, err error)
	// OffsetForTimestamp returns the first offset of the first entry whose
	// Timestamp >= ts, or EndOffset when there is none.
	OffsetForTimestamp(ctx context.Context, id ID, ts int64) (int64, error)

	// Trim advances the start offset to `to` (never backwards; clamped to
	// EndOffset). Physical reclamation happens later and separately.
	Trim(ctx context.Context, id ID, to int64) error
	// SetRetention changes the stream's retention.
	SetRetention(ctx context.Context, id ID, r Retention) error
	// Seal stops all further appends; reads continue.
	Seal(ctx context.Context, id ID) error
	// Delete removes the stream logically; its name becomes free.
	Delete(ctx context.Context, id ID) error
}

// AppendFuture resolves to the outcome of an AppendAsync.
type AppendFuture struct {
	done   chan struct{}
	result AppendResult
	err    error
}

// NewAppendFuture returns an unresolved future (for Storage implementations).
func NewAppendFuture() *AppendFuture { return &AppendFuture{done: make(chan struct{})} }

// Resolve settles the future. It must be called exactly once.
func (f *AppendFuture) Resolve(r AppendResult, err error) {
	f.result, f.err = r, err
	close(f.done)
}

// Done is closed once the future is resolved.
func (f *AppendFuture) Done() <-chan struct{} { return f.done }

// Wait blocks until the append resolves or ctx ends. If ctx ends first the
// append continues in the background and the returned error matches both
// ctx.Err() and ErrCommitUnknown.
func (f *AppendFuture) Wait(ctx context.Context) (AppendResult, error) {
	select {
	case <-f.done:
		return f.result, f.err
	case <-ctx.Done():
		return AppendResult{}, fmt.Errorf("%w: %w", ErrCommitUnknown, ctx.Err())
	}
}
