package managedledger

import "errors"

// Errors. Match with errors.Is.
var (
	// ErrInvalidName: a topic, tenant, namespace or subscription name is
	// malformed. Nothing was written.
	ErrInvalidName = errors.New("nereus/managedledger: invalid name")
	// ErrTopicNotFound: the topic does not exist (and was not to be
	// created).
	ErrTopicNotFound = errors.New("nereus/managedledger: topic not found")
	// ErrTopicExists: a create found the topic (or partitioned topic)
	// already present.
	ErrTopicExists = errors.New("nereus/managedledger: topic already exists")
	// ErrNamespaceNotFound: the topic's namespace (or tenant) does not
	// exist.
	ErrNamespaceNotFound = errors.New("nereus/managedledger: namespace not found")
	// ErrNotEmpty: a tenant or namespace still has children.
	ErrNotEmpty = errors.New("nereus/managedledger: not empty")
	// ErrExists: a tenant or namespace already exists.
	ErrExists = errors.New("nereus/managedledger: already exists")
	// ErrNotFound: a tenant, namespace or record does not exist.
	ErrNotFound = errors.New("nereus/managedledger: not found")
	// ErrCursorNotFound: no durable cursor has that name.
	ErrCursorNotFound = errors.New("nereus/managedledger: cursor not found")
	// ErrCorruptRecord: a metadata record failed its checksum or does not
	// decode. It is never used as state.
	ErrCorruptRecord = errors.New("nereus/managedledger: corrupt metadata record")
	// ErrNoWriter: Append was called without an acquired append session.
	ErrNoWriter = errors.New("nereus/managedledger: ledger has no append session")
	// ErrTooManyConflicts: a metadata CAS kept losing; the outcome is
	// not applied. Retry later.
	ErrTooManyConflicts = errors.New("nereus/managedledger: metadata update kept conflicting")
)
