package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

func TestRendezvousBalancedAndMinimal(t *testing.T) {
	mk := func(n int) []Broker {
		var bs []Broker
		for i := 0; i < n; i++ {
			bs = append(bs, Broker{NodeID: fmt.Sprintf("nereus-%016x", i*7919+13), KafkaID: int32(i + 1), State: StateActive, Weight: 1})
		}
		return bs
	}
	three, four := mk(3), mk(4)
	const keys = 12000
	count := map[string]int{}
	moved, movedToNew := 0, 0
	for k := 0; k < keys; k++ {
		key := "kafka/orders/" + strconv.Itoa(k)
		a := three[pick(key, three, "")].NodeID
		b := four[pick(key, four, "")].NodeID
		count[a]++
		if a != b {
			moved++
			if b == four[3].NodeID {
				movedToNew++
			}
		}
	}
	for id, c := range count {
		if c < keys/3*8/10 || c > keys/3*12/10 {
			t.Errorf("broker %s owns %d of %d keys, want about %d", id, c, keys, keys/3)
		}
	}
	// Joining moves only keys to the new broker, about a quarter of them.
	if moved != movedToNew {
		t.Errorf("%d keys moved, only %d to the new broker", moved, movedToNew)
	}
	if moved < keys/4*8/10 || moved > keys/4*12/10 {
		t.Errorf("%d keys moved on join, want about %d", moved, keys/4)
	}
	// Weights scale the share.
	heavy := mk(2)
	heavy[1].Weight = 3
	n1 := 0
	for k := 0; k < keys; k++ {
		if pick("k"+strconv.Itoa(k), heavy, "") == 1 {
			n1++
		}
	}
	if n1 < keys*3/4*9/10 || n1 > keys*3/4*11/10 {
		t.Errorf("weight-3 broker owns %d of %d, want about %d", n1, keys, keys*3/4)
	}
	// Draining and excluded brokers are never chosen.
	four[2].State = StateDraining
	for k := 0; k < 1000; k++ {
		if i := pick("x"+strconv.Itoa(k), four, four[0].NodeID); i == 0 || i == 2 {
			t.Fatalf("picked excluded or draining broker %d", i)
		}
	}
}

func TestClaimKafkaBrokerID(t *testing.T) {
	ctx := context.Background()
	meta := memstore.New()
	defer meta.Close()
	for i, node := range []string{"a", "b", "c"} {
		id, err := ClaimKafkaBrokerID(ctx, meta, node, 0)
		if err != nil || id != int32(i+1) {
			t.Fatalf("claim for %s: %d, %v; want %d", node, id, err, i+1)
		}
	}
	if id, err := ClaimKafkaBrokerID(ctx, meta, "b", 2); err != nil || id != 2 {
		t.Fatalf("re-claim own id: %d, %v", id, err)
	}
	if _, err := ClaimKafkaBrokerID(ctx, meta, "d", 2); !errors.Is(err, ErrBrokerIDTaken) {
		t.Fatalf("claim of a taken id: %v, want ErrBrokerIDTaken", err)
	}
	if id, err := ClaimKafkaBrokerID(ctx, meta, "d", 7); err != nil || id != 7 {
		t.Fatalf("explicit id: %d, %v", id, err)
	}
	if id, err := ClaimKafkaBrokerID(ctx, meta, "e", 0); err != nil || id != 4 {
		t.Fatalf("next allocated id: %d, %v; want 4", id, err)
	}
}

func TestRecordChecksum(t *testing.T) {
	b := Broker{V: 1, NodeID: "n", KafkaID: 3, State: StateActive, Endpoints: []Endpoint{{Protocol: "kafka", Listener: "PLAINTEXT", Host: "h", Port: 1}}}
	raw, err := encodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBroker(raw)
	if err != nil || got.NodeID != "n" || got.Weight != 1 || got.Endpoints[0].Addr() != "h:1" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	raw[len(raw)-2] ^= 1
	if _, err := decodeBroker(raw); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("corrupt record decoded: %v", err)
	}
}

// testNode is one simulated process: its own core over the shared
// metadata store and WAL provider, and its cluster node.
type testNode struct {
	id   string
	core *stream.Core
	node *Node
}

type testCluster struct {
	t     *testing.T
	meta  *memstore.Store
	prov  *memprovider.Provider
	nodes map[string]*testNode
}

func newTestCluster(t *testing.T) *testCluster {
	tc := &testCluster{t: t, meta: memstore.New(), prov: memprovider.New(1, memprovider.Faults{}), nodes: map[string]*testNode{}}
	t.Cleanup(func() {
		for _, n := range tc.nodes {
			_ = n.node.Close()
			_ = n.core.Close()
		}
		_ = tc.meta.Close()
	})
	return tc
}

func (tc *testCluster) start(id string, ttl time.Duration) *testNode {
	tc.t.Helper()
	return tc.startWith(id, ttl, nil)
}

// startWith starts a node advertising eps (nil: an address nothing
// listens at, which the peer watch never connects to).
func (tc *testCluster) startWith(id string, ttl time.Duration, eps []Endpoint) *testNode {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	core, err := stream.Open(ctx, stream.Config{Metadata: tc.meta, ObjectWAL: tc.prov, WriterID: id})
	if err != nil {
		tc.t.Fatal(err)
	}
	kid, err := ClaimKafkaBrokerID(ctx, tc.meta, id, 0)
	if err != nil {
		tc.t.Fatal(err)
	}
	if eps == nil {
		eps = []Endpoint{{Protocol: ProtocolKafka, Listener: "PLAINTEXT", Host: "127.0.0.1", Port: 9000 + int(kid)}}
	}
	n, err := Join(ctx, Config{Metadata: tc.meta, Storage: core, NodeID: id, KafkaBrokerID: kid, SessionTTL: ttl,
		HandoffWait: 20 * time.Second, Endpoints: eps})
	if err != nil {
		tc.t.Fatal(err)
	}
	tn := &testNode{id: id, core: core, node: n}
	tc.nodes[id] = tn
	return tn
}

// crash stops a node's registry membership as SIGKILL would: no release,
// no deregistration, its registry session expires after its TTL. Its core
// keeps running (closing it would close the shared WAL provider) and keeps
// renewing its stream sessions — the harder case of a node that is cut off
// but alive.
func (tc *testCluster) crash(tn *testNode) {
	tn.node.mu.Lock()
	sess := tn.node.sess
	tn.node.closed = true
	tn.node.mu.Unlock()
	tn.node.cancel()
	tn.node.wg.Wait()
	tc.meta.StopKeepAlive(sess.ID())
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (tc *testCluster) createStreams(core *stream.Core, n int) []stream.Info {
	tc.t.Helper()
	var out []stream.Info
	for i := 0; i < n; i++ {
		in, err := core.Create(context.Background(), fmt.Sprintf("s/%03d", i), stream.CreateOptions{})
		if err != nil {
			tc.t.Fatal(err)
		}
		out = append(out, in)
	}
	return out
}

// appendVia appends one entry through the stream's owner among nodes and
// returns the owner that acknowledged it.
func appendVia(ctx context.Context, nodes []*testNode, in stream.Info) (*testNode, error) {
	var lastErr error
	for _, tn := range nodes {
		sess, err := tn.node.Writer(ctx, in.ID, in.Name)
		if err != nil {
			lastErr = err
			continue
		}
		_, err = tn.core.Append(ctx, sess, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte("x"), RecordCount: 1}}, ExpectedStart: -1})
		if errors.Is(err, stream.ErrFenced) {
			tn.node.Lost(sess)
		}
		if err == nil {
			return tn, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func TestViewsAgreeAndOnlyTheOwnerGetsAWriter(t *testing.T) {
	tc := newTestCluster(t)
	a, b, c := tc.start("node-a", time.Second), tc.start("node-b", time.Second), tc.start("node-c", time.Second)
	all := []*testNode{a, b, c}
	waitFor(t, "every view to hold 3 brokers", func() bool {
		return len(a.node.View().Brokers) == 3 && len(b.node.View().Brokers) == 3 && len(c.node.View().Brokers) == 3
	})
	streams := tc.createStreams(a.core, 30)
	ctx := context.Background()
	perNode := map[string]int{}
	for _, in := range streams {
		owner, _ := a.node.OwnerOf(in.Name)
		for _, tn := range all {
			if o, _ := tn.node.OwnerOf(in.Name); o.NodeID != owner.NodeID {
				t.Fatalf("%s: %s says owner %s, a says %s", in.Name, tn.id, o.NodeID, owner.NodeID)
			}
			_, err := tn.node.Writer(ctx, in.ID, in.Name)
			var no *NotOwnerError
			switch {
			case tn.id == owner.NodeID && err != nil:
				t.Fatalf("owner %s: Writer(%s): %v", tn.id, in.Name, err)
			case tn.id != owner.NodeID && (!errors.As(err, &no) || no.Owner.NodeID != owner.NodeID):
				t.Fatalf("non-owner %s: Writer(%s): %v, want NotOwnerError naming %s", tn.id, in.Name, err, owner.NodeID)
			}
		}
		perNode[owner.NodeID]++
		if got, err := appendVia(ctx, all, in); err != nil || got.id != owner.NodeID {
			t.Fatalf("append to %s: via %v, %v", in.Name, got, err)
		}
	}
	if len(perNode) != 3 {
		t.Fatalf("30 streams spread over %v", perNode)
	}
	st, err := a.node.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, bs := range st.Brokers {
		held += bs.Held
		if bs.Held != perNode[bs.NodeID] || bs.Assigned != perNode[bs.NodeID] {
			t.Errorf("status of %s: held %d assigned %d, want %d", bs.NodeID, bs.Held, bs.Assigned, perNode[bs.NodeID])
		}
	}
	if st.Streams != 30 || held != 30 || st.Unowned != 0 {
		t.Fatalf("status %+v", st)
	}
}

func TestJoinHandsStreamsOver(t *testing.T) {
	tc := newTestCluster(t)
	a := tc.start("node-a", time.Second)
	streams := tc.createStreams(a.core, 40)
	ctx := context.Background()
	for _, in := range streams {
		if _, err := appendVia(ctx, []*testNode{a}, in); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.node.Held()) != 40 {
		t.Fatalf("a holds %d streams", len(a.node.Held()))
	}
	b := tc.start("node-b", time.Second)
	waitFor(t, "a to see b", func() bool { return len(a.node.View().Brokers) == 2 })
	moved := 0
	for _, in := range streams {
		if b.node.Owns(in.Name) {
			moved++
		}
	}
	waitFor(t, "a to release what b owns", func() bool { return len(a.node.Held()) == 40-moved })
	for _, in := range streams {
		got, err := appendVia(ctx, []*testNode{a, b}, in)
		if err != nil {
			t.Fatalf("%s after join: %v", in.Name, err)
		}
		if want, _ := b.node.OwnerOf(in.Name); got.id != want.NodeID {
			t.Fatalf("%s appended via %s, owner is %s", in.Name, got.id, want.NodeID)
		}
	}
	if s := b.node.Stats(); s.Acquired != int64(moved) || s.Preempted != 0 {
		t.Fatalf("b stats %+v, want %d acquired without pre-emption", s, moved)
	}
	if moved < 10 || moved > 30 {
		t.Fatalf("%d of 40 streams moved to the new node", moved)
	}
}

func TestLeaveHandsEverythingOver(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.start("node-a", time.Second), tc.start("node-b", time.Second)
	waitFor(t, "views of 2", func() bool { return len(a.node.View().Brokers) == 2 && len(b.node.View().Brokers) == 2 })
	streams := tc.createStreams(a.core, 30)
	ctx := context.Background()
	for _, in := range streams {
		if _, err := appendVia(ctx, []*testNode{a, b}, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.node.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if h := a.node.Held(); len(h) != 0 {
		t.Fatalf("a still holds %v after Leave", h)
	}
	waitFor(t, "b to see a draining", func() bool { return len(b.node.View().Active()) == 1 })
	for _, in := range streams {
		got, err := appendVia(ctx, []*testNode{a, b}, in)
		if err != nil || got.id != "node-b" {
			t.Fatalf("%s after a left: %v %v", in.Name, got, err)
		}
	}
	if s := b.node.Stats(); s.Preempted != 0 {
		t.Fatalf("graceful leave needed pre-emption: %+v", s)
	}
	_ = a.node.Close()
	waitFor(t, "a's record to go", func() bool { return len(b.node.View().Brokers) == 1 })
}

func TestCrashedOwnerIsPreempted(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.start("node-a", time.Second), tc.start("node-b", time.Second)
	waitFor(t, "views of 2", func() bool { return len(a.node.View().Brokers) == 2 && len(b.node.View().Brokers) == 2 })
	streams := tc.createStreams(a.core, 20)
	ctx := context.Background()
	for _, in := range streams {
		if _, err := appendVia(ctx, []*testNode{a, b}, in); err != nil {
			t.Fatal(err)
		}
	}
	onA := len(a.node.Held())
	oldSessions := map[stream.ID]stream.Session{}
	a.node.mu.Lock()
	for id, e := range a.node.writers {
		oldSessions[id] = e.sess
	}
	a.node.mu.Unlock()
	tc.crash(a)
	// a's core still holds its sessions (and renews them); b takes them.
	waitFor(t, "b to drop a", func() bool { return len(b.node.View().Brokers) == 1 })
	for _, in := range streams {
		if got, err := appendVia(ctx, []*testNode{b}, in); err != nil || got.id != "node-b" {
			t.Fatalf("%s after a crashed: %v", in.Name, err)
		}
		// a's old session can no longer commit.
		if old, ok := oldSessions[in.ID]; ok {
			_, err := a.core.Append(ctx, old, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte("late"), RecordCount: 1}}, ExpectedStart: -1})
			if !errors.Is(err, stream.ErrFenced) {
				t.Fatalf("%s: append under the crashed node's session: %v, want ErrFenced", in.Name, err)
			}
		}
		info, err := b.core.Describe(ctx, in.ID)
		if err != nil || info.EndOffset != 2 {
			t.Fatalf("%s: end %d, %v; want 2 (offsets never move)", in.Name, info.EndOffset, err)
		}
	}
	if s := b.node.Stats(); s.Preempted != int64(onA) {
		t.Fatalf("b pre-empted %d streams, a held %d", s.Preempted, onA)
	}
}

func TestRestartedOwnerAndIsolation(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.start("node-a", time.Second), tc.start("node-b", time.Second)
	waitFor(t, "views of 2", func() bool { return len(a.node.View().Brokers) == 2 })
	// A lost registry session (keep-alive stopped, as in a partition that
	// heals) is replaced by a new one; meanwhile the other node's view
	// drops the node and brings it back.
	a.node.mu.Lock()
	sess := a.node.sess
	a.node.mu.Unlock()
	tc.meta.StopKeepAlive(sess.ID())
	waitFor(t, "a to register with a new session", func() bool {
		a.node.mu.Lock()
		defer a.node.mu.Unlock()
		return a.node.sess != nil && a.node.sess.ID() != sess.ID()
	})
	waitFor(t, "b to see a again", func() bool {
		br, ok := b.node.View().Broker("node-a")
		return ok && br.RegisteredMs > 0
	})
	if s := a.node.Stats(); s.SessionsLost < 1 {
		t.Fatalf("a stats %+v", s)
	}
	// No proof of registration for a TTL: isolated, owns nothing.
	a.node.lastContact.Store(time.Now().Add(-2 * time.Second).UnixMilli())
	if !a.node.Isolated() || a.node.Owns("anything") && a.node.Owns("anything-else") {
		t.Fatal("isolated node still claims ownership")
	}
	for i := 0; i < 50; i++ {
		if a.node.Owns("k" + strconv.Itoa(i)) {
			t.Fatalf("isolated node owns k%d", i)
		}
	}
	var _ metadata.Store = tc.meta
}
