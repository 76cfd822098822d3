package compacttest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type produced struct {
	value  []byte // nil: tombstone
	offset int64
}

func newClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(srv.KafkaAddr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func str(s string) *string { return &s }

// TestFranzCompactedTopic: franz-go produces keyed records (snappy and zstd
// batches, several records per batch), tombstones, a committed and an
// aborted transaction to a compacted topic; once the server's compaction
// has passed the end, a fresh consumer from offset 0 (read_uncommitted and
// read_committed) sees exactly the last record of each key with its
// original offset, tombstones included (delete.retention.ms is a day), and
// nothing of the aborted transaction. A second topic with
// delete.retention.ms=0 loses its tombstones.
func TestFranzCompactedTopic(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retention  string
		tombstones bool
	}{{"keep-tombstones", "86400000", true}, {"drop-tombstones", "0", false}} {
		t.Run(tc.name, func(t *testing.T) { runCompacted(t, tc.retention, tc.tombstones) })
	}
}

func runCompacted(t *testing.T, deleteRetention string, keepTombstones bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topic := uniqueName("compacted")
	adm := kadm.NewClient(newClient(t))
	resp, err := adm.CreateTopics(ctx, 2, 1, map[string]*string{
		"cleanup.policy": str("compact"), "segment.ms": str("100"), "min.compaction.lag.ms": str("0"),
		"delete.retention.ms": str(deleteRetention), "min.cleanable.dirty.ratio": str("0.01"),
	}, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}

	last := map[int32]map[string]produced{0: {}, 1: {}}
	total := 0
	record := func(r *kgo.Record) {
		total++
		last[r.Partition][string(r.Key)] = produced{value: r.Value, offset: r.Offset}
	}
	for i, codec := range []kgo.CompressionCodec{kgo.SnappyCompression(), kgo.ZstdCompression()} {
		p := newClient(t, kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(5*time.Millisecond),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var batch []*kgo.Record
		for round := 0; round < 4; round++ {
			for k := 0; k < 30; k++ {
				batch = append(batch, &kgo.Record{Topic: topic, Partition: int32(k % 2), Key: []byte(fmt.Sprintf("key-%02d", k)),
					Value: []byte(fmt.Sprintf("v-%d-%d-%d", i, round, k))})
			}
		}
		if i == 1 {
			for k := 0; k < 6; k++ { // tombstones
				batch = append(batch, &kgo.Record{Topic: topic, Partition: int32(k % 2), Key: []byte(fmt.Sprintf("key-%02d", k))})
			}
		}
		res := p.ProduceSync(ctx, batch...)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			record(r.Record)
		}
	}
	// Transactions: one committed, one aborted, on partition 0.
	tx := newClient(t, kgo.TransactionalID(uniqueName("txn")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, commit := range []bool{true, false} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for k := 10; k < 14; k += 2 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(fmt.Sprintf("key-%02d", k)),
				Value: []byte(fmt.Sprintf("txn-commit-%v", commit))})
		}
		res := tx.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		if commit {
			for _, r := range res {
				record(r.Record)
			}
		}
	}
	// A sentinel per partition: the consumer reads until it sees it.
	res := newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx,
		&kgo.Record{Topic: topic, Partition: 0, Key: []byte("sentinel"), Value: []byte("0")},
		&kgo.Record{Topic: topic, Partition: 1, Key: []byte("sentinel"), Value: []byte("1")})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		record(r.Record)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]map[string]produced{}
	for p, keys := range last {
		want[p] = map[string]produced{}
		for k, v := range keys {
			if v.value != nil || keepTombstones {
				want[p][k] = v
			}
		}
	}
	// The records seen by a fresh consumer converge on the model once
	// compaction has passed the end; each round is one full read.
	var got map[int32]map[string]produced
	var seen int
	ok := false
	for attempt := 0; attempt < 120 && !ok; attempt++ {
		for _, level := range []kgo.IsolationLevel{kgo.ReadUncommitted(), kgo.ReadCommitted()} {
			got, seen = consumeAll(t, ctx, topic, level)
			if ok = seen == len(want[0])+len(want[1]) && equal(got, want); !ok {
				break
			}
		}
		if !ok {
			time.Sleep(250 * time.Millisecond) // a compaction pass runs every 200 ms
		}
	}
	if !ok {
		for p := range want {
			for k, w := range want[p] {
				if g, ok := got[p][k]; !ok || g.offset != w.offset || string(g.value) != string(w.value) {
					t.Errorf("partition %d key %s: got %+v (present %v), want %+v", p, k, g, ok, w)
				}
			}
		}
		logCompaction(t)
		t.Fatalf("compacted view never converged: %d records seen, want %d keys", seen, len(want[0])+len(want[1]))
	}
	// The Java consumer (kafka-clients 4.1.1) reads the same view.
	// One JVM per subtest (CI time): read_uncommitted where tombstones
	// stay, read_committed where they go.
	if os.Getenv("NEREUS_SKIP_JAVA") == "" {
		level := "read_uncommitted"
		if !keepTombstones {
			level = "read_committed"
		}
		jgot, jn := javaCompactedRead(t, topic, 2, level)
		if jn != len(want[0])+len(want[1]) || !equal(jgot, want) {
			t.Fatalf("Java consumer (%s) saw %d records: %v, want %v", level, jn, jgot, want)
		}
	}
	t.Logf("a fresh consumer saw %d records (the last per key, original offsets); %d visible ones were produced to [0, %d)+[0, %d)",
		seen, total, ends[topic][0].Offset, ends[topic][1].Offset)
}

// consumeAll reads both partitions from offset 0 up to their sentinel
// record with a fresh consumer and returns the last record per key it saw
// and how many records it saw.
func consumeAll(t *testing.T, ctx context.Context, topic string, level kgo.IsolationLevel) (map[int32]map[string]produced, int) {
	t.Helper()
	cl := newClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0)}}),
		kgo.FetchIsolationLevel(level))
	defer cl.Close()
	got := map[int32]map[string]produced{0: {}, 1: {}}
	n := 0
	done := map[int32]bool{}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for len(done) < 2 {
		fs := cl.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatalf("consuming %s: %v (done %v)", topic, pctx.Err(), done)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if os.Getenv("COMPACT_DEBUG") != "" {
				t.Logf("p%d o%d %s=%q", r.Partition, r.Offset, r.Key, r.Value)
			}
			n++
			got[r.Partition][string(r.Key)] = produced{value: r.Value, offset: r.Offset}
			if string(r.Key) == "sentinel" {
				done[r.Partition] = true
			}
		})
	}
	return got, n
}

// logCompaction logs the server's compaction lines (for a failure).
func logCompaction(t *testing.T) {
	b, err := os.ReadFile(srv.LogPath())
	if err != nil {
		t.Log(err)
		return
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "compact") && n < 40 {
			t.Log(l)
			n++
		}
	}
}

func equal(a, b map[int32]map[string]produced) bool {
	for p := range b {
		if len(a[p]) != len(b[p]) {
			return false
		}
		for k, w := range b[p] {
			g, ok := a[p][k]
			if !ok || g.offset != w.offset || string(g.value) != string(w.value) || (g.value == nil) != (w.value == nil) {
				return false
			}
		}
	}
	return true
}
