// Package adminapi is the wire contract of the Nereus admin REST API (the
// JSON bodies under /v1 and /healthz on the admin HTTP port) and a small Go
// client for it. The server package serves these types; the nereus CLI, the
// test harness and the crash tests speak them through Client.
//
// It owns only the JSON shapes, the error codes and their HTTP mapping. It
// must never import the server or any storage package: it is what an outside
// program links to talk to a running Nereus, so it stays dependency-free.
//
// Offsets are the stream's logical offsets; an entry covers RecordCount
// consecutive offsets starting at its Offset. Payloads are bytes and travel
// base64-encoded in JSON ("payload"); "text" is a convenience for UTF-8
// payloads when appending.
package adminapi

import "time"

// Health is the body of GET /healthz. Status is "ok" while serving,
// "degraded" (still HTTP 200; see Degraded) while a storage component cannot
// write, and "draining" (with HTTP 503) once shutdown began.
type Health struct {
	Status string `json:"status"`
	// Durable is false when the storage backend keeps data in memory only
	// (acknowledged appends are lost when the process exits).
	Durable bool `json:"durable"`
	// Backend names the storage backend (e.g. "memory", "core").
	Backend string `json:"backend"`
	// ObjectStore and Metadata describe the stores under the stream core;
	// both are absent when the server serves a storage it did not build
	// (the in-memory fake of tests).
	ObjectStore *StorageBackend `json:"objectStore,omitempty"`
	Metadata    *StorageBackend `json:"metadata,omitempty"`
	NodeID      string          `json:"nodeId"`
	Version     string          `json:"version"`
	// Listeners maps a listener name ("http", "kafka", "pulsar") to the
	// address it is bound to.
	Listeners map[string]string `json:"listeners"`
	StartedAt time.Time         `json:"startedAt"`
	// Degraded lists the storage components that cannot make appends
	// durable right now (a full disk, an unreachable object store or
	// metadata store); Status is then "degraded". The answer stays HTTP 200:
	// reads and everything else keep working, appends fail with a retriable
	// error, and the components recover by themselves once the cause
	// clears.
	Degraded []DegradedComponent `json:"degraded,omitempty"`
}

// DegradedComponent is one storage component that cannot write.
type DegradedComponent struct {
	// Component is "metadata", "objectwal" or "bookkeeper".
	Component string `json:"component"`
	// Reason is the last error seen.
	Reason string `json:"reason"`
	// Since is when the degraded period began.
	Since time.Time `json:"since"`
}

// StorageBackend describes one store the server runs on. It never carries
// credentials.
type StorageBackend struct {
	// Kind is "file" or "s3" for the object store, "bolt", "log" or "etcd"
	// for the metadata store.
	Kind string `json:"kind"`
	// Location is where the data lives: a path for "file", "bolt" and "log",
	// "s3://BUCKET/PREFIX/" for "s3", "etcd://ENDPOINTS/PREFIX/" for "etcd".
	Location string `json:"location"`
	// Endpoint is the S3 endpoint URL when one is configured (empty: AWS).
	Endpoint string `json:"endpoint,omitempty"`
}

// Retention bounds a stream's history; zero fields mean unlimited.
type Retention struct {
	TimeMs int64 `json:"timeMs,omitempty"`
	Bytes  int64 `json:"bytes,omitempty"`
}

// Session is the append session recorded in a stream's head.
type Session struct {
	Epoch          uint64    `json:"epoch"`
	WriterID       string    `json:"writerId"`
	AuthorityEpoch int64     `json:"authorityEpoch,omitempty"`
	Expires        time.Time `json:"expires"`
}

// StreamInfo describes one stream (GET /v1/streams/{name}).
type StreamInfo struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Profile    string            `json:"profile"`
	State      string            `json:"state"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Retention  Retention         `json:"retention"`
	CreatedAt  time.Time         `json:"createdAt"`
	// Offsets in [StartOffset, EndOffset) are readable; EndOffset is the
	// offset the next append receives.
	StartOffset    int64 `json:"startOffset"`
	EndOffset      int64 `json:"endOffset"`
	CommittedBytes int64 `json:"committedBytes"`
	// RetainedBytes is the payload size of the readable range.
	RetainedBytes int64 `json:"retainedBytes"`
	// MaterializedThrough: offsets below it are served by generations
	// (read-optimized objects), offsets at and above it by the WAL.
	MaterializedThrough int64    `json:"materializedThrough"`
	Session             *Session `json:"session,omitempty"`
}

// CreateStreamRequest is the body of POST /v1/streams.
type CreateStreamRequest struct {
	Name string `json:"name"`
	// Profile is a storage profile name (e.g. OBJECT_WAL_ASYNC_OBJECT);
	// empty selects the default. Fixed for the stream's lifetime.
	Profile    string            `json:"profile,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Retention  *Retention        `json:"retention,omitempty"`
}

// ListStreamsResponse is the body of GET /v1/streams. Next, when not empty,
// is the `after` value that continues the listing.
type ListStreamsResponse struct {
	Streams []StreamInfo `json:"streams"`
	Next    string       `json:"next,omitempty"`
}

// AppendEntry is one entry to append. Exactly one of Payload and Text may be
// set (neither means an empty payload).
type AppendEntry struct {
	Payload []byte  `json:"payload,omitempty"`
	Text    *string `json:"text,omitempty"`
	// RecordCount is how many offsets the entry covers (default 1).
	RecordCount uint32 `json:"recordCount,omitempty"`
	// Timestamp in Unix milliseconds (default: the server's clock).
	Timestamp int64 `json:"timestamp,omitempty"`
}

// AppendRequest is the body of POST /v1/streams/{name}/entries. The entries
// commit together, at consecutive offsets, or not at all.
type AppendRequest struct {
	Entries []AppendEntry `json:"entries"`
	// ExpectedStart, when set, makes the append conditional on its first
	// offset (409 OFFSET_CONFLICT otherwise).
	ExpectedStart *int64 `json:"expectedStart,omitempty"`
}

// AppendResponse reports the committed range [Start, End) and the first
// offset of each entry, in request order.
type AppendResponse struct {
	Start     int64   `json:"start"`
	End       int64   `json:"end"`
	Offsets   []int64 `json:"offsets"`
	Duplicate bool    `json:"duplicate,omitempty"`
}

// ReadEntry is one committed entry.
type ReadEntry struct {
	Offset      int64  `json:"offset"`
	RecordCount uint32 `json:"recordCount"`
	Timestamp   int64  `json:"timestamp"`
	Payload     []byte `json:"payload"`
}

// ReadResponse is the body of GET /v1/streams/{name}/entries. Next is the
// offset to read from next; StartOffset/EndOffset are the stream's bounds
// when the read ran.
type ReadResponse struct {
	Entries     []ReadEntry `json:"entries"`
	Next        int64       `json:"next"`
	StartOffset int64       `json:"startOffset"`
	EndOffset   int64       `json:"endOffset"`
}

// TrimRequest is the body of POST /v1/streams/{name}/trim.
type TrimRequest struct {
	To int64 `json:"to"`
}

// RetentionRequest is the body of PUT /v1/streams/{name}/retention.
type RetentionRequest struct {
	Retention Retention `json:"retention"`
}

// ErrorBody is the body of every non-2xx response.
type ErrorBody struct {
	Error string `json:"error"`
	Code  Code   `json:"code"`
	// Commit is set on append failures: "not_committed" or "unknown"
	// (the append may have committed; read the stream to find out).
	Commit string `json:"commit,omitempty"`
}

// Code is a stable, machine-readable error code.
type Code string

// Error codes. Each maps to one HTTP status (see Status).
const (
	CodeInvalidArgument    Code = "INVALID_ARGUMENT"
	CodeNotFound           Code = "NOT_FOUND"
	CodeStreamNotFound     Code = "STREAM_NOT_FOUND"
	CodeStreamExists       Code = "STREAM_EXISTS"
	CodeStreamSealed       Code = "STREAM_SEALED"
	CodeUnsupportedProfile Code = "UNSUPPORTED_PROFILE"
	CodeFenced             Code = "FENCED"
	CodeSessionBusy        Code = "SESSION_BUSY"
	// CodeNotOwner: another node of the cluster owns the stream; the
	// message names it (send appends there, or retry while ownership
	// moves).
	CodeNotOwner           Code = "NOT_OWNER"
	CodeOffsetConflict     Code = "OFFSET_CONFLICT"
	CodeOffsetOutOfRange   Code = "OFFSET_OUT_OF_RANGE"
	CodeOutOfOrderSequence Code = "OUT_OF_ORDER_SEQUENCE"
	CodeProducerFenced     Code = "PRODUCER_FENCED"
	CodeUnknownProducer    Code = "UNKNOWN_PRODUCER"
	CodeCorrupt            Code = "CORRUPT"
	CodeCommitUnknown      Code = "COMMIT_UNKNOWN"
	CodeUnavailable        Code = "UNAVAILABLE"
	CodeTooLarge           Code = "TOO_LARGE"
	CodeInternal           Code = "INTERNAL"
	// CodeUnauthenticated: the admin API requires credentials (a bearer
	// token or a client certificate) and none valid came (401).
	CodeUnauthenticated Code = "UNAUTHENTICATED"
	// CodeForbidden: the caller's role may not do this (403): read-only
	// roles may only read.
	CodeForbidden Code = "FORBIDDEN"
)

// Status returns the HTTP status the server answers with for the code.
func (c Code) Status() int {
	switch c {
	case CodeInvalidArgument, CodeUnsupportedProfile:
		return 400
	case CodeUnauthenticated:
		return 401
	case CodeForbidden:
		return 403
	case CodeNotFound, CodeStreamNotFound:
		return 404
	case CodeStreamExists, CodeStreamSealed, CodeFenced, CodeSessionBusy, CodeNotOwner, CodeOffsetConflict,
		CodeOutOfOrderSequence, CodeProducerFenced, CodeUnknownProducer:
		return 409
	case CodeTooLarge:
		return 413
	case CodeOffsetOutOfRange:
		return 416
	case CodeCommitUnknown:
		return 504
	case CodeUnavailable:
		return 503
	}
	return 500
}

// RebuildIndexResult is what POST /v1/streams/{name}/rebuild-index did.
type RebuildIndexResult struct {
	// Republished counts head Pending commits written to the index again.
	Republished int `json:"republished"`
	// Gaps counts offset ranges that had no index entry.
	Gaps int `json:"gaps"`
	// Scanned counts stored runs of the stream the WAL providers reported.
	Scanned int `json:"scanned"`
	// Rebuilt counts index entries written from scanned runs.
	Rebuilt int `json:"rebuilt"`
	// GenerationGaps counts materialized ranges that had no
	// generation-index record; GenerationsScanned the unnamed generation
	// objects overlapping them; GenerationsRebuilt the records restored
	// from verified objects.
	GenerationGaps     int `json:"generationGaps"`
	GenerationsScanned int `json:"generationsScanned"`
	GenerationsRebuilt int `json:"generationsRebuilt"`
}

// ClusterStatus is GET /v1/cluster: the cluster as the answering node sees
// it.
type ClusterStatus struct {
	// Self is the node id of the answering node.
	Self string `json:"self"`
	// Isolated: the answering node has lost contact with the metadata
	// store for a whole session TTL (it owns nothing meanwhile).
	Isolated bool `json:"isolated,omitempty"`
	// Leaving: the answering node is draining out of the cluster.
	Leaving bool            `json:"leaving,omitempty"`
	Brokers []ClusterBroker `json:"brokers"`
	// Streams is how many streams were scanned for the per-broker counts;
	// Truncated is set when there were more than the limit. Unowned counts
	// scanned streams whose append session no registered broker holds
	// (idle streams, or a dead owner's not yet taken over).
	Streams   int  `json:"streams"`
	Truncated bool `json:"truncated,omitempty"`
	Unowned   int  `json:"unowned"`
}

// ClusterBroker is one registered broker.
type ClusterBroker struct {
	NodeID        string            `json:"nodeId"`
	KafkaBrokerID int32             `json:"kafkaBrokerId"`
	Rack          string            `json:"rack,omitempty"`
	Version       string            `json:"version,omitempty"`
	Weight        uint32            `json:"weight"`
	State         string            `json:"state"` // active | draining
	Self          bool              `json:"self,omitempty"`
	Endpoints     []ClusterEndpoint `json:"endpoints"`
	// RegisteredAt is when the broker's current registry session began;
	// SessionAgeSeconds its age as the answering node computed it.
	RegisteredAt      time.Time `json:"registeredAt"`
	SessionAgeSeconds float64   `json:"sessionAgeSeconds"`
	SessionTTLSeconds float64   `json:"sessionTtlSeconds"`
	// AssignedStreams counts the scanned streams the ownership policy
	// assigns to the broker; HeldStreams those whose append session it
	// holds now.
	AssignedStreams int `json:"assignedStreams"`
	HeldStreams     int `json:"heldStreams"`
}

// ClusterEndpoint is one advertised address of a broker.
type ClusterEndpoint struct {
	Protocol string `json:"protocol"` // kafka | pulsar | http
	Listener string `json:"listener"`
	Address  string `json:"address"`
	TLS      bool   `json:"tls,omitempty"`
}

// KafkaScramUser is one Kafka user with SCRAM credentials
// (GET /v1/kafka/scram-users). Salts and keys are never returned.
type KafkaScramUser struct {
	User        string                     `json:"user"`
	Credentials []KafkaScramCredentialInfo `json:"credentials"`
}

// KafkaScramCredentialInfo names one credential of a user.
type KafkaScramCredentialInfo struct {
	Mechanism  string `json:"mechanism"`
	Iterations int    `json:"iterations"`
}

// SetKafkaScramRequest is the body of PUT /v1/kafka/scram-users/{user}:
// the server salts the password (random salt), stores only the derived
// keys and forgets the password. Mechanism defaults to SCRAM-SHA-256 and
// Iterations to 8192.
type SetKafkaScramRequest struct {
	Mechanism  string `json:"mechanism,omitempty"`
	Password   string `json:"password"`
	Iterations int    `json:"iterations,omitempty"`
}

// GCStatus is the body of GET /v1/gc and POST /v1/gc/run: the last GC pass
// of the node that answered, what it keeps and why, and its audit trail.
type GCStatus struct {
	DryRun       bool      `json:"dryRun"`
	Disabled     bool      `json:"disabled"`
	LastPass     time.Time `json:"lastPass"`
	DurationMs   int64     `json:"durationMs"`
	PendingCount int       `json:"pendingCount"`
	PendingBytes int64     `json:"pendingBytes"`
	// GraceBytes is the part of PendingBytes in WAL segments or ledgers
	// kept only until their grace period ends.
	GraceBytes int64       `json:"graceBytes,omitempty"`
	Pending    []GCPending `json:"pending,omitempty"`
	Recent     []GCEvent   `json:"recent,omitempty"`
	Stats      GCStats     `json:"stats"`
	// Adopting lists the dead nodes' writers whose WAL logs / ledgers this
	// node has adopted for GC ("objectwal/<writer>", "bookkeeper/<writer>").
	Adopting []string `json:"adopting,omitempty"`
}

// GCPending is one physical unit or record GC keeps for now, and why.
type GCPending struct {
	Kind   string `json:"kind"`
	Unit   string `json:"unit"`
	Bytes  int64  `json:"bytes,omitempty"`
	Reason string `json:"reason"`
}

// GCEvent is one deletion of the audit trail.
type GCEvent struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	Unit   string    `json:"unit"`
	Bytes  int64     `json:"bytes,omitempty"`
	Reason string    `json:"reason"`
	DryRun bool      `json:"dryRun,omitempty"`
}

// GCStats are the lifecycle counters of the node.
type GCStats struct {
	Passes                int64   `json:"passes"`
	DuePasses             int64   `json:"duePasses,omitempty"` // passes that only re-judged units whose grace had ended
	Errors                int64   `json:"errors"`
	DeletedSegments       int64   `json:"deletedSegments"`
	DeletedLedgers        int64   `json:"deletedLedgers"`
	DeletedObjects        int64   `json:"deletedGenerationObjects"`
	DeletedRecords        int64   `json:"deletedRecords"`
	DeletedBytes          int64   `json:"deletedBytes"`
	DeletedStreams        int64   `json:"deletedStreams"`
	RetentionTrims        int64   `json:"retentionTrims"`
	Materialized          int64   `json:"generationsPublished"`
	MaterializedBytes     int64   `json:"materializedBytes"`
	MaterializeFailures   int64   `json:"materializeFailures"`
	MaterializeLagBytes   int64   `json:"materializeLagBytes"`
	MaterializeLagSeconds int64   `json:"materializeLagSeconds"`
	MaterializeSeconds    float64 `json:"materializeSeconds"`
	// Adoptions counts dead writers whose sources this node adopted.
	Adoptions int64 `json:"adoptions"`
	// MaterializeBackpressured counts appends refused because their
	// stream's materialization lag exceeded --materialize-max-lag.
	MaterializeBackpressured int64 `json:"materializeBackpressured"`
	// Merges counts merged generations published (adjacent small
	// generations rewritten into one), MergedSources the generations they
	// replaced, MergedBytes their payload; MergeFailures failed merge tasks.
	Merges        int64   `json:"merges"`
	MergedSources int64   `json:"mergedSources"`
	MergedBytes   int64   `json:"mergedBytes"`
	MergeFailures int64   `json:"mergeFailures"`
	MergeSeconds  float64 `json:"mergeSeconds"`
}
