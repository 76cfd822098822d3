package stream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

type env struct {
	meta metadata.Store
	prov *memprovider.Provider
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{meta: memstore.New(), prov: memprovider.New(1, memprovider.Faults{})}
}

func (e *env) open(t *testing.T, writer string) *stream.Core {
	t.Helper()
	c, err := stream.Open(context.Background(), stream.Config{Metadata: e.meta, ObjectWAL: e.prov, WriterID: writer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func entry(s string) stream.Entry { return stream.Entry{Payload: []byte(s), RecordCount: 1} }

func TestCreateAppendRead(t *testing.T) {
	e := newEnv(t)
	c := e.open(t, "b1")
	ctx := ctxT(t)
	info, err := c.Create(ctx, "orders", stream.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Profile != stream.ObjectWALAsyncObject || info.State != stream.StateActive {
		t.Fatalf("info %+v", info)
	}
	if _, err := c.Create(ctx, "orders", stream.CreateOptions{}); !errors.Is(err, stream.ErrStreamExists) {
		t.Fatalf("second create: %v", err)
	}
	s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{entry("a"), {Payload: []byte("bc"), RecordCount: 2}}, ExpectedStart: -1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Start != 0 || r.End != 3 {
		t.Fatalf("append result %+v", r)
	}
	r, err = c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{entry("d")}, ExpectedStart: 3})
	if err != nil || r.Start != 3 {
		t.Fatalf("append 2: %+v %v", r, err)
	}
	if _, err := c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{entry("x")}, ExpectedStart: 3}); !errors.Is(err, stream.ErrOffsetConflict) {
		t.Fatalf("conditional append: %v", err)
	}
	res, err := c.Read(ctx, info.ID, 1, stream.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 2 || res.Entries[0].Offset != 1 || string(res.Entries[0].Payload) != "bc" || res.Next != 4 {
		t.Fatalf("read %+v", res)
	}
	// A second process (same store and provider) reads through the index.
	c2 := e.open(t, "b2")
	res, err = c2.Read(ctx, info.ID, 0, stream.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 3 || res.EndOffset != 4 {
		t.Fatalf("read from other process %+v", res)
	}
	got, err := c2.Lookup(ctx, "orders")
	if err != nil || got.EndOffset != 4 || got.Session.WriterID != "b1" {
		t.Fatalf("lookup %+v %v", got, err)
	}
}

func TestManyStreamsPipelined(t *testing.T) {
	e := newEnv(t)
	e.prov.SetFaults(memprovider.Faults{MaxDelay: 2 * time.Millisecond})
	c := e.open(t, "b1")
	ctx := ctxT(t)
	const streams, perStream = 20, 50
	var wg sync.WaitGroup
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			info, err := c.Create(ctx, fmt.Sprintf("s%d", i), stream.CreateOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			futs := make([]*stream.AppendFuture, perStream)
			for j := range futs {
				futs[j] = c.AppendAsync(s, stream.AppendRequest{Entries: []stream.Entry{entry(fmt.Sprintf("%d-%d", i, j))}, ExpectedStart: -1})
			}
			for j, f := range futs {
				r, err := f.Wait(ctx)
				if err != nil || r.Start != int64(j) {
					t.Errorf("stream %d append %d: %+v %v", i, j, r, err)
					return
				}
			}
			res, err := c.Read(ctx, info.ID, 0, stream.ReadOptions{MaxEntries: perStream})
			if err != nil || len(res.Entries) != perStream {
				t.Errorf("read back %d: %d entries, %v", i, len(res.Entries), err)
				return
			}
			for j, en := range res.Entries {
				if want := fmt.Sprintf("%d-%d", i, j); string(en.Payload) != want || en.Offset != int64(j) {
					t.Errorf("entry %d of stream %d = %q@%d", j, i, en.Payload, en.Offset)
				}
			}
		}(i)
	}
	wg.Wait()
	t.Logf("stats: %+v", c.Stats())
}

// gatedStore blocks every Batch while the gate is held.
type gatedStore struct {
	metadata.Store
	gate       sync.RWMutex
	headRounds atomic.Int64 // batches carrying at least one head put
}

func (g *gatedStore) Batch(ctx context.Context, ops []metadata.Op) ([]metadata.Result, error) {
	g.gate.RLock()
	defer g.gate.RUnlock()
	for _, op := range ops {
		if op.Kind == metadata.OpPut && strings.HasPrefix(op.Key, "s/h/") {
			g.headRounds.Add(1)
			break
		}
	}
	return g.Store.Batch(ctx, ops)
}

// TestGroupCommitOneRoundTrip: appends to many streams that become durable
// while a commit round is in flight are committed by the next round, in one
// metadata round trip per commit shard.
func TestGroupCommitOneRoundTrip(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) { testGroupCommitOneRoundTrip(t, shards) })
	}
}

func testGroupCommitOneRoundTrip(t *testing.T, shards int) {
	gs := &gatedStore{Store: memstore.New()}
	prov := memprovider.New(1, memprovider.Faults{})
	c, err := stream.Open(context.Background(), stream.Config{Metadata: gs, ObjectWAL: prov, WriterID: "b", CommitShards: shards})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	const streams = 50
	sessions := make([]stream.Session, streams)
	for i := range sessions {
		info, err := c.Create(ctx, fmt.Sprint("g", i), stream.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sessions[i], err = c.AcquireSession(ctx, info.ID, stream.SessionOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := gs.headRounds.Load()
	gs.gate.Lock()
	futs := make([]*stream.AppendFuture, streams)
	for i, s := range sessions {
		futs[i] = c.AppendAsync(s, stream.AppendRequest{Entries: []stream.Entry{entry("x")}, ExpectedStart: -1})
	}
	for deadline := time.Now().Add(10 * time.Second); prov.Completed() < streams && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	gs.gate.Unlock()
	for _, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// At most two rounds per shard: one that may have started with a few
	// runs before the gate closed, and one carrying the rest.
	if rounds := gs.headRounds.Load() - before; rounds > int64(2*shards) {
		t.Fatalf("%d appends on %d streams took %d commit rounds with %d shards", streams, streams, rounds, shards)
	}
}

func TestFencing(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c1 := e.open(t, "b1")
	info, _ := c1.Create(ctx, "f", stream.CreateOptions{})
	s1, err := c1.AcquireSession(ctx, info.ID, stream.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Append(ctx, s1, stream.AppendRequest{Entries: []stream.Entry{entry("one")}, ExpectedStart: -1}); err != nil {
		t.Fatal(err)
	}
	c2 := e.open(t, "b2")
	if _, err := c2.AcquireSession(ctx, info.ID, stream.SessionOptions{}); !errors.Is(err, stream.ErrSessionBusy) {
		t.Fatalf("live session taken: %v", err)
	}
	s2, err := c2.AcquireSession(ctx, info.ID, stream.SessionOptions{AuthorityEpoch: 5})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Epoch <= s1.Epoch {
		t.Fatalf("epoch did not grow: %d -> %d", s1.Epoch, s2.Epoch)
	}
	_, err = c1.Append(ctx, s1, stream.AppendRequest{Entries: []stream.Entry{entry("stale")}, ExpectedStart: -1})
	if !errors.Is(err, stream.ErrFenced) || stream.CommitCertainty(err) != stream.NotCommitted {
		t.Fatalf("stale writer: %v", err)
	}
	if _, err := c2.Append(ctx, s2, stream.AppendRequest{Entries: []stream.Entry{entry("two")}, ExpectedStart: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := c2.Read(ctx, info.ID, 0, stream.ReadOptions{})
	if err != nil || len(res.Entries) != 2 || !bytes.Equal(res.Entries[1].Payload, []byte("two")) {
		t.Fatalf("read %+v %v", res, err)
	}
	if _, err := c1.AcquireSession(ctx, info.ID, stream.SessionOptions{AuthorityEpoch: 4}); !errors.Is(err, stream.ErrFenced) {
		t.Fatalf("lower authority epoch: %v", err)
	}
}

func TestProducerDedup(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.open(t, "b1")
	info, _ := c.Create(ctx, "d", stream.CreateOptions{})
	s, _ := c.AcquireSession(ctx, info.ID, stream.SessionOptions{})
	seq := func(first, last int64) *stream.ProducerSequence {
		return &stream.ProducerSequence{Mode: stream.SequenceContiguous, Producer: "p1", Epoch: 0, FirstSeq: first, LastSeq: last}
	}
	r1, err := c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte("b0"), RecordCount: 3}}, ExpectedStart: -1, Sequence: seq(0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	dup, err := c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte("b0"), RecordCount: 3}}, ExpectedStart: -1, Sequence: seq(0, 2)})
	if err != nil || !dup.Duplicate || dup.Start != r1.Start || dup.End != r1.End {
		t.Fatalf("dup %+v %v", dup, err)
	}
	if _, err := c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{entry("gap")}, ExpectedStart: -1, Sequence: seq(5, 5)}); !errors.Is(err, stream.ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	// Dedup survives a restart: a new process sees the committed table.
	c.Close()
	e.prov.Restart()
	c2 := e.open(t, "b1")
	s2, err := c2.AcquireSession(ctx, info.ID, stream.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dup, err = c2.Append(ctx, s2, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte("b0"), RecordCount: 3}}, ExpectedStart: -1, Sequence: seq(0, 2)})
	if err != nil || !dup.Duplicate || dup.Start != 0 {
		t.Fatalf("dup after restart %+v %v", dup, err)
	}
	r, err := c2.Append(ctx, s2, stream.AppendRequest{Entries: []stream.Entry{entry("next")}, ExpectedStart: -1, Sequence: seq(3, 3)})
	if err != nil || r.Start != 3 {
		t.Fatalf("next after restart %+v %v", r, err)
	}
}

func TestTrimSealDeleteAndLongPoll(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.open(t, "b1")
	info, _ := c.Create(ctx, "t", stream.CreateOptions{})
	s, _ := c.AcquireSession(ctx, info.ID, stream.SessionOptions{})
	for i := 0; i < 10; i++ {
		if _, err := c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{entry(fmt.Sprint(i))}, ExpectedStart: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Trim(ctx, info.ID, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx, info.ID, 3, stream.ReadOptions{}); !errors.Is(err, stream.ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	done := make(chan stream.ReadResult, 1)
	go func() {
		res, err := c.Read(ctx, info.ID, 10, stream.ReadOptions{Wait: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{entry("late")}, ExpectedStart: 10}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if len(res.Entries) != 1 || string(res.Entries[0].Payload) != "late" {
			t.Fatalf("long poll %+v", res)
		}
	case <-ctx.Done():
		t.Fatal("long poll never woke")
	}
	if err := c.Seal(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{entry("x")}, ExpectedStart: -1}); !errors.Is(err, stream.ErrStreamSealed) {
		t.Fatalf("append after seal: %v", err)
	}
	if err := c.Delete(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lookup(ctx, "t"); !errors.Is(err, stream.ErrStreamNotFound) {
		t.Fatalf("lookup after delete: %v", err)
	}
	again, err := c.Create(ctx, "t", stream.CreateOptions{})
	if err != nil || again.ID == info.ID || again.EndOffset != 0 {
		t.Fatalf("re-create %+v %v", again, err)
	}
}

func TestReleaseLetsAnotherWriterIn(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	c1, c2 := e.open(t, "b1"), e.open(t, "b2")
	info, _ := c1.Create(ctx, "r", stream.CreateOptions{})
	s1, err := c1.AcquireSession(ctx, info.ID, stream.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Append(ctx, s1, stream.AppendRequest{Entries: []stream.Entry{entry("a")}, ExpectedStart: -1}); err != nil {
		t.Fatal(err)
	}
	if err := c1.ReleaseSession(ctx, s1); err != nil {
		t.Fatal(err)
	}
	s2, err := c2.AcquireSession(ctx, info.ID, stream.SessionOptions{})
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if s2.Epoch <= s1.Epoch {
		t.Fatalf("epoch %d -> %d", s1.Epoch, s2.Epoch)
	}
	if r, err := c2.Append(ctx, s2, stream.AppendRequest{Entries: []stream.Entry{entry("b")}, ExpectedStart: 1}); err != nil || r.Start != 1 {
		t.Fatalf("append after takeover: %+v %v", r, err)
	}
}

// TestRebuildIndexPicksCommittedRuns: WAL writes that landed but were
// reported failed leave uncommitted runs whose offsets were later reused.
// After the whole offset index is lost, RebuildIndex must restore exactly
// the committed history, ignoring those runs.
func TestRebuildIndexPicksCommittedRuns(t *testing.T) {
	e := newEnv(t)
	e.prov.SetFaults(memprovider.Faults{LostAck: 0.15})
	ctx := ctxT(t)
	c := e.open(t, "b1")
	info, _ := c.Create(ctx, "rb", stream.CreateOptions{})
	s, _ := c.AcquireSession(ctx, info.ID, stream.SessionOptions{})
	for j := 0; j < 200; j++ {
		f := c.AppendAsync(s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: []byte(fmt.Sprint("p", j)), RecordCount: uint32(1 + j%2)}}})
		if j%4 == 3 {
			_, _ = f.Wait(ctx)
		}
	}
	e.prov.SetFaults(memprovider.Faults{})
	if _, err := c.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{entry("last")}}); err != nil {
		t.Fatal(err)
	}
	read := func(c *stream.Core) []string {
		var out []string
		for from := int64(0); ; {
			res, err := c.Read(ctx, info.ID, from, stream.ReadOptions{MaxEntries: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, en := range res.Entries {
				out = append(out, fmt.Sprintf("%d:%s", en.Offset, en.Payload))
			}
			if len(res.Entries) == 0 || res.Next >= res.EndOffset {
				return out
			}
			from = res.Next
		}
	}
	reader := e.open(t, "reader")
	want := read(reader)
	recs, _ := e.meta.RangeScan(ctx, "s/i/", "s/i/\xff", 0)
	for _, r := range recs {
		_ = e.meta.Delete(ctx, r.Key, metadata.AnyVersion)
	}
	rep, err := reader.RebuildIndex(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := read(reader)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("rebuilt history differs\ngot  %v\nwant %v", got, want)
	}
	if rep.Scanned <= rep.Rebuilt {
		t.Fatalf("no uncommitted runs were scanned (%+v): the test did not exercise the choice", rep)
	}
	t.Logf("%+v", rep)
}
