// Package outcome is the one closed set of outcomes every conditional write
// in Nereus is classified into — applied, not applied, conflict, unknown —
// shared by the object store, the metadata store and the BookKeeper client
// so a caller reasons about all of them the same way.
//
// It owns only the vocabulary. It must never classify errors itself: each
// store's Classify knows its own sentinels.
package outcome

// Outcome is the closed classification of a mutating call's result.
type Outcome uint8

const (
	// Applied: the write happened.
	Applied Outcome = iota
	// NotApplied: the write definitely did not happen, for a reason other
	// than someone else's state (bad request, closed store, refused before
	// any I/O).
	NotApplied
	// Conflict: the write definitely did not happen because the target is
	// not in the expected state (exists, other version, fenced). Re-read
	// and re-plan.
	Conflict
	// Unknown: the write may or may not have happened. Settle it by
	// re-reading proof, never by guessing.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case NotApplied:
		return "not-applied"
	case Conflict:
		return "conflict"
	default:
		return "unknown"
	}
}
