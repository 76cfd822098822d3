package s3store

import (
	"errors"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// errKind is what an SDK error says about an S3 request.
type errKind uint8

const (
	// kindUnknown: anything not listed below, including every transport
	// error, 5xx other than throttling, and ctx cancellation. For a mutation
	// the request may have been applied.
	kindUnknown errKind = iota
	// kindPrecondition: 412 PreconditionFailed. Not applied.
	kindPrecondition
	// kindConflict: 409 (ConditionalRequestConflict, OperationAborted): a
	// concurrent conflicting operation. Not applied; re-read and retry.
	kindConflict
	// kindSlowDown: 503 SlowDown and throttling codes. Not applied; back
	// off and retry.
	kindSlowDown
	// kindNoSuchKey: 404 for a missing object (NoSuchKey, or NotFound from
	// a HEAD, which has no body to say more).
	kindNoSuchKey
	// kindNoSuchBucket: 404 NoSuchBucket. A configuration error, never
	// "object not found": treating it as absence would make a typo'd bucket
	// read as an empty log.
	kindNoSuchBucket
	// kindInvalidRange: 416 InvalidRange: the range starts at or past the
	// end of an existing object.
	kindInvalidRange
	// kindBadRequest: the request was rejected as malformed or impossible
	// for the backend (400 InvalidArgument, KeyTooLongError, versitygw's
	// file/directory clashes). Not applied.
	kindBadRequest
)

func (k errKind) String() string {
	return [...]string{"unknown", "precondition-failed", "conflict", "slow-down", "no-such-key", "no-such-bucket", "invalid-range", "bad-request"}[k]
}

// classify maps an aws-sdk-go-v2 error onto errKind using the API error code
// first (it is what S3 documents) and the HTTP status only where the code is
// absent or ambiguous. Unrecognised errors are kindUnknown: that is the safe
// default for a mutation, whose caller must then re-read.
func classify(err error) errKind {
	if err == nil {
		return kindUnknown
	}
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	switch code {
	case "NoSuchBucket":
		return kindNoSuchBucket
	case "NoSuchKey":
		return kindNoSuchKey
	case "PreconditionFailed":
		return kindPrecondition
	case "ConditionalRequestConflict", "OperationAborted":
		return kindConflict
	case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException", "RequestThrottled":
		return kindSlowDown
	case "InvalidRange":
		return kindInvalidRange
	case "InvalidArgument", "KeyTooLongError",
		// versitygw's posix backend cannot hold an object "a" and an
		// object "a/b" at once (file vs directory); it rejects the second
		// write with a 409 that is not a concurrency conflict.
		"ExistingObjectIsDirectory", "ObjectParentIsFile":
		return kindBadRequest
	}
	switch status {
	case http.StatusPreconditionFailed:
		return kindPrecondition
	case http.StatusConflict:
		// Only a 409 without a more specific code is treated as a
		// concurrency conflict (retryable).
		if code == "" {
			return kindConflict
		}
	case http.StatusRequestedRangeNotSatisfiable:
		return kindInvalidRange
	case http.StatusNotFound:
		// HEAD responses carry no body, so the SDK reports code "NotFound"
		// (or nothing) for a missing key and a missing bucket alike. Callers
		// of HEAD disambiguate with a bucket check (see Store.notFound).
		if code == "" || code == "NotFound" {
			return kindNoSuchKey
		}
	}
	return kindUnknown
}
