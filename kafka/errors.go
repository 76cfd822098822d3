package kafka

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/kafka/kgroup"
	"github.com/nereusstream/nereus-go/kafka/kstore"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

var (
	errTooLarge      = errors.New("kafka: record batch too large")
	errTransactional = errors.New("kafka: a transactional batch needs a transactional id, a producer id and sequence numbers")
	errInvalidRF     = errors.New("kafka: invalid replication factor")
	errFencedEpoch   = errors.New("kafka: client leader epoch is older than the partition's")
	errUnknownEpoch  = errors.New("kafka: client leader epoch is newer than the partition's")
	// errUnsupportedTimestamp: ListOffsets -3/-4/-5 (not advertised).
	errUnsupportedTimestamp = errors.New("kafka: unsupported list offsets timestamp")
)

// errorCode maps an error from the storage boundary, the stream core or
// batch validation onto the Kafka error code a client acts on. Uncertain
// outcomes map to retriable codes (REQUEST_TIMED_OUT): an idempotent
// producer's retry is settled by the core's deduplication, never guessed.
func errorCode(err error) int16 {
	var ce kafkaCodeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ce):
		return int16(ce)
	case errors.Is(err, errTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, errTransactional):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, errUnsupportedTimestamp):
		return kerr.UnsupportedVersion.Code
	case errors.Is(err, errInvalidRF):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, errFencedEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, errUnknownEpoch):
		return kerr.UnknownLeaderEpoch.Code
	case errors.Is(err, kstore.ErrUnknownTopic), errors.Is(err, stream.ErrStreamNotFound):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, kstore.ErrNotLeader), errors.Is(err, stream.ErrFenced), errors.Is(err, stream.ErrSessionBusy):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, stream.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, stream.ErrProducerFenced):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, stream.ErrUnknownProducer):
		return kerr.UnknownProducerID.Code
	case errors.Is(err, stream.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, stream.ErrCommitUnknown), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, metadata.ErrUnavailable):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, stream.ErrUnsupportedProfile), errors.Is(err, kstore.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, stream.ErrStreamSealed), errors.Is(err, stream.ErrCorrupt), errors.Is(err, stream.ErrClosed),
		errors.Is(err, stream.ErrStorageUnavailable): // retriable: the WAL recovers by itself
		return kerr.KafkaStorageError.Code
	case errors.Is(err, kbatch.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, kbatch.ErrMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, kbatch.ErrInvalid):
		return kerr.InvalidRecord.Code
	case errors.Is(err, kstore.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, kstore.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, kstore.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, kstore.ErrUnknownPayloadFormat):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, kstore.ErrRecordTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, kstore.ErrNotOnProjected):
		return kerr.InvalidRequest.Code
	case errors.Is(err, kstore.ErrConflict):
		return kerr.RequestTimedOut.Code
	default:
		logUnclassified(err)
		return kerr.UnknownServerError.Code
	}
}

// unclassifiedLogged rate-limits logUnclassified: the Unix second of its
// last line, and how many errors it did not log since.
var unclassifiedLogged, unclassifiedSuppressed atomic.Int64

// logUnclassified logs an error no case above maps: the client sees only
// UNKNOWN_SERVER_ERROR, so the server log is the one place that says what
// happened (such an error is a missing mapping or a bug). At most one line
// a second, with how many were not logged.
func logUnclassified(err error) {
	now := time.Now().Unix()
	last := unclassifiedLogged.Load()
	if now == last || !unclassifiedLogged.CompareAndSwap(last, now) {
		unclassifiedSuppressed.Add(1)
		return
	}
	slog.Default().Warn("kafka: answering UNKNOWN_SERVER_ERROR for an unclassified error",
		"err", err, "suppressed_since_last", unclassifiedSuppressed.Swap(0))
}

// kafkaCodeError carries a Kafka error code decided by a coordinator.
type kafkaCodeError int16

func (e kafkaCodeError) Error() string {
	if ke := kerr.ErrorForCode(int16(e)); ke != nil {
		return ke.Error()
	}
	return "kafka error code " + strconv.Itoa(int(e))
}

func codeError(code int16) error { return kafkaCodeError(code) }

// errorMessage is the message to send with a code where the API has room
// for one (nil for success).
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// groupErrorCode maps a group coordinator error (kgroup.Coordinator.Do):
// another broker coordinates the group → NOT_COORDINATOR (the client looks
// it up again); its stored state could not be read → COORDINATOR_NOT_AVAILABLE.
func groupErrorCode(err error) int16 {
	if errors.Is(err, kgroup.ErrNotCoordinator) {
		return kerr.NotCoordinator.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}
