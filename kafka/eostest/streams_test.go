package eostest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKafkaStreamsExactlyOnce: a Kafka Streams 4.x exactly_once_v2 word
// count (kafka/javaeos Streams.java) with a compacted changelog computes
// exact counts; the changelog is then compacted for real (its segment.ms
// lowered: Streams creates it with 7 days; the broker reclaims the log
// below the cleaned point, the topic being compact-only), and after its
// local state is deleted the application restores the store from the
// compacted changelog and goes on counting exactly.
func TestKafkaStreamsExactlyOnce(t *testing.T) {
	prefix := uniqueName("wc")
	out := javaRun(t, 6*time.Minute, nil, "Streams", srv.KafkaAddr(), prefix, t.TempDir())
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "streams:") {
			t.Log(l)
		}
	}
	// The restore read a changelog whose lossless log was reclaimed: its
	// partition streams start past 0 (Kafka's earliest stays 0, the view's).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reclaimed := 0
	for p := 0; p < 3; p++ {
		in, err := srv.Client().DescribeStream(ctx, fmt.Sprintf("kafka/%s-app-counts-store-changelog/%d", prefix, p))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("changelog partition %d: lossless [%d, %d)", p, in.StartOffset, in.EndOffset)
		if in.StartOffset > 0 {
			reclaimed++
		}
	}
	if reclaimed == 0 {
		t.Fatal("no changelog partition had its lossless log reclaimed")
	}
}
