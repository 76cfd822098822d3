package pulsar

import (
	"context"
	"errors"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/stream"
)

// protoError is an error that carries the Pulsar ServerError to report.
type protoError struct {
	code pb.ServerError
	msg  string
}

func (e *protoError) Error() string { return e.code.String() + ": " + e.msg }

func newError(code pb.ServerError, msg string) error { return &protoError{code: code, msg: msg} }

// errorTable maps storage-side errors to the ServerError clients act on.
// ServiceNotReady makes clients re-lookup and retry; PersistenceError makes
// a producer reconnect and resend (safe with deduplication).
var errorTable = []struct {
	err  error
	code pb.ServerError
}{
	{managedledger.ErrTopicNotFound, pb.ServerError_TopicNotFound},
	{managedledger.ErrNamespaceNotFound, pb.ServerError_TopicNotFound},
	{managedledger.ErrInvalidName, pb.ServerError_InvalidTopicName},
	{managedledger.ErrTopicExists, pb.ServerError_NotAllowedError},
	{managedledger.ErrCursorNotFound, pb.ServerError_SubscriptionNotFound},
	{managedledger.ErrCorruptRecord, pb.ServerError_MetadataError},
	{managedledger.ErrTooManyConflicts, pb.ServerError_ServiceNotReady},
	{stream.ErrFenced, pb.ServerError_ServiceNotReady},
	{stream.ErrSessionBusy, pb.ServerError_ServiceNotReady},
	{stream.ErrStreamSealed, pb.ServerError_TopicTerminatedError},
	{stream.ErrStreamNotFound, pb.ServerError_TopicNotFound},
	{stream.ErrClosed, pb.ServerError_ServiceNotReady},
	// The WAL could not write (and recovers by itself): the client
	// reconnects and resends, as after a BookKeeper write error.
	{stream.ErrStorageUnavailable, pb.ServerError_PersistenceError},
	{metadata.ErrUnavailable, pb.ServerError_ServiceNotReady},
	{context.DeadlineExceeded, pb.ServerError_ServiceNotReady},
}

// toServerError classifies err for a protocol answer.
func toServerError(err error) (pb.ServerError, string) {
	var pe *protoError
	if errors.As(err, &pe) {
		return pe.code, pe.msg
	}
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.code, err.Error()
		}
	}
	return pb.ServerError_UnknownError, err.Error()
}
