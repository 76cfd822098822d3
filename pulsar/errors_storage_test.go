package pulsar

import (
	"fmt"
	"testing"

	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/stream"
)

// A WAL that cannot write is PersistenceError: pulsar-client-go (and the
// Java client) answer any SendError but NotAllowed and TopicTerminated by
// reconnecting and resending, which broker deduplication makes safe.
func TestStorageUnavailableIsPersistenceError(t *testing.T) {
	err := fmt.Errorf("%w: WAL write failed, not committed: disk full", stream.ErrStorageUnavailable)
	if code, _ := toServerError(err); code != pb.ServerError_PersistenceError {
		t.Fatalf("code %v, want PersistenceError", code)
	}
}
