package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/nereusstream/nereus-go/objectstore"
)

// sdkError builds an error shaped like what aws-sdk-go-v2 returns for an
// HTTP error response: OperationError → awshttp.ResponseError →
// smithyhttp.ResponseError → the modelled or generic API error.
func sdkError(op string, status int, apiErr error) error {
	return &smithy.OperationError{
		ServiceID:     "S3",
		OperationName: op,
		Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}},
				Err:      apiErr,
			},
			RequestID: "REQ123",
		},
	}
}

func generic(code string) error {
	return &smithy.GenericAPIError{Code: code, Message: code + " message", Fault: smithy.FaultClient}
}

// transportError is what the SDK returns when the connection fails after
// (or while) sending the request: no response, so no code and no status.
func transportError(op string, cause error) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: op, Err: &smithyhttp.RequestSendError{Err: cause}}
}

func TestClassifySDKShapedErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want errKind
	}{
		{"412 PreconditionFailed", sdkError("PutObject", 412, generic("PreconditionFailed")), kindPrecondition},
		{"412 without code", sdkError("PutObject", 412, generic("")), kindPrecondition},
		{"409 ConditionalRequestConflict", sdkError("PutObject", 409, generic("ConditionalRequestConflict")), kindConflict},
		{"409 OperationAborted", sdkError("DeleteObject", 409, generic("OperationAborted")), kindConflict},
		{"409 without code", sdkError("PutObject", 409, generic("")), kindConflict},
		{"409 versitygw ExistingObjectIsDirectory", sdkError("PutObject", 409, generic("ExistingObjectIsDirectory")), kindBadRequest},
		{"409 other code is not a retryable conflict", sdkError("PutObject", 409, generic("BucketNotEmpty")), kindUnknown},
		{"503 SlowDown", sdkError("PutObject", 503, generic("SlowDown")), kindSlowDown},
		{"503 without code", sdkError("PutObject", 503, generic("")), kindUnknown},
		{"500 InternalError", sdkError("PutObject", 500, generic("InternalError")), kindUnknown},
		{"404 NoSuchKey typed", sdkError("GetObject", 404, &types.NoSuchKey{}), kindNoSuchKey},
		{"404 NoSuchKey on If-Match put", sdkError("PutObject", 404, generic("NoSuchKey")), kindNoSuchKey},
		{"404 NotFound from HEAD", sdkError("HeadObject", 404, &types.NotFound{}), kindNoSuchKey},
		{"404 NoSuchBucket typed", sdkError("GetObject", 404, &types.NoSuchBucket{}), kindNoSuchBucket},
		{"404 NoSuchBucket generic on PUT", sdkError("PutObject", 404, generic("NoSuchBucket")), kindNoSuchBucket},
		{"404 other code", sdkError("GetObject", 404, generic("NoSuchUpload")), kindUnknown},
		{"416 InvalidRange", sdkError("GetObject", 416, generic("InvalidRange")), kindInvalidRange},
		{"400 InvalidArgument", sdkError("PutObject", 400, generic("InvalidArgument")), kindBadRequest},
		{"403 AccessDenied", sdkError("PutObject", 403, generic("AccessDenied")), kindUnknown},
		{"connection refused", transportError("PutObject", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), kindUnknown},
		{"connection reset mid-response", transportError("PutObject", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), kindUnknown},
		{"unexpected EOF", transportError("PutObject", io.ErrUnexpectedEOF), kindUnknown},
		{"context canceled", &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: context.Canceled}, kindUnknown},
		{"wrapped again by caller", fmt.Errorf("outer: %w", sdkError("PutObject", 412, generic("PreconditionFailed"))), kindPrecondition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := classify(c.err); got != c.want {
				t.Fatalf("classify = %v, want %v (err: %v)", got, c.want, c.err)
			}
		})
	}
}

// The store-level mapping of those kinds must keep the three traps closed.
func TestMappingTraps(t *testing.T) {
	s := &Store{cfg: Config{Bucket: "b"}.withDefaults()}

	noBucket := s.wrapRead("get", "k", sdkError("GetObject", 404, &types.NoSuchBucket{}))
	if errors.Is(noBucket, objectstore.ErrNotFound) || !errors.Is(noBucket, ErrNoSuchBucket) {
		t.Fatalf("NoSuchBucket read error %v: must be ErrNoSuchBucket and not ErrNotFound", noBucket)
	}
	noBucketPut := s.wrapMutation("put", "k", sdkError("PutObject", 404, generic("NoSuchBucket")))
	if errors.Is(noBucketPut, objectstore.ErrNotFound) || !errors.Is(noBucketPut, ErrNoSuchBucket) {
		t.Fatalf("NoSuchBucket mutation error %v", noBucketPut)
	}
	noKey := s.wrapRead("get", "k", sdkError("GetObject", 404, &types.NoSuchKey{}))
	if !errors.Is(noKey, objectstore.ErrNotFound) {
		t.Fatalf("NoSuchKey read error %v: want ErrNotFound", noKey)
	}

	// A bare transport error on a mutation carries no sentinel at all.
	for _, cause := range []error{io.ErrUnexpectedEOF, &net.OpError{Op: "read", Err: syscall.ECONNRESET}} {
		err := s.wrapMutation("put", "k", transportError("PutObject", cause))
		for _, sentinel := range []error{objectstore.ErrNotFound, objectstore.ErrAlreadyExists, objectstore.ErrPreconditionFailed,
			objectstore.ErrConflict, objectstore.ErrInvalidArgument, objectstore.ErrClosed, objectstore.ErrCorrupt, ErrNoSuchBucket} {
			if errors.Is(err, sentinel) {
				t.Fatalf("transport error %v wraps sentinel %v", err, sentinel)
			}
		}
		if got := objectstore.Classify(err); got != objectstore.Unknown {
			t.Fatalf("Classify(transport error) = %v, want unknown", got)
		}
	}
	// 409 and 412 never map to the same outcome.
	if classify(sdkError("PutObject", 409, generic("ConditionalRequestConflict"))) == classify(sdkError("PutObject", 412, generic("PreconditionFailed"))) {
		t.Fatalf("409 and 412 classified alike")
	}
	if objectstore.Classify(objectstore.ErrConflict) == objectstore.Classify(objectstore.ErrPreconditionFailed) {
		t.Fatalf("ErrConflict and ErrPreconditionFailed classify alike")
	}
	// A checksum failure from the SDK's response validation is corruption.
	corrupt := s.wrapRead("get", "k", errors.New("checksum did not match: algorithm CRC32C, expect AAAA, actual BBBB"))
	if !errors.Is(corrupt, objectstore.ErrCorrupt) {
		t.Fatalf("checksum mismatch %v: want ErrCorrupt", corrupt)
	}
}
