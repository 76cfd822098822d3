package wal

import "errors"

// Public sentinel errors. Each says what the caller should do. Classify with
// errors.Is, never by message text.
var (
	// ErrCorrupt reports that stored bytes failed their integrity check (a
	// checksum mismatch or a structurally impossible object). Distinct from a
	// transport error: retrying the GET re-reads the same bad bytes, so
	// replication stops rather than spins. Every decode failure of a manifest,
	// segment, frame range or published cursor wraps it.
	ErrCorrupt = errors.New("nereus/wal: checksum mismatch (corrupt object)")

	// ErrFenced is returned once a newer primary has claimed the log (bumped
	// the epoch). A fenced producer is permanently halted; construct a fresh
	// one only after re-establishing that this node is the primary.
	ErrFenced = errors.New("nereus/wal: producer fenced by a newer epoch")

	// ErrHalted is returned by Append after the producer has stopped (a fatal
	// commit or upload error, fencing, or Close). When the stop had a cause,
	// the returned error also wraps it (errors.Is(err, ErrFenced) works).
	ErrHalted = errors.New("nereus/wal: producer halted")

	// ErrNoRecords is returned by Append when given no records. An empty
	// group would produce an invalid manifest entry and halt the producer.
	ErrNoRecords = errors.New("nereus/wal: Append requires at least one record")

	// ErrTruncated is returned by Replica.Poll when the records the replica
	// needs next were already truncated from the manifest (its cursor is
	// below the first live entry). Re-bootstrap the replica from the
	// manifest's snapshot pointer; polling again cannot succeed.
	ErrTruncated = errors.New("nereus/wal: records needed by the replica were truncated")
)
