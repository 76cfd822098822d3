package stream

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/boltstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

var gcPassStreams = flag.Int("gcpass.streams", 0, "TestGCPassCost: streams (0 skips the benchmark)")

// opCountingMeta counts metadata operations (a Batch counts each op).
type opCountingMeta struct {
	metadata.Store
	ops atomic.Int64
}

func (m *opCountingMeta) Get(ctx context.Context, key string) (metadata.Record, error) {
	m.ops.Add(1)
	return m.Store.Get(ctx, key)
}

func (m *opCountingMeta) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	m.ops.Add(1)
	return m.Store.Put(ctx, key, value, expected)
}

func (m *opCountingMeta) Delete(ctx context.Context, key string, expected metadata.Version) error {
	m.ops.Add(1)
	return m.Store.Delete(ctx, key, expected)
}

func (m *opCountingMeta) RangeScan(ctx context.Context, min, max string, limit int) ([]metadata.Record, error) {
	m.ops.Add(1)
	return m.Store.RangeScan(ctx, min, max, limit)
}

func (m *opCountingMeta) Batch(ctx context.Context, ops []metadata.Op) ([]metadata.Result, error) {
	m.ops.Add(int64(len(ops)))
	return m.Store.Batch(ctx, ops)
}

// TestGCPassCost is a benchmark, not a test (skipped unless
// -gcpass.streams N): the CPU time and metadata operations of one full GC
// pass and of one due pass (gc_schedule.go) at N owned streams on the
// Object WAL, idle (every run needed) and active (every stream just
// trimmed: the full pass starts the grace, the due pass at its end
// deletes). Figures: docs/notes/issue-9.md, session 12.
//
//	go test ./stream -run TestGCPassCost -v -gcpass.streams 10000
func TestGCPassCost(t *testing.T) {
	if *gcPassStreams <= 0 {
		t.Skip("benchmark: run with -gcpass.streams N") // skip-ok: opt-in benchmark, not a test
	}
	n := *gcPassStreams
	ctx := context.Background()
	rt := &tickRuntime{at: time.Unix(1_700_000_000, 0)}
	objs := objmem.New()
	// boltstore, not memstore: memstore's RangeScan walks every key, which
	// would make the per-stream scans of a pass look quadratic.
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "meta.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	meta := &opCountingMeta{Store: bolt}
	w, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/b1", FlushInterval: time.Millisecond, TruncateInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const grace = 2 * time.Second
	c, err := Open(ctx, Config{Metadata: meta, ObjectWAL: w, ObjectStore: objs, WriterID: "b1", RetentionInterval: 100 * time.Hour, runtime: rt,
		Lifecycle: LifecycleConfig{GCDisabled: true, GCGrace: grace, DisableMaterialization: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids := make([]ID, n)
	ends := make([]int64, n)
	var wg sync.WaitGroup
	var failed atomic.Value
	work := make(chan int)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				info, err := c.Create(ctx, fmt.Sprintf("s-%05d", i), CreateOptions{})
				if err == nil {
					var s Session
					if s, err = c.AcquireSession(ctx, info.ID, SessionOptions{WriterID: "b1"}); err == nil {
						var r AppendResult
						r, err = c.Append(ctx, s, AppendRequest{Entries: []Entry{{Payload: make([]byte, 1000), RecordCount: 1}}, ExpectedStart: -1})
						ids[i], ends[i] = info.ID, r.End
					}
				}
				if err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	segs := 0
	for _, err := range objs.List(ctx, "wal/b1/seg/") {
		if err != nil {
			t.Fatal(err)
		}
		segs++
	}
	for i := 0; ; i++ {
		st, err := c.CollectGarbage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.PendingCount == segs {
			break
		}
		if i == 5000 {
			t.Fatalf("%d of %d segments retained", st.PendingCount, segs)
		}
		time.Sleep(time.Millisecond)
	}
	measure := func(what string, passes int, f func()) {
		t.Helper()
		ops0, cpu0, wall0 := meta.ops.Load(), cpuNow(), time.Now()
		for i := 0; i < passes; i++ {
			f()
		}
		p := float64(passes)
		t.Logf("GCPASS %d streams, %d segments: %s: %.1f ms CPU, %.1f ms wall, %.0f metadata ops per pass (%d passes)", n, segs, what,
			float64(cpuNow()-cpu0)/1e6/p, float64(time.Since(wall0))/1e6/p, float64(meta.ops.Load()-ops0)/p, passes)
	}
	full := func() {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	due := func() { c.collectDue(ctx) }
	measure("idle full pass", 20, full)
	measure("idle due pass (nothing due)", 20, due)
	for i, id := range ids {
		if _, err := c.trim(ctx, id, ends[i]); err != nil {
			t.Fatal(err)
		}
	}
	measure("full pass after every stream trimmed (grace starts)", 1, full)
	measure("full pass within the grace (nothing deletable yet)", 5, full)
	rt.advance(grace)
	measure("due pass at the grace end (deletes every segment)", 1, due)
	left := 0
	for _, err := range objs.List(ctx, "wal/b1/seg/") {
		if err != nil {
			t.Fatal(err)
		}
		left++
	}
	t.Logf("GCPASS segments left %d of %d", left, segs)
}
