package cluster

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// lateAdoption binds a core (opened first) to its node (joined after).
type lateAdoption struct{ n atomic.Pointer[Node] }

func (l *lateAdoption) ShouldAdopt(w string) bool {
	n := l.n.Load()
	return n != nil && n.ShouldAdopt(w)
}

type adoptNode struct {
	id   string
	core *stream.Core
	node *Node
}

// adoptCluster is nodes with their own Object WAL logs (wal/<id>) in one
// shared object store and one metadata store.
type adoptCluster struct {
	t    *testing.T
	meta *memstore.Store
	objs *objmem.Store
}

func (ac *adoptCluster) start(id string) *adoptNode {
	t := ac.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wal, err := objectwal.Open(ctx, objectwal.Config{Store: ac.objs, Prefix: "wal/" + id, FlushInterval: 2 * time.Millisecond,
		TruncateInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	late := &lateAdoption{}
	core, err := stream.Open(ctx, stream.Config{Metadata: ac.meta, ObjectWAL: wal, ObjectStore: ac.objs, WriterID: id,
		Adoption: late, RetentionInterval: time.Hour,
		Lifecycle: stream.LifecycleConfig{DisableMaterialization: true, GCInterval: time.Hour, GCGrace: time.Millisecond,
			AdoptScanInterval: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	kid, err := ClaimKafkaBrokerID(ctx, ac.meta, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Join(ctx, Config{Metadata: ac.meta, Storage: core, NodeID: id, KafkaBrokerID: kid, SessionTTL: time.Second,
		AdoptAfter: 300 * time.Millisecond, HandoffWait: 20 * time.Second,
		Endpoints: []Endpoint{{Protocol: ProtocolKafka, Listener: "PLAINTEXT", Host: "127.0.0.1", Port: 9000 + int(kid)}}})
	if err != nil {
		t.Fatal(err)
	}
	late.n.Store(n)
	an := &adoptNode{id: id, core: core, node: n}
	t.Cleanup(func() { _ = n.Close(); _ = core.Close() })
	return an
}

func segmentsOf(t *testing.T, ac *adoptCluster, writer string) int {
	t.Helper()
	n := 0
	for info, err := range ac.objs.List(context.Background(), "wal/"+writer+"/seg/") {
		if err != nil {
			t.Fatal(err)
		}
		_ = info
		n++
	}
	return n
}

// A node writes to its streams and dies for good (registry session gone,
// process gone). The survivor takes its streams over as usual; once the
// dead node has been out of the registry for AdoptAfter, the survivor — the
// rendezvous owner of the adoption — adopts the dead node's Object WAL log:
// a segment holding a run still needed (an untrimmed stream) is kept and
// its bytes still read back; once that stream is trimmed too, every segment
// of the dead node's log is deleted.
func TestDeadWritersLogAdoptedAndReclaimed(t *testing.T) {
	ac := &adoptCluster{t: t, meta: memstore.New(), objs: objmem.New()}
	t.Cleanup(func() { _ = ac.meta.Close() })
	a, b := ac.start("node-a"), ac.start("node-b")
	waitFor(t, "views of 2", func() bool { return len(a.node.View().Brokers) == 2 && len(b.node.View().Brokers) == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Streams a owns: "trimmed/*" (trimmed later) and one "kept" stream.
	var onA []stream.Info
	var kept stream.Info
	for i := 0; len(onA) < 4 || kept.Name == ""; i++ {
		if i > 500 {
			t.Fatal("no stream names owned by node-a")
		}
		name := fmt.Sprintf("s/%03d", i)
		if !a.node.OwnsStream(name) {
			continue
		}
		in, err := a.core.Create(ctx, name, stream.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(onA) < 4 {
			onA = append(onA, in)
		} else {
			kept = in
		}
	}
	write := func(in stream.Info, n int) [][]byte {
		sess, err := a.node.Writer(ctx, in.ID, in.Name)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for i := 0; i < n; i++ {
			p := []byte(fmt.Sprintf("%s-%03d-%s", in.Name, i, strings.Repeat("x", 100)))
			if _, err := a.core.Append(ctx, sess, stream.AppendRequest{Entries: []stream.Entry{{Payload: p, RecordCount: 1}}, ExpectedStart: -1}); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
		return out
	}
	for _, in := range onA {
		write(in, 10)
	}
	keptData := write(kept, 10)
	if b.node.ShouldAdopt("node-a") {
		t.Fatal("a live node's sources would be adopted")
	}
	segsBefore := segmentsOf(t, ac, "node-a")
	if segsBefore == 0 {
		t.Fatal("node-a wrote no segment")
	}

	// node-a dies for good.
	crashNode(a.node, ac.meta)
	if err := a.core.Close(); err != nil {
		t.Logf("closing node-a's core: %v", err)
	}
	waitFor(t, "b to drop a", func() bool { return len(b.node.View().Brokers) == 1 })
	died := time.Now()

	// b owns a's streams now; it trims all but kept to their end.
	for _, in := range onA {
		info, err := b.core.Describe(ctx, in.ID)
		if err != nil || info.EndOffset != 10 {
			t.Fatalf("%s: end %d, %v", in.Name, info.EndOffset, err)
		}
		if err := b.core.Trim(ctx, in.ID, info.EndOffset); err != nil {
			t.Fatal(err)
		}
	}
	// Adopted after AdoptAfter; the segments of the trimmed streams go,
	// those with kept's runs stay.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := b.core.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		if len(b.core.Adopting()) > 0 && segmentsOf(t, ac, "node-a") < segsBefore {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-a's log not adopted or nothing reclaimed: adopting %v, %d of %d segments left; pending %+v",
				b.core.Adopting(), segmentsOf(t, ac, "node-a"), segsBefore, b.core.GCStatus().Pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	adoptedAfter := time.Since(died)
	if got := b.core.GCStatus().Adopting; len(got) != 1 || got[0] != "objectwal/node-a" {
		t.Fatalf("GCStatus().Adopting = %v, want [objectwal/node-a]", got)
	}
	for i := 0; i < 10; i++ { // more passes: still nothing needed deleted
		if _, err := b.core.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	left := segmentsOf(t, ac, "node-a")
	if left == 0 {
		t.Fatal("every segment of node-a deleted although kept's runs are still needed")
	}
	res, err := b.core.Read(ctx, kept.ID, 0, stream.ReadOptions{})
	if err != nil || len(res.Entries) != len(keptData) {
		t.Fatalf("kept stream after adoption: %d entries, %v", len(res.Entries), err)
	}
	for i, e := range res.Entries {
		if !bytes.Equal(e.Payload, keptData[i]) {
			t.Fatalf("kept entry %d: %q", i, e.Payload)
		}
	}

	// kept trimmed too: node-a's log is emptied.
	if err := b.core.Trim(ctx, kept.ID, int64(len(keptData))); err != nil {
		t.Fatal(err)
	}
	for i := 0; segmentsOf(t, ac, "node-a") > 0; i++ {
		if i > 1000 {
			t.Fatalf("%d segments of node-a left after everything was trimmed; pending %+v", segmentsOf(t, ac, "node-a"), b.core.GCStatus().Pending)
		}
		if _, err := b.core.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.core.LifecycleStats().Adoptions; n != 1 {
		t.Fatalf("%d adoptions, want 1", n)
	}
	t.Logf("node-a: %d segments; adopted and first reclaimed %s after it left the registry; %d kept while needed; 0 after the last trim",
		segsBefore, adoptedAfter.Round(10*time.Millisecond), left)
}

// crashNode stops a node's membership as SIGKILL would (no release, no
// deregistration: its registry session expires).
func crashNode(n *Node, meta *memstore.Store) {
	n.mu.Lock()
	sess := n.sess
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
	meta.StopKeepAlive(sess.ID())
}
