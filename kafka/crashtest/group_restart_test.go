package crashtest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/internal/testserver"
)

// heartbeatCounter counts heartbeat requests (Heartbeat 12 or
// ConsumerGroupHeartbeat 68) a client wrote successfully.
type heartbeatCounter struct {
	key int16
	n   atomic.Int64
}

func (h *heartbeatCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == h.key && err == nil {
		h.n.Add(1)
	}
}

// TestKIP848GroupSurvivesRestart: two franz-go KIP-848 consumers
// (group.protocol=consumer, server-side uniform assignor) hold a stable
// group; the server is SIGKILLed and restarted on the same data. As with a
// Kafka broker, whose __consumer_offsets keeps the group, the restarted
// coordinator resumes the group: the members' heartbeats with their epochs
// are accepted, no partition is revoked, lost or assigned on either member,
// the group epoch and the member epochs are unchanged, and both members go
// on consuming (records produced after the restart are all read).
func TestKIP848GroupSurvivesRestart(t *testing.T) { groupSurvivesRestart(t, false) }

// TestClassicGroupSurvivesRestart is the same for a classic group (kgo's
// default cooperative-sticky balancer, JoinGroup/SyncGroup/Heartbeat): the
// stored Stable group is resumed, the members' heartbeats with their
// generation are accepted and nothing is rebalanced.
func TestClassicGroupSurvivesRestart(t *testing.T) { groupSurvivesRestart(t, true) }

func groupSurvivesRestart(t *testing.T, classic bool) {
	ts := testserver.Start(t, testserver.Options{DisablePulsar: true,
		Args: []string{"--kafka-consumer-heartbeat-interval", "300ms"}})
	addr := ts.KafkaAddr()
	const partitions = 6
	kind, hbKey := "kip848", int16(68)
	if classic {
		kind, hbKey = "classic", 12
	}
	topic := fmt.Sprintf("%s-restart-%d", kind, time.Now().UnixNano())
	group := topic + "-group"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	resp, err := kadm.NewClient(admCl).CreateTopics(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	held := map[string]map[int32]bool{}
	events := map[string][]string{} // callbacks after the crash
	crashed := false
	seen := map[string]bool{}
	note := func(name, what string, ps map[string][]int32) {
		mu.Lock()
		defer mu.Unlock()
		if held[name] == nil {
			held[name] = map[int32]bool{}
		}
		for _, p := range ps[topic] {
			if what == "assigned" {
				held[name][p] = true
			} else {
				delete(held[name], p)
			}
		}
		if crashed && len(ps[topic]) > 0 {
			events[name] = append(events[name], fmt.Sprint(what, ps[topic]))
		}
	}
	hbs := map[string]*heartbeatCounter{}
	start := func(name string) *kgo.Client {
		hbs[name] = &heartbeatCounter{key: hbKey}
		protocol := kgo.ServerSideBalancer()
		if classic {
			protocol = kgo.HeartbeatInterval(300 * time.Millisecond)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			protocol, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(hbs[name]),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { note(name, "assigned", ps) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { note(name, "revoked", ps) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { note(name, "lost", ps) }))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)] = true
					mu.Unlock()
				})
			}
		}()
		return cl
	}
	a := start("a")
	defer a.Close()
	b := start("b")
	defer b.Close()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: never (held %v, events %v)", what, held, events)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	describe := func() (kmsg.ConsumerGroupDescribeResponseGroup, error) {
		if classic {
			// The same shape from DescribeGroups: state and member ids
			// (a classic member has no epoch; the generation is not
			// described, the callbacks and heartbeats tell the rest).
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Groups = []string{group}
			resp, err := req.RequestWith(ctx, admCl)
			if err != nil {
				return kmsg.ConsumerGroupDescribeResponseGroup{}, err
			}
			if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
				return kmsg.ConsumerGroupDescribeResponseGroup{}, fmt.Errorf("describe: %+v", resp.Groups)
			}
			g := kmsg.ConsumerGroupDescribeResponseGroup{State: resp.Groups[0].State}
			for _, m := range resp.Groups[0].Members {
				g.Members = append(g.Members, kmsg.ConsumerGroupDescribeResponseGroupMember{MemberID: m.MemberID})
			}
			return g, nil
		}
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, admCl)
		if err != nil {
			return kmsg.ConsumerGroupDescribeResponseGroup{}, err
		}
		if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			return kmsg.ConsumerGroupDescribeResponseGroup{}, fmt.Errorf("describe: %+v", resp.Groups)
		}
		return resp.Groups[0], nil
	}
	// memberEpochs is "id:epoch" per member, sorted.
	memberEpochs := func(g kmsg.ConsumerGroupDescribeResponseGroup) []string {
		var out []string
		for _, m := range g.Members {
			out = append(out, fmt.Sprintf("%s:%d", m.MemberID, m.MemberEpoch))
		}
		sort.Strings(out)
		return out
	}
	var before kmsg.ConsumerGroupDescribeResponseGroup
	waitFor("a stable group of two with 3 partitions each", func() bool {
		mu.Lock()
		ok := len(held["a"]) == 3 && len(held["b"]) == 3
		mu.Unlock()
		if !ok {
			return false
		}
		g, err := describe()
		if err != nil || g.State != "Stable" || len(g.Members) != 2 {
			return false
		}
		before = g
		return true
	})
	t.Logf("before the crash: group epoch %d, members %v", before.Epoch, memberEpochs(before))

	mu.Lock()
	crashed = true
	mu.Unlock()
	t0 := time.Now()
	ts.Kill()
	ts.Restart()
	t.Logf("restarted in %v", time.Since(t0))
	hbA, hbB := hbs["a"].n.Load(), hbs["b"].n.Load()

	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 60
	for i := 0; i < n; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("produced %d records after the restart at %v", n, time.Since(t0))
	waitFor("every record produced after the restart consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	// Several heartbeats of each member reached the restarted server.
	waitFor("heartbeats of both members after the restart", func() bool {
		return hbs["a"].n.Load() >= hbA+5 && hbs["b"].n.Load() >= hbB+5
	})
	t.Logf("consumed and heartbeated at %v", time.Since(t0))
	after, err := describe()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart: group epoch %d, members %v", after.Epoch, memberEpochs(after))
	mu.Lock()
	defer mu.Unlock()
	if len(events["a"]) > 0 || len(events["b"]) > 0 {
		t.Fatalf("the restart moved partitions: %v", events)
	}
	if after.State != "Stable" || after.Epoch != before.Epoch || fmt.Sprint(memberEpochs(after)) != fmt.Sprint(memberEpochs(before)) {
		t.Fatalf("group after the restart %s epoch %d members %v; before: epoch %d members %v",
			after.State, after.Epoch, memberEpochs(after), before.Epoch, memberEpochs(before))
	}
}
