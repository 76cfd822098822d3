// Package s3store is the objectstore.ObjectStore on Amazon S3 or any
// S3-compatible server, through aws-sdk-go-v2. It owns the mapping of the
// objectstore contract onto S3 requests and, above all, the classification
// of S3 answers into applied / not applied / conflict / unknown. It must
// never report a mutation as not applied unless S3's answer proves it, and
// never report a missing bucket as a missing object.
//
// # Mapping
//
//	Get        GetObject (x-amz-checksum-mode: ENABLED; the SDK verifies the stored CRC32C)
//	GetRange   GetObject with Range: bytes=off-end (416 on an existing object → empty result)
//	ReadRange  GetRange's request, the body read into the caller's buffer
//	Head       HeadObject (a 404 is confirmed with HeadBucket: HEAD has no error body)
//	PutCreate  PutObject If-None-Match: *
//	PutUpdate  PutObject If-Match: "<etag>"
//	Delete     HeadObject then DeleteObject (S3 deletes of missing keys succeed silently)
//	Delete(v)  HeadObject then DeleteObject If-Match: "<etag>" (servers differ on If-Match
//	           for a missing key; the HEAD gives ErrNotFound uniformly)
//	List       ListObjectsV2, page by page
//
// Every PutObject carries a CRC32C checksum, which S3 verifies on upload and
// stores; whole-object reads verify it, and a mismatch is
// objectstore.ErrCorrupt.
//
// # Outcomes
//
// The SDK's own retries are disabled for conditional mutations: a PUT that
// landed but whose response was lost would be retried into a 412 and
// misreported as lost. Instead this package retries only on answers that
// prove nothing was applied:
//
//	412 PreconditionFailed           → ErrAlreadyExists (PutCreate) / ErrPreconditionFailed
//	404 NoSuchKey on If-Match        → ErrPreconditionFailed (Put) / ErrNotFound (Delete)
//	409 ConditionalRequestConflict   → HEAD the key; if the precondition can no longer hold,
//	                                   the loss; else back off and retry, at most
//	                                   Config.MaxConflictRetries times, then ErrConflict
//	503 SlowDown / throttling        → back off and retry, at most Config.MaxSlowDownRetries
//	404 NoSuchBucket                 → ErrNoSuchBucket (configuration error, not ErrNotFound)
//	400 InvalidArgument, KeyTooLong  → ErrInvalidArgument
//	anything else (transport errors, → no sentinel: objectstore.Classify says Unknown and the
//	5xx, cancellation mid-request)     caller re-reads
//
// # Versions
//
// Versions are S3 ETags (quotes stripped). They are content-derived for
// single-part uploads: writing identical bytes yields the same version, so
// an object used as a CAS head must carry its own epoch or counter (see the
// objectstore package doc). The conformance suite runs with
// objectstoretest.Capabilities{ContentDerivedVersions: true}.
package s3store
