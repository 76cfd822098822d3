package compat

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFranzAdminTools: what Kafka's admin tools ask for, through kadm and
// raw kmsg requests: internal topics listed with is_internal (and not
// writable), DescribeCluster, DescribeTopicPartitions with pagination,
// DescribeLogDirs sizes from the streams, ElectLeaders and
// ListPartitionReassignments for shared storage.
func TestFranzAdminTools(t *testing.T) {
	cl := newKgo(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := uniqueTopic("tools")
	createTopic(t, adm, topic, 5, nil)

	// Internal topics.
	tds, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range []string{"__consumer_offsets", "__transaction_state"} {
		if td, ok := tds[it]; !ok || !td.IsInternal {
			t.Fatalf("%s: listed %v, internal %v", it, ok, td.IsInternal)
		}
	}
	if td := tds[topic]; td.IsInternal {
		t.Fatal("a user topic is flagged internal")
	}
	if nonInternal, _ := adm.ListTopics(ctx); nonInternal.Has("__consumer_offsets") {
		t.Fatal("kadm.ListTopics (internal excluded) lists __consumer_offsets")
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "__consumer_offsets", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to __consumer_offsets: %v", err)
	}

	// Some data so sizes are not zero.
	for p := int32(0); p < 5; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: randomBytes(1000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// DescribeCluster.
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.EndpointType = 1
	dcr, err := dc.RequestWith(ctx, cl)
	if err != nil || dcr.ErrorCode != 0 || len(dcr.Brokers) != 1 || dcr.ClusterID == "" || dcr.ControllerID != dcr.Brokers[0].NodeID {
		t.Fatalf("DescribeCluster %+v %v", dcr, err)
	}
	if h, _, err := net.SplitHostPort(broker.Addr); err == nil && dcr.Brokers[0].Host != h {
		t.Fatalf("DescribeCluster host %s, dialled %s", dcr.Brokers[0].Host, h)
	}

	// DescribeTopicPartitions, two partitions per page.
	var got []int32
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for page := 0; ; page++ {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = topic
		req.Topics = append(req.Topics, rt)
		req.ResponsePartitionLimit = 2
		req.Cursor = cursor
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("DescribeTopicPartitions page %d: %+v %v", page, resp, err)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.LeaderID != dcr.Brokers[0].NodeID {
				t.Fatalf("partition %d leader %d", p.Partition, p.LeaderID)
			}
			got = append(got, p.Partition)
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
		if page > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Fatalf("paginated partitions %v", got)
	}

	// DescribeLogDirs: each partition's size is its retained bytes.
	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}, 3: {}, 4: {}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == topic {
				n++
				if p.Size < 1000 {
					t.Errorf("partition %d size %d, want >= 1000 (one incompressible record)", p.Partition, p.Size)
				}
			}
		})
	})
	if n != 5 {
		t.Fatalf("log dirs describe %d partitions of %s", n, topic)
	}

	// ElectLeaders: nothing to elect on shared storage.
	el, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := el[topic][0]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Fatalf("elect leaders: %+v", r)
	}
	ras, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil || len(ras) != 0 {
		t.Fatalf("reassignments %+v %v", ras, err)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

type throttleHook struct{ n, maxMs atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
		if ms := d.Milliseconds(); ms > h.maxMs.Load() {
			h.maxMs.Store(ms)
		}
	}
}

// TestFranzClientQuotas: AlterClientQuotas / DescribeClientQuotas store
// byte-rate quotas per client id; a producer and a consumer over their
// quotas get throttle_time_ms (kgo's throttle hook sees it), while another
// client id is not throttled.
func TestFranzClientQuotas(t *testing.T) {
	adm := kadm.NewClient(newKgo(t))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topic := uniqueTopic("quota")
	createTopic(t, adm, topic, 1, nil)
	slowP, slowC := uniqueTopic("slow-producer"), uniqueTopic("slow-consumer")
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &slowP}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 5000}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &slowC}}, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 5000}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "no_such_quota", Value: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err != nil || !errors.Is(res[2].Err, kerr.InvalidRequest) {
		t.Fatalf("alter results %+v", res)
	}
	desc, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: &slowP, MatchType: 0}})
	if err != nil || len(desc) != 1 || len(desc[0].Values) != 1 || desc[0].Values[0].Value != 5000 {
		t.Fatalf("describe %+v %v", desc, err)
	}
	defer func() {
		_, _ = adm.AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{
			{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &slowP}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
			{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &slowC}}, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Remove: true}}},
		})
	}()

	var fast throttleHook
	fastCl := newKgo(t, kgo.ClientID(uniqueTopic("fast")), kgo.DefaultProduceTopic(topic), kgo.WithHooks(&fast))
	var prodHook throttleHook
	prod := newKgo(t, kgo.ClientID(slowP), kgo.DefaultProduceTopic(topic), kgo.WithHooks(&prodHook))
	// 5000 B/s over a 10 s window: 80 KB is well over.
	for i := 0; i < 8; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: randomBytes(10000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := fastCl.ProduceSync(ctx, &kgo.Record{Value: randomBytes(10000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if prodHook.n.Load() > 0 {
			break
		}
	}
	if prodHook.n.Load() == 0 {
		t.Fatal("the producer over its quota was never throttled")
	}
	prod.Close()

	var consHook throttleHook
	cons := newKgo(t, kgo.ClientID(slowC), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxPartitionBytes(12000), kgo.FetchMaxBytes(12000), kgo.WithHooks(&consHook))
	records := 0
	for consHook.n.Load() == 0 {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cons.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatalf("the consumer over its quota was never throttled (%d records read)", records)
		}
		records += fs.NumRecords()
	}
	if records == 0 {
		t.Fatal("nothing was read before the throttle")
	}
	if fast.n.Load() != 0 {
		t.Fatalf("a client without a quota was throttled %d times", fast.n.Load())
	}
	t.Logf("producer throttled up to %d ms, consumer up to %d ms after %d records", prodHook.maxMs.Load(), consHook.maxMs.Load(), records)
}

// TestFranzOffsetDelete: kadm.DeleteOffsets removes an empty group's
// committed offsets of the named partitions and keeps the others; a group
// with a live member refuses with GROUP_SUBSCRIBED_TO_TOPIC.
func TestFranzOffsetDelete(t *testing.T) {
	adm := kadm.NewClient(newKgo(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic, group := uniqueTopic("offdel"), uniqueTopic("offdel-group")
	createTopic(t, adm, topic, 2, nil)
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 5, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: topic, Partition: 1, At: 7, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, group, offs); err != nil {
		t.Fatal(err)
	}
	res, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}})
	if err != nil || res.Error() != nil {
		t.Fatalf("delete offsets: %v %v", res, err)
	}
	got, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup(topic, 0); ok && o.At >= 0 {
		t.Fatalf("partition 0 offset still %d", o.At)
	}
	if o, ok := got.Lookup(topic, 1); !ok || o.At != 7 {
		t.Fatalf("partition 1 offset %+v", o)
	}
	if _, err := adm.DeleteOffsets(ctx, uniqueTopic("no-such-group"), kadm.TopicsSet{topic: {0: {}}}); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("unknown group: %v", err)
	}
	// A live member: refused.
	cons := newKgo(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic))
	for {
		if d, err := adm.DescribeGroups(ctx, group); err == nil && d[group].State == "Stable" {
			break
		}
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		cons.PollFetches(pctx) // joins in the background
		pcancel()
		if ctx.Err() != nil {
			t.Fatal("group never became stable")
		}
	}
	res, err = adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[topic][1]; !errors.Is(r, kerr.GroupSubscribedToTopic) {
		t.Fatalf("live group: %v", r)
	}
}
