package stream

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// opCounter counts the metadata operations that touch one stream's
// GC-owned key ranges (index, generation records, retire journal,
// protections) and all operations, by kind.
type opCounter struct {
	metadata.Store
	mu     sync.Mutex
	scans  int // range scans
	gets   int // point reads, including a batch's
	stream int // scans of per-stream GC ranges
	gen    int // scans of generation records from an offset (merge planning)
}

func (s *opCounter) count(f func()) {
	s.mu.Lock()
	f()
	s.mu.Unlock()
}

func (s *opCounter) snapshot() (scans, gets, stream int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scans, s.gets, s.stream
}

func (s *opCounter) Get(ctx context.Context, key string) (metadata.Record, error) {
	s.count(func() { s.gets++ })
	return s.Store.Get(ctx, key)
}

func (s *opCounter) RangeScan(ctx context.Context, min, max string, limit int) ([]metadata.Record, error) {
	s.count(func() {
		s.scans++
		for _, p := range []string{indexKeyPrefix, genKeyPrefix, retireKeyPrefix, protectKeyPrefix} {
			if strings.HasPrefix(min, p) {
				s.stream++
			}
		}
		if strings.HasPrefix(min, genKeyPrefix) && len(min) > len(genKeyPrefix)+17 {
			s.gen++ // not a whole-prefix scan (retirement, the orphan sweep)
		}
	})
	return s.Store.RangeScan(ctx, min, max, limit)
}

func (s *opCounter) Batch(ctx context.Context, ops []metadata.Op) ([]metadata.Result, error) {
	s.count(func() {
		for _, op := range ops {
			if op.Kind == metadata.OpGet {
				s.gets++
			}
		}
	})
	return s.Store.Batch(ctx, ops)
}

// TestQuietGCPassSkipsUnchangedStreams: a GC pass over streams nothing
// happened to since the last pass scans almost none of their key ranges,
// and a stream whose frontier moved is still collected on the next pass.
func TestQuietGCPassSkipsUnchangedStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	meta := &opCounter{Store: memstore.New()}
	c, err := Open(ctx, Config{Metadata: meta, ObjectWAL: memprovider.New(1, memprovider.Faults{}), WriterID: "b1",
		RetentionInterval: time.Hour,
		Lifecycle:         LifecycleConfig{GCDisabled: true, DisableMaterialization: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const streams = 300
	var ids []ID
	for i := range streams {
		info, err := c.Create(ctx, fmt.Sprintf("quiet-%03d", i), CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	// One stream gets enough single commits to publish index records.
	busy := ids[0]
	s, err := c.AcquireSession(ctx, busy, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := c.Append(ctx, s, AppendRequest{Entries: []Entry{{Payload: []byte{byte(i)}, RecordCount: 1}}, ExpectedStart: -1}); err != nil {
			t.Fatal(err)
		}
	}

	pass := func() (scans, gets, perStream int) {
		s0, g0, p0 := meta.snapshot()
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		s1, g1, p1 := meta.snapshot()
		return s1 - s0, g1 - g0, p1 - p0
	}
	firstScans, firstGets, firstStream := pass()
	t.Logf("first pass: %d scans (%d of stream GC ranges), %d reads", firstScans, firstStream, firstGets)
	if firstStream < 2*streams {
		t.Fatalf("the first pass scanned %d stream ranges, want every stream's journal and leases (>= %d)", firstStream, 2*streams)
	}
	// Quiet passes: the heads come from the listing, and only the streams
	// whose full or lease turn it is are scanned.
	total := 0
	const quiet = 4
	for range quiet {
		scans, gets, perStream := pass()
		t.Logf("quiet pass: %d scans (%d of stream GC ranges), %d reads", scans, perStream, gets)
		if perStream > firstStream/3 {
			t.Fatalf("a quiet pass scanned %d stream ranges (first pass %d)", perStream, firstStream)
		}
		if gets > streams+16 {
			t.Fatalf("a quiet pass made %d point reads for %d streams: heads read twice?", gets, streams)
		}
		total += perStream
	}
	if total > quiet*firstStream/4 {
		t.Fatalf("%d quiet passes scanned %d stream ranges (first pass %d)", quiet, total, firstStream)
	}

	// Move the busy stream's frontier: the next pass collects it.
	h, _ := c.owner(busy).committed()
	if h.IndexedThrough == 0 {
		t.Fatalf("no index records published (IndexedThrough 0)")
	}
	before, err := meta.Store.RangeScan(ctx, indexPrefix(busy), indexPrefix(busy)+"\xff", 0)
	if err != nil || len(before) == 0 {
		t.Fatalf("index records before trim: %d, %v", len(before), err)
	}
	if err := c.Trim(ctx, busy, h.IndexedThrough); err != nil {
		t.Fatal(err)
	}
	pass()
	left, err := meta.Store.RangeScan(ctx, indexPrefix(busy), indexKey(busy, h.IndexedThrough+1), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("%d index records at or below the new start %d survived the next pass", len(left), h.IndexedThrough)
	}

	// A stream that is gone leaves no memo behind.
	if err := c.Delete(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	pass()
	c.gc.mu.Lock()
	_, kept := c.gc.memo[ids[1]]
	n := len(c.gc.memo)
	c.gc.mu.Unlock()
	if kept || n != streams-1 {
		t.Fatalf("memo after a delete: %d entries, deleted stream kept=%v", n, kept)
	}
}

// TestGCFullTurnsCoverEveryStream: within gcFullEvery's passes every
// stream gets a full pass (the backstop for what the memo cannot see).
func TestGCFullTurnsCoverEveryStream(t *testing.T) {
	for _, n := range []int{1, 5, 15} {
		for id := ID(1); id < 2000; id += 7 {
			hits := 0
			for p := 1; p <= n; p++ {
				if gcDue(id, p, n) {
					hits++
				}
			}
			if hits != 1 {
				t.Fatalf("stream %d is due %d times in %d passes", id, hits, n)
			}
		}
	}
}

// TestQuietGCPassSkipsMergeScans: streams whose indexed generations are too
// few to merge yet are not rescanned for merges by every GC pass (each used
// to range-scan its generation records), and a stream that gains
// generations is looked at again and merged.
func TestQuietGCPassSkipsMergeScans(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	meta := &opCounter{Store: memstore.New()}
	c, err := Open(ctx, Config{Metadata: meta, ObjectWAL: memprovider.New(1, memprovider.Faults{}), ObjectStore: objmem.New(), WriterID: "b1",
		RetentionInterval: time.Hour,
		Lifecycle: LifecycleConfig{GCDisabled: true, Interval: 5 * time.Millisecond, GenerationBytes: 1 << 20,
			GenerationMaxAge: 5 * time.Millisecond, GCGrace: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	genRecs := func(id ID) int {
		recs, err := meta.Store.RangeScan(ctx, genPrefix(id), genPrefix(id)+"\xff", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	// appendGen appends one entry and waits until it is an indexed
	// generation of its own.
	appendGen := func(id ID, s Session, want int) {
		if _, err := c.Append(ctx, s, AppendRequest{Entries: []Entry{{Payload: []byte("x"), RecordCount: 1}}, ExpectedStart: -1}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "an indexed generation", func() bool {
			// The head too: a pass must not see the index grow later.
			h, _, err := c.readHeadView(ctx, id)
			return err == nil && h.GenIndexedThrough == h.End && genRecs(id) >= want
		})
	}
	const streams = 40
	var ids []ID
	var sessions []Session
	for i := range streams {
		info, err := c.Create(ctx, fmt.Sprintf("gens-%03d", i), CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.AcquireSession(ctx, info.ID, SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids, sessions = append(ids, info.ID), append(sessions, s)
		appendGen(info.ID, s, 1)
		appendGen(info.ID, s, 2)
	}
	pass := func() int {
		meta.mu.Lock()
		g0 := meta.gen
		meta.mu.Unlock()
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		meta.mu.Lock()
		defer meta.mu.Unlock()
		return meta.gen - g0
	}
	first := pass()
	t.Logf("first pass: %d generation-record scans for %d streams of two small generations", first, streams)
	if first < streams {
		t.Fatalf("the first pass scanned %d streams' generation records, want all %d", first, streams)
	}
	total := 0
	const quiet = 4
	for range quiet {
		n := pass()
		t.Logf("quiet pass: %d generation-record scans", n)
		total += n
	}
	if total > streams/4 {
		t.Fatalf("%d quiet passes scanned generation records %d times (%d streams)", quiet, total, streams)
	}
	// One stream grows to a full merge window: the pass after that merges.
	busy := ids[0]
	for n := 3; n <= mergeFanIn; n++ {
		appendGen(busy, sessions[0], n)
	}
	for i := 0; i < 100 && c.LifecycleStats().Merges == 0; i++ {
		pass()
		time.Sleep(5 * time.Millisecond)
	}
	if c.LifecycleStats().Merges == 0 {
		t.Fatalf("no merge of the stream that grew to %d generations: %+v", mergeFanIn, c.LifecycleStats())
	}
}
