package compat

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ownership records which member holds which partition, through the
// clients' assign/revoke callbacks, and fails on a partition held twice.
type ownership struct {
	t      *testing.T
	mu     sync.Mutex
	owner  map[int32]string
	counts map[string]int
}

func (o *ownership) assigned(name string) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, ps := range m {
			for _, p := range ps {
				if cur, ok := o.owner[p]; ok && cur != name {
					o.t.Errorf("partition %d assigned to %s while %s still owns it", p, name, cur)
				}
				o.owner[p] = name
				o.counts[name]++
			}
		}
	}
}

func (o *ownership) revoked(name string) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, ps := range m {
			for _, p := range ps {
				if o.owner[p] == name {
					delete(o.owner, p)
				}
			}
		}
	}
}

func (o *ownership) held(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, w := range o.owner {
		if w == name {
			n++
		}
	}
	return n
}

// TestFranz848IncrementalRebalance: kgo consumers in KIP-848 mode
// (ServerSideBalancer, the server's uniform assignor) share a 6-partition
// topic; a second and third member join and one leaves. The first member
// keeps partitions throughout (incremental, not stop-the-world), no
// partition is ever held by two members, ConsumerGroupDescribe reports a
// stable group, and every record is consumed.
func TestFranz848IncrementalRebalance(t *testing.T) {
	const partitions = 6
	topic, group := uniqueTopic("kip848"), uniqueTopic("kip848-group")
	adm := kadm.NewClient(newKgo(t))
	createTopic(t, adm, topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	own := &ownership{t: t, owner: map[int32]string{}, counts: map[string]int{}}
	seen := map[string]bool{}
	var seenMu sync.Mutex
	start := func(name string) (*kgo.Client, context.CancelFunc) {
		cl := newKgo(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.OnPartitionsAssigned(own.assigned(name)), kgo.OnPartitionsRevoked(own.revoked(name)),
			kgo.OnPartitionsLost(own.revoked(name)))
		pctx, pcancel := context.WithCancel(ctx)
		go func() {
			for pctx.Err() == nil {
				fs := cl.PollFetches(pctx)
				fs.EachRecord(func(r *kgo.Record) {
					seenMu.Lock()
					seen[string(r.Value)] = true
					seenMu.Unlock()
				})
			}
		}()
		return cl, pcancel
	}
	waitHeld := func(want map[string]int) {
		t.Helper()
		for {
			ok := true
			for n, w := range want {
				if own.held(n) != w {
					ok = false
				}
			}
			if ok {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("assignment never reached %v (owners %v)", want, own.owner)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	prod := newKgo(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 60)
	a, stopA := start("a")
	waitHeld(map[string]int{"a": 6})
	b, stopB := start("b")
	waitHeld(map[string]int{"a": 3, "b": 3})
	produce(60, 120)
	c, stopC := start("c")
	waitHeld(map[string]int{"a": 2, "b": 2, "c": 2})
	if own.counts["a"] != 6 {
		t.Fatalf("member a was assigned %d partitions in total: its partitions moved more than needed", own.counts["a"])
	}
	d, err := adm.DescribeConsumerGroups(ctx, group)
	if err == nil {
		if g := d[group]; g.State != "Stable" || len(g.Members) != 3 {
			t.Fatalf("described %s with %d members", g.State, len(g.Members))
		}
	} else {
		// kadm may not know ConsumerGroupDescribe; ask directly.
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, rerr := req.RequestWith(ctx, a)
		if rerr != nil || len(resp.Groups) != 1 || resp.Groups[0].State != "Stable" || len(resp.Groups[0].Members) != 3 {
			t.Fatalf("describe: %v / %+v", rerr, resp)
		}
	}
	stopB()
	b.Close() // leaves the group (epoch -1)
	waitHeld(map[string]int{"a": 3, "c": 3})
	produce(120, 180)
	for {
		seenMu.Lock()
		n := len(seen)
		seenMu.Unlock()
		if n == 180 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 180 distinct records", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopA()
	stopC()
	_ = c
	if n, ok := broker.RequestCount(68); ok && n == 0 {
		t.Fatal("no ConsumerGroupHeartbeat was sent: the clients did not run KIP-848")
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, prod)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || resp.Groups[0].AssignorName != "uniform" {
		t.Fatalf("ConsumerGroupDescribe: %v %+v", err, resp)
	}
}
