package bookkeeper

import (
	"errors"
	"fmt"

	"github.com/nereusstream/nereus-go/bookkeeper/proto"
	"github.com/nereusstream/nereus-go/internal/outcome"
)

// Errors. Match with errors.Is. Each says whether anything was written and
// what the caller should do; Classify maps them onto the closed outcome set.
var (
	// ErrInvalidArgument: rejected before any I/O (bad quorum sizes,
	// negative ledger ID, oversized entry, read range beyond LAC). Nothing
	// was written.
	ErrInvalidArgument = errors.New("bookkeeper: invalid argument")
	// ErrLedgerExists: a create found the ledger ID taken by metadata that
	// is not ours (another cToken). Nothing was written and the existing
	// ledger is untouched. Conflict: pick another ID; never reuse this one.
	ErrLedgerExists = errors.New("bookkeeper: ledger already exists")
	// ErrNoSuchLedger: no metadata for the ledger ID.
	ErrNoSuchLedger = errors.New("bookkeeper: no such ledger")
	// ErrBadVersion: a conditional metadata write or delete lost (the znode
	// is not at the expected version). Nothing was written. Re-read and
	// re-plan.
	ErrBadVersion = errors.New("bookkeeper: ledger metadata version conflict")
	// ErrMetadataUnavailable: the metadata store could not be reached or
	// did not answer. A write that returns it may have been applied; the
	// client settles such writes by re-reading before it returns, so a
	// caller sees it only wrapped in ErrOutcomeUnknown (for writes) or as a
	// plain read failure.
	ErrMetadataUnavailable = errors.New("bookkeeper: metadata store unavailable")
	// ErrOutcomeUnknown: the operation may or may not have taken effect and
	// re-reading could not settle it before the context ended. For a create:
	// the ID may now hold our ledger (burn it, never reuse it). For an add:
	// the entry is applied iff its ID <= the lastEntryId the ledger is
	// eventually closed with (by Close or by a recovery). For a close or
	// delete: re-read the metadata.
	ErrOutcomeUnknown = errors.New("bookkeeper: outcome unknown")
	// ErrFenced: a bookie refused an add because the ledger is fenced:
	// another client is recovering it. This writer has lost the ledger for
	// good. Unacknowledged entries are applied iff their ID <= the
	// lastEntryId the recovery closes the ledger with.
	ErrFenced = errors.New("bookkeeper: ledger fenced by a recovery")
	// ErrLedgerClosed: the writer is closed (or closing); the append was not
	// accepted. Nothing was written.
	ErrLedgerClosed = errors.New("bookkeeper: ledger closed")
	// ErrWriterBroken: an earlier add could not reach its ack quorum in
	// time, so no later add can be acknowledged. The append was not
	// accepted. Close the writer (which settles every pending entry) and
	// continue in a new ledger.
	ErrWriterBroken = errors.New("bookkeeper: writer broken: an add missed its ack quorum")
	// ErrNotEnoughBookies: fewer writable bookies than the ensemble size.
	// Nothing was written.
	ErrNotEnoughBookies = errors.New("bookkeeper: not enough writable bookies")
	// ErrUnauthorized: a bookie refused the master key (EUA), or the
	// password does not match the ledger's metadata.
	ErrUnauthorized = errors.New("bookkeeper: unauthorized (master key or password mismatch)")
	// ErrCorrupt: an entry failed its digest or named the wrong ledger or
	// entry on every replica asked. Corrupt bytes are never returned.
	ErrCorrupt = errors.New("bookkeeper: entry failed its digest")
	// ErrNoEntry: every bookie of the write set said it does not hold the
	// entry.
	ErrNoEntry = errors.New("bookkeeper: no such entry")
	// ErrBookieUnavailable: a bookie could not be reached, timed out or
	// failed the request (EIO, EREADONLY, ETOOMANYREQUESTS, dropped
	// connection). For a read: try again later. Adds handle it internally.
	ErrBookieUnavailable = errors.New("bookkeeper: bookie unavailable")
	// ErrRecoveryIncomplete: a recovery could not reach enough bookies to
	// fence the ledger or to decide its tail. Nothing decisive was done
	// beyond fencing and the IN_RECOVERY mark, both of which are safe to
	// repeat: retry later.
	ErrRecoveryIncomplete = errors.New("bookkeeper: recovery could not complete")
	// ErrUnsupportedLayout: the ledgers root uses a ledger manager this
	// client does not support (only the hierarchical layouts are).
	ErrUnsupportedLayout = errors.New("bookkeeper: unsupported ledger layout")
	// ErrClientClosed: the client is closed. Nothing was written.
	ErrClientClosed = errors.New("bookkeeper: client closed")
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

// Classify maps an error from a writing operation onto the outcome set.
// Unrecognised errors are Unknown.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return Applied
	case errors.Is(err, ErrOutcomeUnknown):
		// Checked first: an AddError wraps both its cause (e.g. ErrFenced)
		// and ErrOutcomeUnknown.
		return Unknown
	case errors.Is(err, ErrLedgerExists), errors.Is(err, ErrBadVersion), errors.Is(err, ErrFenced):
		return Conflict
	case errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrLedgerClosed), errors.Is(err, ErrWriterBroken),
		errors.Is(err, ErrNotEnoughBookies), errors.Is(err, ErrUnauthorized), errors.Is(err, ErrClientClosed),
		errors.Is(err, ErrNoSuchLedger), errors.Is(err, ErrUnsupportedLayout):
		return NotApplied
	}
	return Unknown
}

// AddError is the error of an add that was accepted (given an entry ID) but
// not acknowledged. Its outcome is Unknown until the ledger is closed:
// EntryID is applied iff EntryID <= the closed ledger's lastEntryId.
type AddError struct {
	LedgerID int64
	EntryID  int64
	Err      error
}

func (e *AddError) Error() string {
	return fmt.Sprintf("bookkeeper: add of ledger %d entry %d not acknowledged (applied iff <= the lastEntryId the ledger closes with): %v",
		e.LedgerID, e.EntryID, e.Err)
}

func (e *AddError) Unwrap() []error { return []error{e.Err, ErrOutcomeUnknown} }

// rcError maps a bookie return code to the client's errors.
func rcError(bookie string, rc proto.RC) error {
	switch rc {
	case proto.EOK:
		return nil
	case proto.EFENCED:
		return fmt.Errorf("%w (bookie %s: %s)", ErrFenced, bookie, rc)
	case proto.EUA:
		return fmt.Errorf("%w (bookie %s: %s)", ErrUnauthorized, bookie, rc)
	case proto.ENOENTRY, proto.ENOLEDGER:
		return fmt.Errorf("%w (bookie %s: %s)", ErrNoEntry, bookie, rc)
	}
	return fmt.Errorf("%w (bookie %s: %s)", ErrBookieUnavailable, bookie, rc)
}
