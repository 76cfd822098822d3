package eostest

import (
	"strings"
	"testing"
	"time"
)

// TestKafkaStreamsExactlyOnce: a Kafka Streams 4.x exactly_once_v2 word
// count (kafka/javaeos Streams.java) with a compacted changelog computes
// exact counts, and after its local state is deleted it restores the store
// from the changelog and goes on counting exactly.
func TestKafkaStreamsExactlyOnce(t *testing.T) {
	out := javaRun(t, 6*time.Minute, nil, "Streams", srv.KafkaAddr(), uniqueName("wc"), t.TempDir())
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "streams:") {
			t.Log(l)
		}
	}
}
