package stream

import "errors"

// Errors returned by Storage. Every Append error means "not committed"
// except ErrCommitUnknown. Match with errors.Is.
var (
	// ErrInvalidArgument: the request is malformed (empty entries, zero
	// RecordCount, bad name). Nothing was written.
	ErrInvalidArgument = errors.New("nereus/stream: invalid argument")
	// ErrStreamNotFound: no live stream has that name or ID.
	ErrStreamNotFound = errors.New("nereus/stream: stream not found")
	// ErrStreamExists: Create found the name taken.
	ErrStreamExists = errors.New("nereus/stream: stream already exists")
	// ErrStreamSealed: the stream accepts no more appends.
	ErrStreamSealed = errors.New("nereus/stream: stream is sealed")
	// ErrUnsupportedProfile: the profile's provider is not configured in
	// this process (e.g. a BookKeeper profile without --bookkeeper-zk).
	ErrUnsupportedProfile = errors.New("nereus/stream: storage profile not available")
	// ErrFenced: the session was superseded by a newer one (higher epoch or
	// authority epoch). The append was not committed. Build a new session
	// only after re-establishing ownership.
	ErrFenced = errors.New("nereus/stream: append session fenced")
	// ErrSessionBusy: another writer holds a live session.
	ErrSessionBusy = errors.New("nereus/stream: stream has a live session of another writer")
	// ErrOffsetConflict: AppendRequest.ExpectedStart did not match. Not
	// committed.
	ErrOffsetConflict = errors.New("nereus/stream: expected start offset does not match")
	// ErrOffsetOutOfRange: the read offset is outside [StartOffset, EndOffset].
	ErrOffsetOutOfRange = errors.New("nereus/stream: offset out of range")
	// ErrOutOfOrderSequence: a producer sequence skipped ahead. Not committed.
	ErrOutOfOrderSequence = errors.New("nereus/stream: out of order producer sequence")
	// ErrProducerFenced: a producer epoch older than the stored one. Not
	// committed.
	ErrProducerFenced = errors.New("nereus/stream: producer epoch fenced")
	// ErrUnknownProducer: a contiguous-mode producer the stream has no state
	// for sent a non-zero first sequence. Not committed.
	ErrUnknownProducer = errors.New("nereus/stream: unknown producer")
	// ErrCorrupt: stored bytes failed their checksum. They are never served.
	ErrCorrupt = errors.New("nereus/stream: stored data failed its checksum")
	// ErrCommitUnknown: the append may or may not have been committed; the
	// core could not settle it before the caller's context ended. Read the
	// stream (or retry with producer sequences) to find out.
	ErrCommitUnknown = errors.New("nereus/stream: commit outcome unknown")
	// ErrStorageUnavailable: the WAL could not make the append durable (a
	// full disk, an unreachable object store or bookie quorum, the WAL
	// re-claiming its log after such a fault). Not committed. Retriable:
	// the WAL recovers by itself once the cause clears (Core.Health says
	// degraded meanwhile), so protocol front ends answer with their
	// retriable storage error.
	ErrStorageUnavailable = errors.New("nereus/stream: storage temporarily unavailable")
	// ErrClosed: the storage is shutting down. Not committed.
	ErrClosed = errors.New("nereus/stream: storage closed")
)

// Certainty says whether an append's entries are committed.
type Certainty uint8

const (
	NotCommitted Certainty = iota
	Committed
	MaybeCommitted
)

// CommitCertainty classifies an Append error.
func CommitCertainty(err error) Certainty {
	switch {
	case err == nil:
		return Committed
	case errors.Is(err, ErrCommitUnknown):
		return MaybeCommitted
	default:
		return NotCommitted
	}
}
