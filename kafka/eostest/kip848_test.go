package eostest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJavaKIP848Consumers: Java kafka-clients 4.x consumers with
// group.protocol=consumer (kafka/javaeos Kip848.java): an incremental
// rebalance when a member joins, a static member's restart that gets its
// partitions back without a rebalance, and a SIGKILL + restart of the
// server under the group that neither member notices (the group state is
// stored, as in Kafka's __consumer_offsets).
func TestJavaKIP848Consumers(t *testing.T) {
	restarted := filepath.Join(t.TempDir(), "restarted")
	onLine := func(l string) {
		if strings.HasPrefix(l, "kip848: restart-server") {
			srv.Kill()
			srv.Restart()
			if err := os.WriteFile(restarted, nil, 0o600); err != nil {
				t.Error(err)
			}
		}
	}
	out := javaRun(t, 4*time.Minute, onLine, "Kip848", srv.KafkaAddr(), uniqueName("kip848"), restarted)
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "kip848:") {
			t.Log(l)
		}
	}
}
