package eostest

import (
	"strings"
	"testing"
	"time"
)

// TestJavaKIP848Consumers: Java kafka-clients 4.x consumers with
// group.protocol=consumer (kafka/javaeos Kip848.java): an incremental
// rebalance when a member joins, and a static member's restart that gets
// its partitions back without a rebalance.
func TestJavaKIP848Consumers(t *testing.T) {
	out := javaRun(t, 4*time.Minute, nil, "Kip848", srv.KafkaAddr(), uniqueName("kip848"))
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "kip848:") {
			t.Log(l)
		}
	}
}
