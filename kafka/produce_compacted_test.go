package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
)

// TestCompactedTopicRefusesNullKeys: as Kafka's LogValidator, a batch
// with a keyless record is refused on a compacted topic with
// INVALID_RECORD naming the record; keyed batches and keyless ones on a
// delete topic are taken. Raw batches and franz-go's compressed ones.
func TestCompactedTopicRefusesNullKeys(t *testing.T) {
	s := startServer(t, Config{}, nil)
	c := dial(t, s.addr)
	mustCreateTopic(t, c, "cmp", 1, map[string]string{"cleanup.policy": "compact"})
	mustCreateTopic(t, c, "del", 1, nil)
	opts := kbatch.BuildOptions{ProducerID: -1, BaseSequence: -1}
	keyed := kbatch.Build(opts, []kbatch.Record{{Key: []byte("k1"), Value: []byte("a")}, {Key: []byte("k2"), Value: []byte("b")}})
	keyless := kbatch.Build(opts, []kbatch.Record{{Key: []byte("k1"), Value: []byte("a")}, {Value: []byte("b")}})

	if r := produce1(t, c, 9, "cmp", 0, keyed); r.ErrorCode != 0 {
		t.Fatalf("keyed batch on a compacted topic: %d %s", r.ErrorCode, derefStr(r.ErrorMessage))
	}
	r := produce1(t, c, 9, "cmp", 0, keyless)
	if r.ErrorCode != kerr.InvalidRecord.Code || len(r.ErrorRecords) != 1 || r.ErrorRecords[0].RelativeOffset != 1 ||
		!strings.Contains(derefStr(r.ErrorMessage), "without key") {
		t.Fatalf("keyless record on a compacted topic: code %d, message %q, record errors %+v", r.ErrorCode, derefStr(r.ErrorMessage), r.ErrorRecords)
	}
	if r := produce1(t, c, 9, "del", 0, keyless); r.ErrorCode != 0 {
		t.Fatalf("keyless record on a delete topic: %d %s", r.ErrorCode, derefStr(r.ErrorMessage))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.SnappyCompression(), kgo.ZstdCompression()} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.ProducerBatchCompression(codec), kgo.RecordRetries(1))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "cmp", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
			t.Errorf("franz-go keyed record: %v", err)
		}
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: "cmp", Value: []byte("no key, compressible compressible compressible")}).FirstErr()
		if !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("franz-go keyless record on a compacted topic: %v, want INVALID_RECORD", err)
		}
		cl.Close()
	}
}
