package stream_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/objectstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// lcEnv is a core on the real Object WAL over in-memory stores, with a
// lifecycle tuned for tests (small generations, short grace).
type lcEnv struct {
	meta    metadata.Store
	objects objectstore.ObjectStore
	lc      stream.LifecycleConfig
}

func newLCEnv(t *testing.T) *lcEnv {
	return &lcEnv{meta: memstore.New(), objects: objmem.New(), lc: stream.LifecycleConfig{
		Interval: 20 * time.Millisecond, GenerationBytes: 4 << 10, GenerationMaxAge: 200 * time.Millisecond,
		GCInterval: time.Hour /* tests drive GC */, GCGrace: 50 * time.Millisecond, OrphanGrace: 50 * time.Millisecond, LeaseTTL: 2 * time.Second,
	}}
}

func (e *lcEnv) open(t *testing.T, writer string) *stream.Core {
	t.Helper()
	ctx := context.Background()
	w, err := objectwal.Open(ctx, objectwal.Config{Store: e.objects, Prefix: "wal/" + writer, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := stream.Open(ctx, stream.Config{Metadata: e.meta, ObjectWAL: w, ObjectStore: e.objects, WriterID: writer,
		Lifecycle: e.lc, RetentionInterval: time.Hour, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func (e *lcEnv) keys(t *testing.T, prefix string) []string {
	t.Helper()
	var out []string
	for info, err := range e.objects.List(context.Background(), prefix) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, info.Key)
	}
	return out
}

func payloadOf(i int) []byte {
	return []byte(fmt.Sprintf("entry-%06d-%s", i, strings.Repeat("x", i%97)))
}

// appendN appends n single-record entries in batches and returns their
// payloads by offset.
func appendN(t *testing.T, c *stream.Core, s stream.Session, first, n int) map[int64][]byte {
	t.Helper()
	ctx := ctxT(t)
	got := map[int64][]byte{}
	for i := first; i < first+n; i += 10 {
		var es []stream.Entry
		for j := i; j < min(i+10, first+n); j++ {
			es = append(es, stream.Entry{Payload: payloadOf(j), RecordCount: 1, Timestamp: int64(j)})
		}
		r, err := c.Append(ctx, s, stream.AppendRequest{Entries: es, ExpectedStart: -1})
		if err != nil {
			t.Fatal(err)
		}
		for k := range es {
			got[r.Start+int64(k)] = es[k].Payload
		}
	}
	return got
}

// readAll reads [from, end) and checks every entry against want.
func readAll(t *testing.T, c *stream.Core, id stream.ID, from int64, want map[int64][]byte) int64 {
	t.Helper()
	ctx := ctxT(t)
	next := from
	for {
		res, err := c.Read(ctx, id, next, stream.ReadOptions{MaxBytes: 3000})
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		for _, e := range res.Entries {
			if w, ok := want[e.Offset]; !ok || !bytes.Equal(w, e.Payload) {
				t.Fatalf("offset %d: got %q want %q", e.Offset, e.Payload, w)
			}
		}
		if len(res.Entries) == 0 {
			return next
		}
		next = res.Next
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMaterializeTrimAndCollect(t *testing.T) {
	e := newLCEnv(t)
	c := e.open(t, "b1")
	ctx := ctxT(t)
	info, s := createWithSession(ctx, t, c, "orders", "b1")
	want := appendN(t, c, s, 0, 600)
	waitFor(t, "generations", func() bool {
		return c.LifecycleStats().Materialized >= 3
	})
	t.Logf("lifecycle: %+v", c.LifecycleStats())
	if gens := e.keys(t, "gen/"); len(gens) < 3 {
		t.Fatalf("generation objects: %v", gens)
	}
	if end := readAll(t, c, info.ID, 0, want); end != 600 {
		t.Fatalf("read to %d", end)
	}
	if c.Stats().Reads == 0 {
		t.Fatal("no reads")
	}
	// GC retires the WAL runs the generations now serve.
	segsBefore := len(e.keys(t, "wal/b1/seg/"))
	deadline := time.Now().Add(20 * time.Second)
	for len(e.keys(t, "wal/b1/seg/")) >= segsBefore && time.Now().Before(deadline) {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond)
	}
	if n := len(e.keys(t, "wal/b1/seg/")); n >= segsBefore {
		st := c.GCStatus()
		t.Fatalf("segments %d -> %d; pending %+v", segsBefore, n, st.Pending)
	}
	if end := readAll(t, c, info.ID, 0, want); end != 600 {
		t.Fatalf("read after GC to %d", end)
	}

	// Trim past everything but the tail; GC deletes generations below it.
	if err := c.Trim(ctx, info.ID, 590); err != nil {
		t.Fatal(err)
	}
	for time.Now().Before(deadline) {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		if len(e.keys(t, "gen/")) <= 1 {
			break
		}
		time.Sleep(60 * time.Millisecond)
	}
	if gens := e.keys(t, "gen/"); len(gens) > 1 {
		t.Fatalf("generations left after trim: %v (pending %+v)", gens, c.GCStatus().Pending)
	}
	if end := readAll(t, c, info.ID, 590, want); end != 600 {
		t.Fatalf("read after trim to %d", end)
	}
}

func TestDeletedStreamIsCollected(t *testing.T) {
	e := newLCEnv(t)
	c := e.open(t, "b1")
	ctx := ctxT(t)
	info, s := createWithSession(ctx, t, c, "doomed", "b1")
	appendN(t, c, s, 0, 300)
	waitFor(t, "a generation", func() bool { return c.LifecycleStats().Materialized >= 1 })
	if err := c.Delete(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		if len(e.keys(t, "gen/"))+len(e.keys(t, "wal/b1/seg/")) == 0 {
			break
		}
		time.Sleep(60 * time.Millisecond)
	}
	if left := append(e.keys(t, "gen/"), e.keys(t, "wal/b1/seg/")...); len(left) > 0 {
		t.Fatalf("objects left: %v; pending %+v", left, c.GCStatus().Pending)
	}
	// Every record of the stream is gone.
	recs, err := e.meta.RangeScan(ctx, "s/", "s/\xff", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if strings.Contains(r.Key, info.ID.String()) {
			t.Errorf("record left: %s", r.Key)
		}
	}
}

// createWithSession creates stream name on c and takes its append session
// for writer ("" lets the core pick its own writer ID).
func createWithSession(ctx context.Context, t *testing.T, c *stream.Core, name, writer string) (stream.Info, stream.Session) {
	t.Helper()
	info, err := c.Create(ctx, name, stream.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: writer})
	if err != nil {
		t.Fatal(err)
	}
	return info, s
}
