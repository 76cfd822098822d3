// Package kvcheck holds the precondition rules of the metadata contract that
// every in-process store evaluates the same way: op validation and the
// expected-version check. Keeping them in one place is what makes memstore,
// boltstore and etcdstore agree on which error (and so which Outcome) a
// failed precondition produces.
//
// It owns no state and does no I/O. It must never decide anything that
// depends on a particular store's layout.
package kvcheck

import (
	"fmt"

	"github.com/nereusstream/nereus-go/metadata"
)

// ValidateOp rejects an op that no store could run: an empty key, an unknown
// kind, an expectation that is neither AnyVersion, NotExists nor a positive
// version, Delete with NotExists, or a value over maxValue bytes
// (maxValue <= 0: no limit). The error wraps metadata.ErrInvalidArgument.
func ValidateOp(op metadata.Op, maxValue int) error {
	if op.Key == "" {
		return fmt.Errorf("%w: empty key", metadata.ErrInvalidArgument)
	}
	switch op.Kind {
	case metadata.OpGet:
		return nil
	case metadata.OpPut:
		if op.Expected < metadata.NotExists {
			return fmt.Errorf("%w: expected version %d", metadata.ErrInvalidArgument, op.Expected)
		}
		if maxValue > 0 && len(op.Value) > maxValue {
			return fmt.Errorf("%w: value of %d bytes exceeds %d", metadata.ErrInvalidArgument, len(op.Value), maxValue)
		}
		if op.Session < 0 {
			return fmt.Errorf("%w: session %d", metadata.ErrInvalidArgument, op.Session)
		}
		return nil
	case metadata.OpDelete:
		if op.Expected < metadata.AnyVersion {
			return fmt.Errorf("%w: delete expects AnyVersion or a version, got %d", metadata.ErrInvalidArgument, op.Expected)
		}
		return nil
	default:
		return fmt.Errorf("%w: op kind %d", metadata.ErrInvalidArgument, op.Kind)
	}
}

// CheckPut evaluates a put's expectation against the key's current state
// (exists, and its version when it does).
func CheckPut(exists bool, current, expected metadata.Version) error {
	switch {
	case expected == metadata.AnyVersion:
		return nil
	case expected == metadata.NotExists:
		if exists {
			return fmt.Errorf("%w: key exists at version %d", metadata.ErrUnexpectedVersion, current)
		}
		return nil
	case !exists:
		return fmt.Errorf("%w: %w (expected version %d)", metadata.ErrUnexpectedVersion, metadata.ErrKeyNotFound, expected)
	case current != expected:
		return fmt.Errorf("%w: have %d, expected %d", metadata.ErrUnexpectedVersion, current, expected)
	}
	return nil
}

// CheckDelete evaluates a delete's expectation. Deleting an absent key is
// ErrKeyNotFound (not applied); with an exact expectation it also wraps
// ErrUnexpectedVersion, as the contract says, so it classifies as Conflict.
func CheckDelete(exists bool, current, expected metadata.Version) error {
	switch {
	case !exists && expected == metadata.AnyVersion:
		return metadata.ErrKeyNotFound
	case !exists:
		return fmt.Errorf("%w: %w (expected version %d)", metadata.ErrUnexpectedVersion, metadata.ErrKeyNotFound, expected)
	case expected != metadata.AnyVersion && current != expected:
		return fmt.Errorf("%w: have %d, expected %d", metadata.ErrUnexpectedVersion, current, expected)
	}
	return nil
}

// ValidateRange rejects a scan whose bounds are reversed. min == max is a
// valid, empty range.
func ValidateRange(min, max string) error {
	if min > max {
		return fmt.Errorf("%w: range [%q, %q) is reversed", metadata.ErrInvalidArgument, min, max)
	}
	return nil
}
