package objectwal_test

import (
	"context"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	mdmem "github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/objectstore"
	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
	"github.com/nereusstream/nereus-go/wal"
)

// countingStore counts calls by operation ("get manifest", "put segment", ...).
type countingStore struct {
	objectstore.ObjectStore
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingStore) note(op, key string) {
	kind := "segment"
	if strings.HasSuffix(key, "/manifest") {
		kind = "manifest"
	}
	c.mu.Lock()
	c.calls[op+" "+kind]++
	c.mu.Unlock()
}

func (c *countingStore) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

func (c *countingStore) Get(ctx context.Context, key string) ([]byte, objectstore.UpdateVersion, error) {
	c.note("get", key)
	return c.ObjectStore.Get(ctx, key)
}

func (c *countingStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	c.note("getrange", key)
	return c.ObjectStore.GetRange(ctx, key, off, n)
}

func (c *countingStore) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	c.note("head", key)
	return c.ObjectStore.Head(ctx, key)
}

func (c *countingStore) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	c.note("put", key)
	return c.ObjectStore.Put(ctx, key, data, opts)
}

func (c *countingStore) Delete(ctx context.Context, key string, v *objectstore.UpdateVersion) error {
	c.note("delete", key)
	return c.ObjectStore.Delete(ctx, key, v)
}

func (c *countingStore) List(ctx context.Context, prefix string) iter.Seq2[objectstore.ObjectInfo, error] {
	c.note("list", prefix)
	return c.ObjectStore.List(ctx, prefix)
}

// TestIdleProviderDoesNoIO: the truncator drops settled manifest entries
// without reading the manifest (the truncation rides on the producer's own
// commits), and once everything is settled an idle provider issues no
// object-store call at all — it used to GET the manifest every
// TruncateInterval.
func TestIdleProviderDoesNoIO(t *testing.T) {
	ctx := ctxT(t)
	inner := osmem.New()
	cs := &countingStore{ObjectStore: inner, calls: map[string]int{}}
	prov, err := objectwal.Open(ctx, objectwal.Config{Store: cs, Prefix: "wal/idle", TruncateInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stream.Open(ctx, stream.Config{Metadata: mdmem.New(), ObjectWAL: prov, WriterID: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Create(ctx, "s", stream.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := c.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte("x"), RecordCount: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	afterOpen := cs.snapshot()["get manifest"]
	// Wait (bounded) until the truncator has dropped every settled entry.
	store := wal.NewStore(inner, "wal/idle/manifest")
	for {
		m, _, _, err := store.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Count() == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("manifest still holds %d entries", m.Count())
		case <-time.After(2 * time.Millisecond):
		}
	}
	before := cs.snapshot()
	if before["get manifest"] != afterOpen {
		t.Fatalf("the truncator read the manifest %d times", before["get manifest"]-afterOpen)
	}
	// An observation window of ~50 truncator ticks, not a synchronisation.
	time.Sleep(50 * time.Millisecond)
	after := cs.snapshot()
	for k, v := range after {
		if v != before[k] {
			t.Errorf("idle provider: %s %d -> %d", k, before[k], v)
		}
	}
}
