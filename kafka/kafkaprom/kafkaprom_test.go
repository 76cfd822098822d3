package kafkaprom

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/kafka"
	"github.com/nereusstream/nereus-go/kafka/kafkatest"
)

func TestMetricsExported(t *testing.T) {
	m := New()
	b, err := kafkatest.StartLocal(kafkatest.Options{Config: kafka.Config{RequestHook: m.RequestHook}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m.Attach(b.Server)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic("m"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP nereus_kafka_produced_records_total Records committed by produce.
# TYPE nereus_kafka_produced_records_total counter
nereus_kafka_produced_records_total 1
`), "nereus_kafka_produced_records_total"); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg, "nereus_kafka_requests_total", "nereus_kafka_request_duration_seconds")
	if err != nil || n < 4 {
		t.Fatalf("request metrics: %d series, err %v", n, err)
	}
}
