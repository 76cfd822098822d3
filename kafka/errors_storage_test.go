package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/nereusstream/nereus-go/stream"
)

// A WAL that cannot write (disk full, store outage) is KAFKA_STORAGE_ERROR,
// which clients retry, never UNKNOWN_SERVER_ERROR.
func TestStorageUnavailableIsRetriableStorageError(t *testing.T) {
	err := fmt.Errorf("%w: WAL write failed, not committed: disk full", stream.ErrStorageUnavailable)
	code := errorCode(err)
	if code != kerr.KafkaStorageError.Code {
		t.Fatalf("code %d, want KAFKA_STORAGE_ERROR (%d)", code, kerr.KafkaStorageError.Code)
	}
	if e := kerr.ErrorForCode(code); !kerr.IsRetriable(e) {
		t.Fatalf("%v is not retriable for clients", e)
	}
}
