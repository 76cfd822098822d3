package opstest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

// srv is the package's one `nereus serve`, seeded by seed().
var (
	srv      *testserver.Server
	withBK   bool
	bkReason string
)

// Seeded data the tests look for.
const (
	restStream    = "ops/orders"
	restEntries   = 5
	bkStream      = "ops/ledgered"
	kafkaTopic    = "payments"
	kafkaParts    = 3
	kafkaRecords  = 30
	kafkaGroup    = "billing"
	kafkaConsumed = 12
	pulsarTopic   = "persistent://public/default/events"
	pulsarSub     = "audit"
	pulsarSent    = 10
	pulsarAcked   = 4
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	opts := testserver.Options{Args: []string{"--metrics-stream-limit", "100"}}
	zk := os.Getenv("NEREUS_BOOKKEEPER_ZK")
	switch {
	case zk != "":
		opts.Args = append(opts.Args, "--bookkeeper-zk", zk)
		withBK = true
	default:
		bkReason = "NEREUS_BOOKKEEPER_ZK is not set (scripts/test.sh starts bookies and sets it)"
	}
	s, err := testserver.Launch(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "opstest: starting nereus serve:", err)
		return 1
	}
	defer s.Close()
	srv = s
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := seed(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "opstest: seeding data:", err)
		return 1
	}
	return m.Run()
}

func requireBK(t *testing.T) {
	t.Helper()
	if withBK {
		return
	}
	testenv.SkipOrFail(t, "BookKeeper needed: %s", bkReason)
}

func adminClient() (*adminapi.Client, error) { return adminapi.NewClient(srv.URL(), nil) }

// seed puts data through every path an operator watches: the REST API,
// a Kafka producer and consumer group (franz-go), a Pulsar producer and
// subscription (pulsar-client-go), and a BookKeeper-profile stream.
func seed(ctx context.Context) error {
	c, err := adminClient()
	if err != nil {
		return err
	}
	if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: restStream,
		Retention: &adminapi.Retention{TimeMs: int64(time.Hour / time.Millisecond)}}); err != nil {
		return fmt.Errorf("create %s: %w", restStream, err)
	}
	var entries []adminapi.AppendEntry
	for i := range restEntries {
		s := fmt.Sprintf("order-%d", i)
		entries = append(entries, adminapi.AppendEntry{Text: &s})
	}
	if _, err := c.Append(ctx, restStream, adminapi.AppendRequest{Entries: entries}); err != nil {
		return fmt.Errorf("append %s: %w", restStream, err)
	}
	if withBK {
		if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: bkStream, Profile: "BOOKKEEPER_WAL_ONLY"}); err != nil {
			return fmt.Errorf("create %s: %w", bkStream, err)
		}
		if _, err := c.Append(ctx, bkStream, adminapi.AppendRequest{Entries: entries[:3]}); err != nil {
			return fmt.Errorf("append %s: %w", bkStream, err)
		}
	}
	if err := seedKafka(ctx); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	if err := seedPulsar(ctx); err != nil {
		return fmt.Errorf("pulsar: %w", err)
	}
	return nil
}

func seedKafka(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.KafkaAddr()), kgo.DefaultProduceTopic(kafkaTopic))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, kafkaParts, 1, nil, kafkaTopic); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	for i := range kafkaRecords {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("payment-%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(srv.KafkaAddr()), kgo.ConsumeTopics(kafkaTopic),
		kgo.ConsumerGroup(kafkaGroup), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cons.Close()
	var got []*kgo.Record
	for len(got) < kafkaConsumed {
		fs := cons.PollRecords(ctx, kafkaConsumed-len(got))
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consuming: %w (have %d)", err, len(got))
		}
		fs.EachError(func(_ string, _ int32, err error) { fmt.Fprintln(os.Stderr, "opstest: fetch:", err) })
		got = append(got, fs.Records()...)
	}
	if err := cons.CommitRecords(ctx, got...); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func seedPulsar(ctx context.Context) error {
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + srv.PulsarAddr(), OperationTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer cl.Close()
	cons, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: pulsarTopic, SubscriptionName: pulsarSub,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer cons.Close()
	prod, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: pulsarTopic})
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	defer prod.Close()
	for i := range pulsarSent {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("event-%d", i))}); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
	for range pulsarAcked {
		msg, err := cons.Receive(ctx)
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		if err := cons.Ack(msg); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
	}
	return nil
}
