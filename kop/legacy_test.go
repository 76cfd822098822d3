package kop_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/kafka"
	"github.com/nereusstream/nereus-go/kop"
	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

// TestEntryCountedTopicRefused: a Pulsar topic created before the
// message-counted format (its offsets count entries) has no Kafka mapping;
// franz-go's produce and fetch on it fail with UNSUPPORTED_FOR_MESSAGE_FORMAT
// instead of being served converted by guesswork.
func TestEntryCountedTopicRefused(t *testing.T) {
	ctx := context.Background()
	st, meta := streammem.New(), memstore.New()
	ml := managedledger.NewFactory(st, meta, managedledger.Config{WriterID: "old-broker", AuthorityEpoch: 1, EntryCountedTopics: true})
	if err := ml.EnsureDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	name, _ := managedledger.ParseTopicName("persistent://public/default/legacy")
	l, err := ml.Open(ctx, name, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AcquireWriter(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsync(stream.Entry{Payload: []byte("an old entry")}, nil).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	_ = l.Close(ctx)

	proj, err := kop.New(kop.Config{Ledgers: ml})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kafka.NewServer(kafka.Config{Projection: proj}, st, meta)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})

	topic := name.String()
	kc, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.DefaultProduceTopic(topic),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = kc.ProduceSync(pctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnsupportedForMessageFormat) {
		t.Fatalf("produce to an entry-counted topic: %v, want UNSUPPORTED_FOR_MESSAGE_FORMAT", err)
	}
	var fetchErr error
	for fetchErr == nil && pctx.Err() == nil {
		kc.PollFetches(pctx).EachError(func(_ string, _ int32, err error) { fetchErr = err })
	}
	if !errors.Is(fetchErr, kerr.UnsupportedForMessageFormat) {
		t.Fatalf("fetch from an entry-counted topic: %v", fetchErr)
	}
}
