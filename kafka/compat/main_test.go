// Package compat runs unmodified Kafka clients (franz-go kgo/kadm, IBM
// sarama, segmentio kafka-go, librdkafka via kcat, the Java clients) against
// the Nereus Kafka front end. By default one in-process broker over the
// in-memory stream storage serves the whole package; with NEREUS_KAFKA_ADDR
// set the tests run against that external server instead.
package compat

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/kafka/kafkatest"
)

var broker *kafkatest.Broker

func TestMain(m *testing.M) {
	b, err := kafkatest.Start(kafkatest.Options{Verbose: os.Getenv("NEREUS_KAFKA_VERBOSE") != ""})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start broker:", err)
		os.Exit(1)
	}
	broker = b
	code := m.Run()
	if err := b.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "shutdown:", err)
	}
	os.Exit(code)
}

var topicSeq atomic.Int64

// uniqueTopic returns a topic name not used before in this run (tests may
// run against a shared external broker).
func uniqueTopic(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, topicSeq.Add(1))
}

func requireExternal(t testing.TB, ok bool, what string) {
	t.Helper()
	kafkatest.Require(t, ok, what)
}
