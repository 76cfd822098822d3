// Package adopttest checks, with two real `nereus serve` processes, that a
// node that dies for good does not leave its physical sources behind: the
// survivor adopts the dead node's Object WAL log and BookKeeper ledgers
// (--gc-adopt-after, --gc-adopt-scan-interval), deletes what retention
// freed in them, keeps what is still needed, and every acknowledged record
// retention keeps reads back. Shared stores: versitygw (S3) for objects,
// a real etcd for metadata, real bookies (bookkeeper/bktest) when there
// are any (the BookKeeper half skips without them, or fails under
// NEREUS_REQUIRE_EXTERNAL=1).
//
// It owns no product code and must never reach into the servers: it talks
// to the processes over their ports and looks at the bucket and at
// ZooKeeper from outside.
package adopttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/bookkeeper/bktest"
	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testenv/etcdproc"
	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
	"github.com/nereusstream/nereus-go/internal/testenv/zkledgers"
	"github.com/nereusstream/nereus-go/internal/testserver"
	"github.com/nereusstream/nereus-go/objectstore/s3store"
)

var bk bktest.Env

func TestMain(m *testing.M) { os.Exit(bk.Main(m)) }

// Settings of both nodes. Adoption after 2 s of absence, looked for every
// 500 ms; a node that stops answering leaves the cluster after 2 s; GC and
// retention passes every 500 ms / 1 s with a 1 s grace. Materialization is
// pushed out of the way (an hour, 1 GiB): the dead node's WAL sources stay
// the only copy of its runs, so adoption must keep the ones still needed.
var nodeArgs = []string{
	"--gc-adopt-after", "2s", "--gc-adopt-scan-interval", "500ms",
	"--cluster-session-ttl", "2s",
	"--gc-interval", "500ms", "--gc-grace", "1s", "--retention-interval", "1s",
	"--generation-max-age", "1h", "--generation-bytes", "1GiB",
}

// retentionMs is the retention.ms of the topics whose data retention
// frees. The dead node must not have freed it itself: the test kills it
// well before (and checks that it did).
const retentionMs = 8000

const partitions = 16 // so each topic surely has partitions on both nodes

// rec is one acknowledged record.
type rec struct {
	offset int64
	value  []byte
}

// TestDeadNodesSourcesAdopted: nodes A and B share a bucket and an etcd
// prefix. Through Kafka, topics of each WAL kind are written — first ones
// with retention.ms, then ones without retention — and A is SIGKILLed.
// B takes A's partitions over; once A has been gone for --gc-adopt-after,
// B adopts A's Object WAL log (and ledgers). Retention trims the first
// topics; B deletes the segments (ledgers) of A that held only their runs
// and keeps those with runs of the kept topics, which read back through B
// record for record. When the kept topics are deleted too, nothing of A's
// log segments or ledgers is left.
func TestDeadNodesSourcesAdopted(t *testing.T) {
	bin, err := s3test.FindBinary()
	if err != nil {
		testenv.SkipOrFail(t, "versitygw: %v", err)
	}
	gw, err := s3test.Start(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Stop() })
	cfg := gw.Config(gw.NewBucket(t))
	etcd := etcdproc.Start(t)
	args := append([]string{"--object-store", "s3://" + cfg.Bucket + "/cluster", "--s3-endpoint", cfg.Endpoint, "--s3-path-style",
		"--metadata", "etcd://" + etcd.Endpoint + "/nereus-adopt-test/"}, nodeArgs...)
	kinds := []string{"OBJECT_WAL_ASYNC_OBJECT"}
	if bk.ZK != "" {
		// BOOKKEEPER_WAL_ONLY: never materialized, so only retention (and
		// deletion) frees its ledgers; the idle seal lets B's own last
		// ledgers go too.
		args = append(args, "--bookkeeper-zk", bk.ZK, "--bookkeeper-root", bk.Root, "--bookkeeper-ledger-idle-seal", "1s")
		kinds = append(kinds, "BOOKKEEPER_WAL_ONLY")
	}
	envs := []string{"NEREUS_S3_ACCESS_KEY=" + cfg.AccessKeyID, "NEREUS_S3_SECRET_KEY=" + cfg.SecretAccessKey}
	a := testserver.Start(t, testserver.Options{Args: args, Env: envs, DisablePulsar: true})
	b := testserver.Start(t, testserver.Options{Args: args, Env: envs, DisablePulsar: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := waitBrokers(t, ctx, b, 2)
	var nodeA string
	var kafkaA int32 = -1
	for _, br := range st.Brokers {
		if br.KafkaBrokerID >= 0 && !br.Self {
			nodeA, kafkaA = br.NodeID, br.KafkaBrokerID
		}
	}
	if nodeA == "" {
		t.Fatalf("B's view has no other broker: %+v", st)
	}
	ctx2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	stA, err := a.Client().ClusterStatus(ctx2, 1)
	cancel2()
	if err != nil || stA.Self != nodeA {
		t.Fatalf("node A answers as %q (%v), B sees it as %q", stA.Self, err, nodeA)
	}
	objs, err := s3store.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	segsOfA := func() int {
		n := 0
		for _, err := range objs.List(ctx, "cluster/wal/"+nodeA+"/seg/") {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}

	seeds := kgo.SeedBrokers(a.KafkaAddr(), b.KafkaAddr())
	admin, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	var retTopics, keepTopics []string
	for _, kind := range kinds {
		short := strings.ToLower(strings.ReplaceAll(kind, "_", ""))
		ret, keep := "ret-"+short, "keep-"+short
		createTopic(t, ctx, adm, ret, map[string]string{"nereus.storage.profile": kind, "retention.ms": strconv.Itoa(retentionMs)})
		createTopic(t, ctx, adm, keep, map[string]string{"nereus.storage.profile": kind})
		retTopics, keepTopics = append(retTopics, ret), append(keepTopics, keep)
	}
	prod, err := kgo.NewClient(seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	rnd := rand.New(rand.NewSource(1))
	// The retention topics first, then the kept ones, in two rounds: the
	// Object WAL's segments of one round hold no run of the other, so some
	// of A's segments hold only runs retention frees.
	produce(t, ctx, prod, rnd, retTopics)
	retWritten := time.Now()
	acked := produce(t, ctx, prod, rnd, keepTopics)

	// Which partitions A leads: their runs are in A's log and ledgers.
	md, err := adm.Metadata(ctx, append(append([]string(nil), retTopics...), keepTopics...)...)
	if err != nil {
		t.Fatal(err)
	}
	onA := map[string][]string{} // topic -> stream IDs of the partitions A leads
	var bkOnA []string
	for topic, td := range md.Topics {
		for _, p := range td.Partitions {
			if p.Leader != kafkaA {
				continue
			}
			info, err := b.Client().DescribeStream(ctx, "kafka/"+topic+"/"+strconv.Itoa(int(p.Partition)))
			if err != nil {
				t.Fatal(err)
			}
			onA[topic] = append(onA[topic], info.ID)
			if strings.Contains(topic, "bookkeeper") {
				bkOnA = append(bkOnA, info.ID)
			}
		}
	}
	for _, topic := range append(append([]string(nil), retTopics...), keepTopics...) {
		if len(onA[topic]) == 0 || len(onA[topic]) == partitions {
			t.Fatalf("topic %s: A leads %d of %d partitions; the test needs partitions on both nodes", topic, len(onA[topic]), partitions)
		}
	}
	segsBefore := segsOfA()
	if segsBefore == 0 {
		t.Fatal("node A wrote no Object WAL segment")
	}
	var zkl *zkledgers.Counter
	ledgersBefore := 0
	if len(bkOnA) > 0 {
		zkl = zkledgers.Dial(t, bk.ZK, bk.Root)
		ledgersBefore = zkl.Total(t, bkOnA...)
		if ledgersBefore == 0 {
			t.Fatal("node A's BookKeeper partitions have no ledger in ZooKeeper")
		}
	}
	if gs := gcStatus(t, ctx, b); gs.Stats.Adoptions != 0 {
		t.Fatalf("B adopted %d writers while A is alive (%v)", gs.Stats.Adoptions, gs.Adopting)
	}
	// A must not have freed anything itself: nothing is old enough for
	// retention yet.
	if since := time.Since(retWritten); since > retentionMs*time.Millisecond*3/4 {
		t.Fatalf("the writes took too long (%s since the retention topics were written): A may have applied retention itself", since)
	}

	// A dies for good.
	a.Kill()
	killed := time.Now()
	t.Logf("node A (%s, Kafka broker %d) SIGKILLed: %d segments in its log, %d ledgers of its BookKeeper partitions, %s after the retention topics were written",
		nodeA, kafkaA, segsBefore, ledgersBefore, killed.Sub(retWritten).Round(time.Millisecond))

	// B adopts A's log (and ledgers) once A has been gone for 2 s.
	gs := waitGC(t, ctx, b, "adopting node A's sources", func(s adminapi.GCStatus) bool {
		want := int64(1)
		if len(bkOnA) > 0 {
			want = 2
		}
		return s.Stats.Adoptions >= want
	})
	adopted := time.Since(killed)
	t.Logf("B adopted %d source sets %s after the SIGKILL: %v", gs.Stats.Adoptions, adopted.Round(100*time.Millisecond), gs.Adopting)
	if v := metric(t, b, "nereus_gc_adoptions_total"); v < 1 {
		t.Fatalf("/metrics nereus_gc_adoptions_total = %v after the adoption", v)
	}

	// Retention trims the retention topics (on B, which owns every
	// partition now) to empty, nothing lost at the end.
	for _, topic := range retTopics {
		for p := 0; p < partitions; p++ {
			name := "kafka/" + topic + "/" + strconv.Itoa(p)
			waitStream(t, ctx, b, name, "trimmed to empty by retention.ms", func(in adminapi.StreamInfo) bool {
				return in.EndOffset > 0 && in.StartOffset == in.EndOffset
			})
		}
	}
	// B deletes the segments of A that held only runs of the retention
	// topics, and A's ledgers of their partitions.
	deadline := time.Now().Add(time.Minute)
	for {
		segs := segsOfA()
		ledgers := 0
		if zkl != nil {
			ledgers = zkl.Total(t, idsOf(onA, retTopics)...)
		}
		if segs < segsBefore && ledgers == 0 {
			t.Logf("%s after the SIGKILL: %d of A's %d segments left, 0 ledgers of A's retention partitions", time.Since(killed).Round(100*time.Millisecond), segs, segsBefore)
			break
		}
		if time.Now().After(deadline) {
			gs := gcStatus(t, ctx, b)
			t.Fatalf("A's sources freed by retention not reclaimed within 1m: %d of %d segments left, %d ledgers; adopting %v; pending %+v",
				segs, segsBefore, ledgers, gs.Adopting, gs.Pending)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Still needed: the kept topics' runs in A's segments and ledgers.
	// More GC passes must not take them.
	passes := gcStatus(t, ctx, b).Stats.Passes
	waitGC(t, ctx, b, "four more GC passes", func(s adminapi.GCStatus) bool { return s.Stats.Passes >= passes+4 })
	keptSegs := segsOfA()
	if keptSegs == 0 {
		t.Fatal("every segment of A deleted although the kept topics' runs in it are still needed")
	}
	if zkl != nil {
		if n := zkl.Total(t, idsOf(onA, keepTopics)...); n == 0 {
			t.Fatal("A's ledgers of the kept BookKeeper partitions deleted although still needed")
		}
	}
	// Every acknowledged record of the kept topics reads back through B.
	for _, topic := range keepTopics {
		got := consume(t, ctx, b, topic, acked[topic])
		for p := 0; p < partitions; p++ {
			same(t, fmt.Sprintf("%s/%d", topic, p), acked[topic][p], got[p])
		}
	}
	t.Logf("kept topics read back through B (%d of A's segments kept for them)", keptSegs)

	// The kept topics deleted too: nothing of A's segments or ledgers is
	// left.
	resp, err := kadm.NewClient(kgoClient(t, b)).DeleteTopics(ctx, keepTopics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute)
	for {
		segs := segsOfA()
		ledgers := 0
		if zkl != nil {
			ledgers = zkl.Total(t, bkOnA...)
		}
		if segs == 0 && ledgers == 0 {
			break
		}
		if time.Now().After(deadline) {
			gs := gcStatus(t, ctx, b)
			t.Fatalf("after deleting the kept topics: %d of A's segments, %d of its ledgers left; adopting %v; pending %+v",
				segs, ledgers, gs.Adopting, gs.Pending)
		}
		time.Sleep(250 * time.Millisecond)
	}
	gs = gcStatus(t, ctx, b)
	t.Logf("%s after the SIGKILL nothing of A's log segments or ledgers is left; B deleted %d segments and %d ledgers in all (its own included)",
		time.Since(killed).Round(100*time.Millisecond), gs.Stats.DeletedSegments, gs.Stats.DeletedLedgers)
	if bk.ZK == "" {
		bk.Require(t) // skips (or fails) after the Object WAL half ran
	}
}

// metric is the value of an unlabelled metric on s's /metrics.
func metric(t *testing.T, s *testserver.Server, name string) float64 {
	t.Helper()
	resp, err := http.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("/metrics %q: %v", l, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

func idsOf(onA map[string][]string, topics []string) []string {
	var out []string
	for _, topic := range topics {
		out = append(out, onA[topic]...)
	}
	return out
}

func createTopic(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := adm.CreateTopics(ctx, partitions, 1, cfg, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("create topic %s %v: %v", topic, configs, err)
	}
}

// produce writes 20 records (256 B .. 2 KiB, incompressible) to every
// partition of every topic at once and returns them as acknowledged, per
// topic and partition in offset order.
func produce(t *testing.T, ctx context.Context, cl *kgo.Client, rnd *rand.Rand, topics []string) map[string][][]rec {
	t.Helper()
	var batch []*kgo.Record
	for _, topic := range topics {
		for p := int32(0); p < partitions; p++ {
			for i := 0; i < 20; i++ {
				v := make([]byte, 256+rnd.Intn(2048-256))
				rnd.Read(v)
				batch = append(batch, &kgo.Record{Topic: topic, Partition: p, Value: v})
			}
		}
	}
	res := cl.ProduceSync(ctx, batch...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	out := map[string][][]rec{}
	for _, topic := range topics {
		out[topic] = make([][]rec, partitions)
	}
	for _, r := range res {
		out[r.Record.Topic][r.Record.Partition] = append(out[r.Record.Topic][r.Record.Partition], rec{offset: r.Record.Offset, value: r.Record.Value})
	}
	return out
}

func kgoClient(t *testing.T, s *testserver.Server, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.KafkaAddr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consume reads every partition of topic from offset 0 through s until
// each reached the end of want.
func consume(t *testing.T, ctx context.Context, s *testserver.Server, topic string, want [][]rec) [][]*kgo.Record {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p := range want {
		offs[int32(p)] = kgo.NewOffset().At(0)
	}
	cl := kgoClient(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	got := make([][]*kgo.Record, len(want))
	done := func() bool {
		for p, w := range want {
			if n := len(got[p]); len(w) > 0 && (n == 0 || got[p][n-1].Offset < w[len(w)-1].offset) {
				return false
			}
		}
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !done() {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("consume %s: timed out", topic)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("consume %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r) })
	}
	return got
}

// same checks that got is exactly want: offsets and bytes.
func same(t *testing.T, what string, want []rec, got []*kgo.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: read %d records, %d acknowledged", what, len(got), len(want))
	}
	for i, w := range want {
		if got[i].Offset != w.offset || !bytes.Equal(got[i].Value, w.value) {
			t.Fatalf("%s: record %d: read offset %d (%d bytes), acknowledged offset %d (%d bytes)",
				what, i, got[i].Offset, len(got[i].Value), w.offset, len(w.value))
		}
	}
}

// waitBrokers waits until s's view holds n active brokers.
func waitBrokers(t *testing.T, ctx context.Context, s *testserver.Server, n int) adminapi.ClusterStatus {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := s.Client().ClusterStatus(cctx, 1)
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
			t.Fatalf("%s never saw %d active brokers: %+v %v", s.URL(), n, st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func gcStatus(t *testing.T, ctx context.Context, s *testserver.Server) adminapi.GCStatus {
	t.Helper()
	gs, err := s.Client().GCStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

// waitGC polls GET /v1/gc until ok accepts it.
func waitGC(t *testing.T, ctx context.Context, s *testserver.Server, what string, ok func(adminapi.GCStatus) bool) adminapi.GCStatus {
	t.Helper()
	var last adminapi.GCStatus
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		gs, err := s.Client().GCStatus(ctx)
		if err == nil && ok(gs) {
			return gs
		}
		last = gs
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GC not %s within 1m: stats %+v adopting %v", what, last.Stats, last.Adopting)
	return last
}

// waitStream polls the stream's description until ok accepts it.
func waitStream(t *testing.T, ctx context.Context, s *testserver.Server, name, what string, ok func(adminapi.StreamInfo) bool) {
	t.Helper()
	var last adminapi.StreamInfo
	var lastErr error
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		in, err := s.Client().DescribeStream(ctx, name)
		if err == nil && ok(in) {
			return
		}
		last, lastErr = in, err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("stream %s not %s within 1m: %+v (%v)", name, what, last, lastErr)
}
