package clustertest

import (
	"context"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/internal/testserver"
	"github.com/nereusstream/nereus-go/kafka/kstore"
)

// proxy is a loopback TCP proxy in front of etcd that the test can
// black-hole: while it is, bytes in both directions are read and dropped
// (connections stay open, as on a partitioned network), and new
// connections are accepted but never forwarded.
type proxy struct {
	ln       net.Listener
	upstream string
	holed    atomic.Bool
	mu       sync.Mutex
	conns    []net.Conn
}

func newProxy(t *testing.T, upstream string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream}
	t.Cleanup(p.close)
	go p.accept()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go p.pipe(c, u)
		go p.pipe(u, c)
	}
}

// pipe copies src to dst unless black-holed (then bytes are dropped).
func (p *proxy) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.holed.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// TestMetadataPartitionIsolatesOneBroker: one node reaches etcd through a
// proxy the test black-holes. That node reports itself isolated within
// about its session TTL, its partitions move to the other nodes and
// producers keep going there; afterwards the log holds exactly the
// acknowledged records at their acknowledged offsets (nothing the
// partitioned node sent commits as a phantom). When the proxy heals, the
// node rejoins. (The isolated node's own /metrics is not used: collectors
// that read the metadata store make it hang while etcd is unreachable.)
func TestMetadataPartitionIsolatesOneBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test") // skip-ok: -short asks for quick tests only
	}
	e := newEnv(t)
	etcdArg := e.args[len(e.args)-1] // etcd://HOST:PORT/PREFIX
	hostPort := strings.TrimPrefix(etcdArg, "etcd://")
	hostPort = hostPort[:strings.IndexByte(hostPort, '/')]
	px := newProxy(t, hostPort)
	n1, n2 := e.start(), e.start()
	proxied := append([]string(nil), e.args...)
	proxied[len(proxied)-1] = strings.Replace(etcdArg, hostPort, px.addr(), 1)
	n3 := testserver.Start(t, testserver.Options{Args: proxied, Env: e.envs})
	st := waitBrokers(t, n1, 3)
	waitBrokers(t, n2, 3) // the admin client may ask either for metadata
	seeds := []string{n1.KafkaAddr(), n2.KafkaAddr(), n3.KafkaAddr()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(n1.KafkaAddr(), n2.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	// Placement is rendezvous hashing of the partition's stream name over
	// the (random) node IDs, so the topic name is chosen to give the node
	// to isolate some, but not all, of the partitions — the test always
	// runs, and checks the brokers agree with the prediction.
	isolatedID := brokerID(t, n3)
	const partitions = 6
	topic, onIsolated := topicPartlyLedBy(t, st, isolatedID, "partitioned", partitions)
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var leaderOfIsolated []int32
	for _, p := range md.Topics[topic].Partitions {
		if p.Leader == isolatedID {
			leaderOfIsolated = append(leaderOfIsolated, p.Partition)
		}
	}
	slices.Sort(leaderOfIsolated)
	if !slices.Equal(leaderOfIsolated, onIsolated) {
		t.Fatalf("node %d leads partitions %v of %s, rendezvous placement says %v", isolatedID, leaderOfIsolated, topic, onIsolated)
	}
	t.Logf("topic %s: node %d leads partitions %v", topic, isolatedID, onIsolated)

	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordDeliveryTimeout(3*time.Minute), kgo.ProduceRequestTimeout(10*time.Second),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]ack{}
	var produceErrs int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sem := make(chan struct{}, 32)
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
					produceErrs++
					return
				}
				acked[v] = ack{partition: r.Partition, offset: r.Offset, at: time.Now()}
			})
			time.Sleep(3 * time.Millisecond)
		}
	}()
	ackCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	for ackCount() < 300 {
		time.Sleep(50 * time.Millisecond)
	}

	const ttl = 4 * time.Second // the default --cluster-session-ttl
	px.holed.Store(true)
	holedAt := time.Now()
	t.Logf("black-holed node %d's path to etcd", isolatedID)
	// The node declares itself isolated within about its TTL (it probes
	// every TTL/4), and from then on commits nothing.
	// (Its log says so: /metrics and /v1/cluster may wait on the store.)
	deadline := time.Now().Add(3 * ttl)
	for {
		b, _ := os.ReadFile(n3.LogPath())
		if strings.Contains(string(b), "isolated from the metadata store") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not isolated %v after the partition", time.Since(holedAt))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("FIGURE node isolated itself %v after the partition (TTL %v)", time.Since(holedAt).Round(time.Millisecond), ttl)
	// Producers move to the new owners of the isolated node's partitions.
	moved := map[int32]bool{}
	deadline = time.Now().Add(60 * time.Second)
	for len(moved) < len(onIsolated) {
		mu.Lock()
		for _, a := range acked {
			for _, p := range onIsolated {
				if a.partition == p && a.at.After(holedAt) {
					moved[p] = true
				}
			}
		}
		mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d partitions of the isolated node took produces again", len(moved), len(onIsolated))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("FIGURE all %d partitions of the isolated node acknowledged produces again %v after the partition",
		len(onIsolated), time.Since(holedAt).Round(time.Millisecond))
	base := ackCount()
	for ackCount() < base+500 {
		time.Sleep(50 * time.Millisecond)
	}

	// Heal: the node registers again.
	px.holed.Store(false)
	waitBrokers(t, n1, 3)
	close(stop)
	wg.Wait()
	prod.Close()
	mu.Lock()
	total := len(acked)
	errs := produceErrs
	mu.Unlock()
	if errs > 0 {
		t.Errorf("%d produces failed after all retries", errs)
	}
	log := readAll(t, ctx, []string{n1.KafkaAddr(), n2.KafkaAddr()}, topic, partitions)
	inLog := 0
	mu.Lock()
	defer mu.Unlock()
	for p, recs := range log {
		for _, r := range recs {
			inLog++
			a, ok := acked[string(r.Value)]
			if !ok {
				t.Fatalf("record %q at %d/%d was never acknowledged", r.Value, p, r.Offset)
			}
			if a.partition != p || a.offset != r.Offset {
				t.Fatalf("record %q acknowledged at %d/%d, found at %d/%d", r.Value, a.partition, a.offset, p, r.Offset)
			}
		}
	}
	if inLog != total {
		t.Fatalf("log holds %d records, %d acknowledged", inLog, total)
	}
	t.Logf("%d acknowledged records, exactly the log", total)
}

// topicPartlyLedBy returns the first topic name prefix-0, prefix-1, ...
// whose partitions the broker with Kafka id kafkaID leads some but not all
// of, in the active brokers of st, and those partitions (ascending). It
// computes the placement the cluster does (cluster.Pick over the
// partitions' stream names), so the choice is a pure function of the node
// IDs; with n brokers a name fails with probability about
// (1-1/n)^partitions + (1/n)^partitions, so 200 names never all fail in
// practice.
func topicPartlyLedBy(t *testing.T, st adminapi.ClusterStatus, kafkaID int32, prefix string, partitions int32) (string, []int32) {
	t.Helper()
	var bs []cluster.Broker
	nodeID := ""
	for _, b := range st.Brokers {
		bs = append(bs, cluster.Broker{NodeID: b.NodeID, KafkaID: b.KafkaBrokerID, Weight: b.Weight, State: cluster.BrokerState(b.State)})
		if b.KafkaBrokerID == kafkaID {
			nodeID = b.NodeID
		}
	}
	if nodeID == "" {
		t.Fatalf("broker %d not in the cluster status %+v", kafkaID, st)
	}
	for i := 0; i < 200; i++ {
		topic := prefix + "-" + strconv.Itoa(i)
		var led []int32
		for p := int32(0); p < partitions; p++ {
			if b, ok := cluster.Pick(kstore.StreamName(topic, p), bs); ok && b.NodeID == nodeID {
				led = append(led, p)
			}
		}
		if len(led) > 0 && len(led) < int(partitions) {
			return topic, led
		}
	}
	t.Fatalf("no topic %s-N of %d partitions is partly led by broker %d", prefix, partitions, kafkaID)
	return "", nil
}
