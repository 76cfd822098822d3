package compat

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzStaticMembershipRestart: two static members (KIP-345,
// kgo.InstanceID) share a topic; one closes and restarts with the same
// instance id within its session timeout. It gets its partitions back, the
// group's generation does not change and the other member sees no
// rebalance.
func TestFranzStaticMembershipRestart(t *testing.T) {
	topic, group := uniqueTopic("static"), uniqueTopic("static-group")
	adm := kadm.NewClient(newKgo(t))
	createTopic(t, adm, topic, 4, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	held := map[string][]int32{}
	events := map[string]int{}
	start := func(instance string) *kgo.Client {
		track := func(kind string) func(context.Context, *kgo.Client, map[string][]int32) {
			return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				if len(m[topic]) == 0 {
					return
				}
				events[instance]++
				if kind == "assigned" {
					held[instance] = append(held[instance], m[topic]...)
					return
				}
				var keep []int32
				for _, p := range held[instance] {
					revoked := false
					for _, r := range m[topic] {
						revoked = revoked || r == p
					}
					if !revoked {
						keep = append(keep, p)
					}
				}
				held[instance] = keep
			}
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(broker.Addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.InstanceID(instance), kgo.SessionTimeout(30*time.Second),
			kgo.OnPartitionsAssigned(track("assigned")), kgo.OnPartitionsRevoked(track("revoked")))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				fs := cl.PollFetches(pctx)
				pcancel()
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
			}
		}()
		return cl
	}
	owned := func(instance string) []int32 {
		mu.Lock()
		defer mu.Unlock()
		out := append([]int32(nil), held[instance]...)
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out
	}
	wait := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s (held %v)", what, held)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	a := start("instance-a")
	b := start("instance-b")
	defer b.Close()
	wait("2+2 partitions", func() bool { return len(owned("instance-a")) == 2 && len(owned("instance-b")) == 2 })
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	genBefore := fmt.Sprint(described[group].State, len(described[group].Members))
	before := owned("instance-a")
	mu.Lock()
	bEvents := events["instance-b"]
	mu.Unlock()

	a.Close() // a static member does not leave the group on close
	mu.Lock()
	held["instance-a"] = nil
	mu.Unlock()
	a2 := start("instance-a")
	defer a2.Close()
	wait("the restarted member's partitions", func() bool { return len(owned("instance-a")) == 2 })
	time.Sleep(2 * time.Second) // a rebalance, if any, would reach b now
	if got := owned("instance-a"); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("restarted member got %v, had %v", got, before)
	}
	mu.Lock()
	bAfter := events["instance-b"]
	mu.Unlock()
	if bAfter != bEvents {
		t.Fatalf("the other static member saw %d more assign/revoke callbacks: a rebalance happened", bAfter-bEvents)
	}
	described, err = adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if after := fmt.Sprint(described[group].State, len(described[group].Members)); after != genBefore {
		t.Fatalf("group %s after the restart, was %s", after, genBefore)
	}
	for _, m := range described[group].Members {
		if m.InstanceID == nil {
			t.Fatalf("member %s described without its instance id", m.MemberID)
		}
	}
}
