// Package clustertest runs a cluster of real `nereus serve` processes on
// versitygw (S3) and a real etcd process, with real Kafka clients, through
// SIGKILL, a join and a graceful stop. Tests only.
package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testenv/etcdproc"
	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

// env is the shared services of one cluster: S3 bucket prefix and etcd
// key prefix, plus the nodes started on them.
type env struct {
	t     *testing.T
	args  []string
	envs  []string
	nodes []*testserver.Server
}

func newEnv(t *testing.T) *env {
	s3 := s3test.Require(t)
	cfg := s3.Config(s3.NewBucket(t))
	etcd := etcdproc.Start(t)
	return &env{t: t,
		args: []string{"--object-store", "s3://" + cfg.Bucket + "/cluster", "--s3-endpoint", cfg.Endpoint, "--s3-path-style",
			"--metadata", "etcd://" + etcd.Endpoint + "/nereus-cluster-test/"},
		envs: []string{"NEREUS_S3_ACCESS_KEY=" + cfg.AccessKeyID, "NEREUS_S3_SECRET_KEY=" + cfg.SecretAccessKey},
	}
}

func (e *env) start() *testserver.Server {
	e.t.Helper()
	s := testserver.Start(e.t, testserver.Options{Args: e.args, Env: e.envs})
	e.nodes = append(e.nodes, s)
	return s
}

// waitBrokers waits until node's view holds n active brokers.
func waitBrokers(t *testing.T, node *testserver.Server, n int) adminapi.ClusterStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := node.Client().ClusterStatus(ctx, 1)
		cancel()
		active := 0
		for _, b := range st.Brokers {
			if b.State == "active" {
				active++
			}
		}
		if err == nil && active == n && len(st.Brokers) == n {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never saw %d active brokers: %+v %v", node.URL(), n, st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type ack struct {
	partition int32
	offset    int64
	at        time.Time
}

// TestClusterSurvivesKillJoinAndStop: three nodes; franz-go idempotent
// producers on 12 partitions and a 3-member consumer group, and (on the
// same servers) pulsar-client-go producers with a Key_Shared and a
// two-consumer Failover subscription on a 6-partition topic, keep flowing
// while one node is SIGKILLed, a fourth joins and another stops
// gracefully. Afterwards every acknowledged Kafka record is in its
// partition exactly once, at the offset it was acknowledged with (offsets
// never move), in production order, and the group read every one; every
// acknowledged Pulsar message is stored once and delivered to both
// subscriptions, per key in order (pulsarFlow.finish). It logs the
// failover time (SIGKILL → first acknowledged produce on each partition
// the killed node led) and the graceful handoff pause.
func TestClusterSurvivesKillJoinAndStop(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test") // skip-ok: -short asks for quick tests only
	}
	e := newEnv(t)
	n1, n2, n3 := e.start(), e.start(), e.start()
	waitBrokers(t, n1, 3)
	seeds := []string{n1.KafkaAddr(), n2.KafkaAddr(), n3.KafkaAddr()}
	pf := startPulsarFlow(t, n2.URL(), "pulsar://"+n1.PulsarAddr()+","+n2.PulsarAddr()+","+n3.PulsarAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	const topic, partitions = "orders", 12
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	leadersOf := func() map[int32]int32 {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int32{}
		for _, p := range md.Topics[topic].Partitions {
			out[p.Partition] = p.Leader
		}
		return out
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) != 3 {
		t.Fatalf("metadata brokers %+v %v", md.Brokers, err)
	}
	ids := map[int32]bool{}
	for _, b := range md.Brokers {
		ids[b.NodeID] = true
	}
	if len(ids) != 3 {
		t.Fatalf("brokers do not have distinct ids: %+v", md.Brokers)
	}

	// Producer: idempotent (franz-go's default), acks=all, retries until
	// the record is acknowledged.
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordDeliveryTimeout(2*time.Minute), kgo.ProduceRequestTimeout(10*time.Second),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]ack{} // value -> where it was acknowledged
	var produceErrs []error
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		sem := make(chan struct{}, 64)
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				for i := 0; i < cap(sem); i++ {
					sem <- struct{}{}
				}
				return
			case sem <- struct{}{}:
			}
			v := strconv.Itoa(seq)
			prod.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer func() { <-sem }()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					produceErrs = append(produceErrs, err)
					return
				}
				acked[v] = ack{partition: r.Partition, offset: r.Offset, at: time.Now()}
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// A 3-member consumer group.
	type seen struct {
		partition int32
		offset    int64
	}
	consumed := map[string][]seen{}
	var cwg sync.WaitGroup
	cctx, ccancel := context.WithCancel(ctx)
	var consumers []*kgo.Client
	for i := 0; i < 3; i++ {
		c, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g1"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, c)
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for cctx.Err() == nil {
				fs := c.PollFetches(cctx)
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					consumed[string(r.Value)] = append(consumed[string(r.Value)], seen{r.Partition, r.Offset})
					mu.Unlock()
				})
			}
		}()
	}
	ackCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitAcks := func(n int) {
		deadline := time.Now().Add(90 * time.Second)
		for ackCount() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d acknowledged records (want %d)", ackCount(), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitAcks(500)
	pf.waitAcks(300)

	// 1. SIGKILL a node: its partitions fail over.
	before := leadersOf()
	t.Logf("leaders before the kill: %v", before)
	victim := n1
	victimID := brokerID(t, n1)
	killAt := time.Now()
	victim.Kill()
	t.Logf("SIGKILLed broker %d at %s", victimID, killAt.Format(time.StampMilli))
	base, pbase := ackCount(), pf.acks()
	waitAcks(base + 1000)
	pf.waitAcks(pbase + 300)
	t.Logf("pulsar: acknowledged sends resumed after the kill within %v", time.Since(killAt).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	mu.Lock()
	var failovers []time.Duration
	for p, l := range before {
		if l != victimID {
			continue
		}
		first := time.Time{}
		for _, a := range acked {
			if a.partition == p && a.at.After(killAt) && (first.IsZero() || a.at.Before(first)) {
				first = a.at
			}
		}
		if first.IsZero() {
			mu.Unlock()
			t.Fatalf("partition %d (led by the killed broker) got no acknowledged produce after the kill", p)
		}
		failovers = append(failovers, first.Sub(killAt))
	}
	mu.Unlock()
	sort.Slice(failovers, func(i, j int) bool { return failovers[i] < failovers[j] })
	t.Logf("FIGURE failover (SIGKILL -> first ack) on %d moved partitions: %v", len(failovers), failovers)

	// 2. A fourth node joins: some partitions move to it by handoff.
	n4 := e.start()
	waitBrokers(t, n2, 3)
	base, pbase = ackCount(), pf.acks()
	waitAcks(base + 1000)
	pf.waitAcks(pbase + 300)

	// 3. A graceful stop: its partitions are handed over.
	before = leadersOf()
	leaverID := brokerID(t, n2)
	stopAt := time.Now()
	n2.Stop()
	t.Logf("stopped broker %d gracefully in %v", leaverID, time.Since(stopAt).Round(time.Millisecond))
	base, pbase = ackCount(), pf.acks()
	waitAcks(base + 1000)
	pf.waitAcks(pbase + 300)
	time.Sleep(2 * time.Second)
	mu.Lock()
	var pauses []time.Duration
	for p, l := range before {
		if l != leaverID {
			continue
		}
		var times []time.Time
		for _, a := range acked {
			if a.partition == p {
				times = append(times, a.at)
			}
		}
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		var gap time.Duration
		for i := 1; i < len(times); i++ {
			if times[i].After(stopAt.Add(-time.Second)) && times[i].Sub(times[i-1]) > gap {
				gap = times[i].Sub(times[i-1])
			}
		}
		pauses = append(pauses, gap)
	}
	mu.Unlock()
	sort.Slice(pauses, func(i, j int) bool { return pauses[i] < pauses[j] })
	t.Logf("FIGURE graceful handoff pause (longest gap between acks) on %d moved partitions: %v", len(pauses), pauses)
	_ = n4

	close(stop)
	pwg.Wait()
	prod.Close()
	mu.Lock()
	if len(produceErrs) > 0 {
		t.Errorf("%d produces failed after all retries, first: %v", len(produceErrs), produceErrs[0])
	}
	total := len(acked)
	mu.Unlock()

	// The group reads everything acknowledged (at least once).
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		missing := 0
		for v := range acked {
			if len(consumed[v]) == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the consumer group never read %d of %d acknowledged records", missing, total)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ccancel()
	cwg.Wait()
	for _, c := range consumers {
		c.Close()
	}
	pf.finish() // the Pulsar side: stored once, delivered, per key in order

	// Verify the log: read every partition from the start through a
	// surviving node.
	log := readAll(t, ctx, []string{n3.KafkaAddr(), n4.KafkaAddr()}, topic, partitions)
	byValue := map[string]ack{}
	for p, recs := range log {
		last := -1
		for _, r := range recs {
			v := string(r.Value)
			if prev, dup := byValue[v]; dup {
				t.Fatalf("value %s twice: partition %d offset %d and partition %d offset %d", v, prev.partition, prev.offset, p, r.Offset)
			}
			byValue[v] = ack{partition: p, offset: r.Offset}
			n, _ := strconv.Atoi(v)
			if n < last {
				t.Fatalf("partition %d: value %d after %d (production order broken)", p, n, last)
			}
			last = n
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for v, a := range acked {
		got, ok := byValue[v]
		if !ok {
			t.Fatalf("acknowledged value %s (partition %d offset %d) is not in the log", v, a.partition, a.offset)
		}
		if got.partition != a.partition || got.offset != a.offset {
			t.Fatalf("value %s acknowledged at %d/%d, found at %d/%d", v, a.partition, a.offset, got.partition, got.offset)
		}
		for _, s := range consumed[v] {
			if s.partition != a.partition || s.offset != a.offset {
				t.Fatalf("value %s consumed at %d/%d, acknowledged at %d/%d", v, s.partition, s.offset, a.partition, a.offset)
			}
		}
	}
	t.Logf("%d acknowledged records verified (log holds %d)", total, len(byValue))
}

func brokerID(t *testing.T, s *testserver.Server) int32 {
	t.Helper()
	b, err := os.ReadFile(s.DataDir() + "/kafka-broker-id")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(string(b[:len(b)-1]))
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// readAll reads every record of topic from the start to the end offsets
// seen when it begins.
func readAll(t *testing.T, ctx context.Context, seeds []string, topic string, partitions int32) map[int32][]*kgo.Record {
	t.Helper()
	adminCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	ends, err := kadm.NewClient(adminCl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	offs := map[string]map[int32]kgo.Offset{topic: {}}
	for p := int32(0); p < partitions; p++ {
		offs[topic][p] = kgo.NewOffset().AtStart()
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(offs))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := map[int32][]*kgo.Record{}
	done := func() bool {
		for p := int32(0); p < partitions; p++ {
			recs := out[p]
			if want[p] > 0 && (len(recs) == 0 || recs[len(recs)-1].Offset < want[p]-1) {
				return false
			}
		}
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for !done() {
		fs := c.PollFetches(rctx)
		if err := rctx.Err(); err != nil {
			t.Fatalf("reading the log back: %v", err)
		}
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Logf("fetch error on partition %d: %v", p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { out[r.Partition] = append(out[r.Partition], r) })
	}
	_ = fmt.Sprint()
	return out
}
