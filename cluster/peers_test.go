package cluster

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

// fakeListener stands in for a peer process's Kafka listener: it accepts
// the peer watch's connections and can be closed as a process exit would
// close them (listening socket and every accepted connection).
type fakeListener struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted chan struct{}
}

func newFakeListener(t *testing.T) *fakeListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &fakeListener{ln: ln, accepted: make(chan struct{}, 64)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fl.mu.Lock()
			fl.conns = append(fl.conns, c)
			fl.mu.Unlock()
			fl.accepted <- struct{}{}
		}
	}()
	t.Cleanup(fl.kill)
	return fl
}

func (fl *fakeListener) endpoints() []Endpoint {
	a := fl.ln.Addr().(*net.TCPAddr)
	return []Endpoint{{Protocol: ProtocolKafka, Listener: "PLAINTEXT", Host: "127.0.0.1", Port: a.Port}}
}

// dropConns closes the accepted connections only (the process lives on).
func (fl *fakeListener) dropConns() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, c := range fl.conns {
		_ = c.Close()
	}
	fl.conns = nil
}

// kill closes the listening socket, then every connection: what the
// kernel does when the process dies.
func (fl *fakeListener) kill() {
	_ = fl.ln.Close()
	fl.dropConns()
}

func (fl *fakeListener) waitAccept(t *testing.T) {
	t.Helper()
	select {
	case <-fl.accepted:
	case <-time.After(30 * time.Second):
		t.Fatal("the peer watch never connected")
	}
}

// heldBy returns the sessions node tn holds.
func heldBy(tn *testNode) map[stream.ID]stream.Session {
	out := map[stream.ID]stream.Session{}
	tn.node.mu.Lock()
	for id, e := range tn.node.writers {
		if e.held {
			out[id] = e.sess
		}
	}
	tn.node.mu.Unlock()
	return out
}

// A crashed peer (its registry session still alive for a long TTL) is
// dropped as soon as its connection closes and its address refuses: the
// survivor's view loses it, its record is deleted, and its streams are
// pre-empted with fencing.
func TestCrashedPeerExpiredBeforeTTL(t *testing.T) {
	tc := newTestCluster(t)
	fl := newFakeListener(t)
	// A TTL longer than every wait below: only the peer watch can drop b.
	const ttl = 2 * time.Minute
	a := tc.start("node-a", ttl)
	b := tc.startWith("node-b", ttl, fl.endpoints())
	waitFor(t, "views of 2", func() bool { return len(a.node.View().Brokers) == 2 && len(b.node.View().Brokers) == 2 })
	fl.waitAccept(t)
	streams := tc.createStreams(a.core, 20)
	ctx := context.Background()
	for _, in := range streams {
		if _, err := appendVia(ctx, []*testNode{a, b}, in); err != nil {
			t.Fatal(err)
		}
	}
	old := heldBy(b)
	if len(old) == 0 {
		t.Fatal("b owns none of 20 streams")
	}
	tc.crash(b)
	fl.kill()
	waitFor(t, "a to drop b", func() bool { return len(a.node.View().Brokers) == 1 })
	waitFor(t, "b's record deleted", func() bool {
		_, err := tc.meta.Get(ctx, keyBrokers+"node-b")
		return errors.Is(err, metadata.ErrKeyNotFound)
	})
	a.node.Settle(ctx) // nothing suspect any more: returns at once
	for _, in := range streams {
		if got, err := appendVia(ctx, []*testNode{a}, in); err != nil || got.id != "node-a" {
			t.Fatalf("%s after b crashed: %v", in.Name, err)
		}
		if s, ok := old[in.ID]; ok {
			_, err := b.core.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte("late"), RecordCount: 1}}, ExpectedStart: -1})
			if !errors.Is(err, stream.ErrFenced) {
				t.Fatalf("%s: append under the crashed node's session: %v, want ErrFenced", in.Name, err)
			}
		}
	}
	if s := a.node.Stats(); s.PeersExpired != 1 || s.Preempted != int64(len(old)) {
		t.Fatalf("a: %d peers expired, %d pre-empted (b held %d)", s.PeersExpired, s.Preempted, len(old))
	}
}

// A peer whose connection closes but which accepts a new one is alive:
// it stays.
func TestClosedPeerConnectionAloneExpiresNothing(t *testing.T) {
	tc := newTestCluster(t)
	fl := newFakeListener(t)
	a := tc.start("node-a", 2*time.Minute)
	tc.startWith("node-b", 2*time.Minute, fl.endpoints())
	waitFor(t, "views of 2", func() bool { return len(a.node.View().Brokers) == 2 })
	fl.waitAccept(t)
	for i := 0; i < 3; i++ {
		fl.dropConns()
		fl.waitAccept(t) // the verdict's probe connection, or the new watch
		fl.waitAccept(t)
	}
	a.node.Settle(context.Background())
	if n := len(a.node.View().Brokers); n != 2 || a.node.Stats().PeersExpired != 0 {
		t.Fatalf("a sees %d brokers, expired %d", n, a.node.Stats().PeersExpired)
	}
}

// A live node expired by mistake (its listener went away, its process and
// registry session did not) is fenced, not corrupted: the survivor
// pre-empts its streams, the node's appends under the old sessions fail as
// fenced, and it registers again by itself (an address that never
// accepted proves nothing, so it is not expired again).
func TestFalselyExpiredLiveNodeIsFencedAndReturns(t *testing.T) {
	tc := newTestCluster(t)
	fl := newFakeListener(t)
	a := tc.start("node-a", 2*time.Second)
	b := tc.startWith("node-b", 2*time.Second, fl.endpoints())
	waitFor(t, "views of 2", func() bool { return len(a.node.View().Brokers) == 2 && len(b.node.View().Brokers) == 2 })
	fl.waitAccept(t)
	streams := tc.createStreams(a.core, 20)
	ctx := context.Background()
	for _, in := range streams {
		if _, err := appendVia(ctx, []*testNode{a, b}, in); err != nil {
			t.Fatal(err)
		}
	}
	old := heldBy(b)
	if len(old) == 0 {
		t.Fatal("b owns none of 20 streams")
	}
	fl.kill() // b itself keeps running
	waitFor(t, "a to expire b", func() bool { return a.node.Stats().PeersExpired == 1 })
	// Take b's streams while a believes b dead (b may come back at any
	// moment; appendVia goes through whoever owns the stream then).
	taken := 0
	for _, in := range streams {
		s, ok := old[in.ID]
		if !ok {
			continue
		}
		w, err := a.node.Writer(ctx, in.ID, in.Name)
		if err != nil {
			continue // b is back already and owns it again
		}
		if _, err := a.core.Append(ctx, w, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte("a"), RecordCount: 1}}, ExpectedStart: -1}); err != nil {
			continue
		}
		taken++
		_, err = b.core.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte("stale"), RecordCount: 1}}, ExpectedStart: -1})
		if !errors.Is(err, stream.ErrFenced) {
			t.Fatalf("%s: b's append under its pre-empted session: %v, want ErrFenced", in.Name, err)
		}
		b.node.Lost(s)
	}
	waitFor(t, "b to register again and a to see it", func() bool {
		_, ok := a.node.View().Broker("node-b")
		return ok
	})
	// Views agree again and every stream takes appends through its owner;
	// the offsets stay dense (no stale append got in).
	waitFor(t, "views to agree", func() bool {
		for i := 0; i < 50; i++ {
			k := "k" + strconv.Itoa(i)
			ao, _ := a.node.OwnerOf(k)
			bo, _ := b.node.OwnerOf(k)
			if ao.NodeID != bo.NodeID {
				return false
			}
		}
		return true
	})
	// Heads are read through a core that owns nothing: a's core may still
	// hold a stream whose ownership went back to b (its release waits out
	// the handoff), and an owner's Describe answers from its own head.
	observer, err := stream.Open(ctx, stream.Config{Metadata: tc.meta, ObjectWAL: tc.prov, WriterID: "observer"})
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	for _, in := range streams {
		before, err := observer.Describe(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got *testNode
		for i := 0; i < 100 && got == nil; i++ {
			got, err = appendVia(ctx, []*testNode{a, b}, in)
			if got == nil {
				time.Sleep(20 * time.Millisecond) // a handoff back to b in progress
			}
		}
		if got == nil {
			t.Fatalf("%s: %v", in.Name, err)
		}
		after, _ := observer.Describe(ctx, in.ID)
		if after.EndOffset != before.EndOffset+1 {
			t.Fatalf("%s: end %d -> %d", in.Name, before.EndOffset, after.EndOffset)
		}
	}
	t.Logf("a took %d of b's %d streams while b was believed dead", taken, len(old))
	if a.node.Stats().PeersExpired != 1 {
		t.Fatalf("expired %d times, want 1", a.node.Stats().PeersExpired)
	}
}
