package bookkeeper

import "context"

// Version is a ledger metadata version (the znode's data version in
// ZooKeeper). A successful create returns the first version; every write
// returns the next. Versions are compared for equality only.
type Version int64

// BookieInfo names a registered bookie and where to reach it.
type BookieInfo struct {
	// ID is the bookie ID as it appears in ledger ensembles (by default
	// "host:port").
	ID string
	// Addr is the host:port of its v2/v3 protocol endpoint ("bookie-rpc").
	Addr string
}

// MetadataStore holds ledger metadata and the bookie registry. The
// production implementation is ZooKeeper in BookKeeper's own layout
// (ZKStore); bkfake.MetaStore is an in-memory one with fault injection for
// tests.
//
// Contract. The store deals in opaque, already-encoded metadata bytes (see
// package meta) so that every implementation stores exactly what a Java
// client would. Every method is safe for concurrent use. Errors:
//
//   - ErrLedgerExists: CreateLedgerMetadata found the ID taken; nothing
//     written.
//   - ErrNoSuchLedger: the ledger has no metadata (reads, writes, deletes).
//   - ErrBadVersion: a conditional write/delete lost; nothing written.
//   - anything else wraps ErrMetadataUnavailable (or a context error): the
//     outcome of a write is unknown and the caller settles it by reading.
//
// ReadLedgerMetadata must be linearizable with respect to earlier writes
// of any client (ZooKeeper: sync before read), because the client settles
// unknown outcomes with it.
type MetadataStore interface {
	// CreateLedgerMetadata creates the ledger's metadata, which must not
	// exist, and returns its version.
	CreateLedgerMetadata(ctx context.Context, ledgerID int64, data []byte) (Version, error)
	// ReadLedgerMetadata returns the ledger's metadata and version.
	ReadLedgerMetadata(ctx context.Context, ledgerID int64) ([]byte, Version, error)
	// WriteLedgerMetadata replaces the metadata if it is at expected.
	WriteLedgerMetadata(ctx context.Context, ledgerID int64, data []byte, expected Version) (Version, error)
	// DeleteLedgerMetadata deletes the metadata if it is at expected.
	DeleteLedgerMetadata(ctx context.Context, ledgerID int64, expected Version) error
	// WritableBookies lists the bookies currently registered as writable.
	WritableBookies(ctx context.Context) ([]BookieInfo, error)
	// ResolveBookie returns the network address of a bookie ID, registered
	// (writable or read-only) or not; an unregistered "host:port" ID
	// resolves to itself.
	ResolveBookie(ctx context.Context, bookieID string) (string, error)
}
