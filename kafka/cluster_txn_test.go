package kafka

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// TestTransactionsAcrossTwoBrokers: two brokers in one cluster (shared
// metadata store and WAL, each with its own core and cluster node), a
// transactional producer whose partitions are led by both brokers and
// whose coordinator is one of them. Markers for the other broker's
// partitions go through marker requests, its produce verification reads
// the coordinator's record; read_committed sees exactly the committed
// transactions.
func TestTransactionsAcrossTwoBrokers(t *testing.T) {
	meta := memstore.New()
	prov := memprovider.New(1, memprovider.Faults{})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var addrs []string
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		id := fmt.Sprintf("node-%d", i)
		core, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: prov, WriterID: id})
		if err != nil {
			t.Fatal(err)
		}
		kid, err := cluster.ClaimKafkaBrokerID(ctx, meta, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		node, err := cluster.Join(ctx, cluster.Config{Metadata: meta, Storage: core, NodeID: id, KafkaBrokerID: kid,
			HandoffWait: 20 * time.Second, Logger: quiet, Endpoints: []cluster.Endpoint{{Protocol: cluster.ProtocolKafka, Listener: "PLAINTEXT", Host: "127.0.0.1", Port: port}}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		srv, err := NewServer(Config{Cluster: node, NodeID: kid, WriterID: id, Logger: quiet, MinSessionTimeout: 100 * time.Millisecond}, core, meta)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
			_ = node.Close()
			_ = core.Close()
		})
		addrs = append(addrs, ln.Addr().String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	for {
		if bs, err := adm.ListBrokers(ctx); err == nil && len(bs) == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the two brokers never saw each other")
		}
		time.Sleep(50 * time.Millisecond)
	}
	const topic, partitions = "xtxn", 8
	if _, err := adm.CreateTopics(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// Both brokers lead some of the partitions.
	leaders := map[int32]bool{}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			for _, p := range md.Topics[topic].Partitions {
				leaders[p.Leader] = true
			}
		}
		if len(leaders) == 2 || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(leaders) != 2 {
		t.Fatalf("partition leaders %v: need both brokers", leaders)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID("xtxn-producer"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	want := map[string]bool{}
	for round := 0; round < 6; round++ {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		commit := round != 2
		for i := 0; i < partitions; i++ {
			v := fmt.Sprintf("%d-%d", round, i)
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("round %d produce: %v", round, err)
			}
			if commit {
				want[v] = true
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("round %d end: %v", round, err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]int{}
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records", len(got), len(want))
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)]++ })
	}
	for v, n := range got {
		if !want[v] || n != 1 {
			t.Fatalf("%s read %d times (committed %v)", v, n, want[v])
		}
	}
}
