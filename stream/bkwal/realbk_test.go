package bkwal_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/namespace"
	"github.com/nereusstream/nereus-go/metadata"
	mdmem "github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/bkwal"
)

// realCluster is one Nereus deployment (its own metadata store and
// namespace block) on the real BookKeeper cluster.
type realCluster struct {
	meta  metadata.Store
	alias string
}

func newRealCluster(t *testing.T) *realCluster {
	env.Require(t)
	rc := &realCluster{meta: mdmem.New(), alias: fmt.Sprintf("it%d", rand.Int64())}
	store, bk := rc.client(t)
	block := namespace.MinBlock + rand.Int64N(namespace.MaxBlock-namespace.MinBlock)
	if _, err := namespace.Reserve(ctxT(t), namespace.Config{Meta: rc.meta, Cluster: store, Client: bk, Alias: rc.alias}, block); err != nil {
		t.Fatal(err)
	}
	return rc
}

func (rc *realCluster) client(t *testing.T) (*bookkeeper.ZKStore, *bookkeeper.Client) {
	t.Helper()
	store, err := bookkeeper.DialZK(ctxT(t), env.ZK, bookkeeper.ZKOptions{LedgersRoot: env.Root, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	bk, err := bookkeeper.New(bookkeeper.Config{Metadata: store, Logger: quiet(), AddTimeout: 20 * time.Second, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bk.Close() })
	return store, bk
}

// core opens a "process": its own ZooKeeper session, client, namespace
// handle, provider and core.
func (rc *realCluster) core(t *testing.T, writer string) (*stream.Core, error) {
	t.Helper()
	store, bk := rc.client(t)
	ns, err := namespace.Open(ctxT(t), namespace.Config{Meta: rc.meta, Cluster: store, Client: bk, Alias: rc.alias})
	if err != nil {
		t.Fatal(err)
	}
	p, err := bkwal.Open(bkwal.Config{Client: bk, Namespace: ns, Meta: rc.meta, WriterID: writer, Alias: rc.alias, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stream.Open(ctxT(t), stream.Config{Metadata: rc.meta, BookKeeperWAL: p, WriterID: writer, Logger: quiet()})
	if err != nil {
		_ = p.Close(ctxT(t))
	}
	return c, err
}

// BOOKKEEPER_WAL_ONLY on real bookies: append, read from another process,
// crash (no close) and take over with the same writer identity, which
// recovers the crashed incarnation's ledger and settles its runs; every
// acknowledged append reads back once at its offset.
func TestRealBookKeeperWALOnly(t *testing.T) {
	rc := newRealCluster(t)
	ctx := ctxT(t)
	c1, err := rc.core(t, "broker-1")
	if err != nil {
		t.Fatal(err)
	}
	info, s1 := bkStream(t, c1, "real")
	acked := map[string]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				p := fmt.Sprintf("w%d.%d", w, j)
				r, err := c1.Append(ctx, s1, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{
					{Payload: []byte(p), RecordCount: 1 + uint32(j%3)}}})
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				mu.Lock()
				acked[p] = r.Start
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	// Another process reads everything from the bookies.
	c2, err := rc.core(t, "broker-2")
	if err != nil {
		t.Fatal(err)
	}
	check := func(c *stream.Core) {
		seen := map[string]int64{}
		for _, e := range readAll(t, c, info.ID) {
			if _, dup := seen[string(e.Payload)]; dup {
				t.Fatalf("%s read twice", e.Payload)
			}
			seen[string(e.Payload)] = e.Offset
		}
		for p, off := range acked {
			if got, ok := seen[p]; !ok || got != off {
				t.Fatalf("acknowledged %s@%d reads back as %d (present %v)", p, off, got, ok)
			}
		}
	}
	check(c2)
	_ = c2.Close()
	// "Crash" c1: a new incarnation of broker-1 opens without c1 closing.
	var c3 *stream.Core
	for attempt := 0; ; attempt++ {
		if c3, err = rc.core(t, "broker-1"); err == nil {
			break
		}
		if attempt > 5 || !errors.Is(err, bookkeeper.ErrRecoveryIncomplete) {
			t.Fatal(err)
		}
	}
	defer c3.Close()
	if _, err := c1.Append(ctx, s1, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte("late"), RecordCount: 1}}}); err == nil {
		t.Fatal("the crashed incarnation appended after the takeover")
	}
	go c1.Close()
	check(c3)
	s3, err := c3.AcquireSession(ctx, info.ID, stream.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c3.Append(ctx, s3, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte("after"), RecordCount: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	last := readAll(t, c3, info.ID)
	if e := last[len(last)-1]; string(e.Payload) != "after" || e.Offset != r.Start {
		t.Fatalf("last entry %q@%d", e.Payload, e.Offset)
	}
}

// Dial is the server's wiring (--bookkeeper-zk): the first start reserves
// a namespace block, later starts verify and reuse it.
func TestRealDial(t *testing.T) {
	env.Require(t)
	ctx := ctxT(t)
	meta := mdmem.New()
	alias := fmt.Sprintf("dial%d", rand.Int64())
	d1, err := bkwal.Dial(ctx, bkwal.DialConfig{ZK: env.ZK, Root: env.Root, Meta: meta, WriterID: "n1", Alias: alias, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	block := d1.Provider.Reservation().Block
	c, err := stream.Open(ctx, stream.Config{Metadata: meta, BookKeeperWAL: d1.Provider, WriterID: "n1", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	info, s := bkStream(t, c, "dialed")
	if _, err := c.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte("x"), RecordCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	_ = d1.CloseConnections()
	d2, err := bkwal.Dial(ctx, bkwal.DialConfig{ZK: env.ZK, Root: env.Root, Meta: meta, WriterID: "n1", Alias: alias, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.CloseConnections()
	if got := d2.Provider.Reservation().Block; got != block {
		t.Fatalf("second start reserved block %d, first %d", got, block)
	}
	c2, err := stream.Open(ctx, stream.Config{Metadata: meta, BookKeeperWAL: d2.Provider, WriterID: "n1", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := readAll(t, c2, info.ID); len(got) != 1 || string(got[0].Payload) != "x" {
		t.Fatalf("read back %d entries", len(got))
	}
}
