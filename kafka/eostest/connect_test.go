package eostest

import (
	"strings"
	"testing"
	"time"
)

// TestKafkaConnectDistributed: Kafka Connect 4.x in distributed mode
// (kafka/javaeos ConnectFile.java) creates its compacted internal topics on
// Nereus and copies a file into a topic and back with the FileStream
// connectors.
func TestKafkaConnectDistributed(t *testing.T) {
	out := javaRun(t, 5*time.Minute, nil, "ConnectFile", srv.KafkaAddr(), uniqueName("connect"), t.TempDir())
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "connect:") {
			t.Log(l)
		}
	}
}
