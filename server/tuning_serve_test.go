package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// --session-ttl governs the append sessions of every protocol, not only
// the REST API's: a Kafka partition's session expires within it.
func TestSessionTTLReachesKafkaPartitions(t *testing.T) {
	cfg := testConfig(t)
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.SessionTTL = 7 * time.Second
	s, c := startTest(t, cfg)
	ctx := ctxT(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Listeners()["kafka"]), kgo.DefaultProduceTopic("ttl"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "ttl"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	info, err := c.DescribeStream(ctx, "kafka/ttl/0")
	if err != nil {
		t.Fatal(err)
	}
	if info.Session == nil {
		t.Fatal("the partition stream has no session after a produce")
	}
	if left := time.Until(info.Session.Expires); left <= 0 || left > 7*time.Second+2*time.Second {
		t.Fatalf("session expires in %v, want within the configured 7s TTL", left)
	}
}

// The Kafka knobs reach the broker: auto-created topics get
// --kafka-num-partitions partitions, and --kafka-auto-create-topics=false
// stops auto-creation.
func TestKafkaTopicKnobs(t *testing.T) {
	for _, auto := range []bool{true, false} {
		cfg := testConfig(t)
		cfg.KafkaAddr = "127.0.0.1:0"
		cfg.KafkaNumPartitions = 3
		cfg.KafkaAutoCreateTopics = auto
		s, _ := startTest(t, cfg)
		ctx := ctxT(t)
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Listeners()["kafka"]), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(cl)
		// A Metadata request naming the topic with auto-creation allowed.
		md, err := adm.Metadata(ctx, "auto")
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		td := md.Topics["auto"]
		switch {
		case auto && (td.Err != nil || len(td.Partitions) != 3):
			t.Errorf("auto-create on: topic err %v, %d partitions; want 3 partitions", td.Err, len(td.Partitions))
		case !auto && td.Err == nil:
			t.Errorf("auto-create off: the topic was created with %d partitions", len(td.Partitions))
		}
	}
}
