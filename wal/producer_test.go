package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

const testManifest = "log/manifest"

func testConfig() ProducerConfig {
	return ProducerConfig{
		ManifestPath:           testManifest,
		FlushInterval:          2 * time.Millisecond,
		UploadInitialBackoff:   time.Millisecond,
		ManifestInitialBackoff: time.Millisecond,
		Logger:                 quietLogger(),
	}
}

func newTestProducer(t testing.TB, store objectstore.ObjectStore, cfg ProducerConfig) *Producer {
	t.Helper()
	p, err := NewProducer(testCtx(t), store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

type logRecord struct {
	seq  uint64
	data string
	meta string
}

// readLog replays the whole committed log through a fresh replica.
func readLog(t testing.TB, store objectstore.ObjectStore, path string) []logRecord {
	t.Helper()
	var out []logRecord
	r := NewReplica(store, ApplyFunc(func(_ context.Context, rec Record) error {
		out = append(out, logRecord{rec.Sequence, string(rec.Data), string(rec.GroupMeta)})
		return nil
	}), ReplicaConfig{ManifestPath: path, Logger: quietLogger()})
	if _, err := r.Poll(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustWait(t testing.TB, d *Durability) uint64 {
	t.Helper()
	seq, err := d.Wait(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

func TestProducerAppendsAreOrderedAndPlaced(t *testing.T) {
	store := memstore.New()
	p := newTestProducer(t, store, testConfig())
	ctx := testCtx(t)
	const writers, perWriter = 4, 50
	type result struct {
		recs [][]byte
		d    *Durability
	}
	results := make([][]result, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				recs := [][]byte{[]byte(fmt.Sprintf("w%d-%d-a", w, i)), []byte(fmt.Sprintf("w%d-%d-b", w, i))}
				d, err := p.Append(ctx, recs, []byte(fmt.Sprintf("m%d", w)))
				if err != nil {
					t.Error(err)
					return
				}
				results[w] = append(results[w], result{recs, d})
			}
		})
	}
	wg.Wait()
	bySeq := map[uint64]string{}
	for w := range writers {
		var last uint64
		for i, r := range results[w] {
			rng, err := r.d.WaitRange(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && rng.First <= last {
				t.Fatalf("writer %d: append %d at %d not after %d", w, i, rng.First, last)
			}
			last = rng.First
			for k, rec := range r.recs {
				if _, dup := bySeq[rng.At(k)]; dup {
					t.Fatalf("sequence %d assigned twice", rng.At(k))
				}
				bySeq[rng.At(k)] = string(rec)
			}
			pl, ok := r.d.Placement()
			if !ok || pl.FirstIndex < 0 {
				t.Fatalf("no placement: %+v", pl)
			}
			raw, err := store.GetRange(ctx, pl.Location, pl.Offset, pl.Length)
			if err != nil {
				t.Fatal(err)
			}
			frames, err := DecodeFrames(raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(frames) != 2 || !bytes.Equal(frames[0], r.recs[0]) || !bytes.Equal(frames[1], r.recs[1]) {
				t.Fatalf("placement %+v holds %q", pl, frames)
			}
		}
	}
	log := readLog(t, store, testManifest)
	if len(log) != writers*perWriter*2 {
		t.Fatalf("log holds %d records", len(log))
	}
	for i, r := range log {
		if r.seq != uint64(i) || bySeq[r.seq] != r.data {
			t.Fatalf("log[%d] = %+v, want seq %d data %q", i, r, i, bySeq[uint64(i)])
		}
		if w := r.data[1]; r.meta != "m"+string(w) {
			t.Fatalf("record %q carries meta %q", r.data, r.meta)
		}
	}
}

func TestProducerRejectsEmptyAppend(t *testing.T) {
	p := newTestProducer(t, memstore.New(), testConfig())
	if _, err := p.Append(testCtx(t), nil, nil); !errors.Is(err, ErrNoRecords) {
		t.Fatalf("err %v", err)
	}
}

func TestProducerFlushTriggers(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		cfg := testConfig()
		cfg.FlushInterval = time.Hour // only the size trigger can seal
		cfg.FlushBytes = 100
		p := newTestProducer(t, memstore.New(), cfg)
		d1, _ := p.Append(testCtx(t), [][]byte{make([]byte, 60)}, nil)
		d2, _ := p.Append(testCtx(t), [][]byte{make([]byte, 60)}, nil)
		if mustWait(t, d1) != 0 || mustWait(t, d2) != 1 {
			t.Fatal("wrong sequences")
		}
	})
	t.Run("interval", func(t *testing.T) {
		cfg := testConfig()
		cfg.FlushInterval = 20 * time.Millisecond
		p := newTestProducer(t, memstore.New(), cfg)
		start := time.Now()
		d, _ := p.Append(testCtx(t), [][]byte{[]byte("x")}, nil)
		mustWait(t, d)
		if el := time.Since(start); el < cfg.FlushInterval {
			t.Fatalf("sealed after %v, before FlushInterval", el)
		}
	})
}

func TestProducerRotationAndCoalescing(t *testing.T) {
	for _, batch := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			fs := newFaultStore(memstore.New())
			cfg := testConfig()
			cfg.FlushInterval = time.Hour
			cfg.FlushBytes = 1000 // ten 100-byte records (record bytes, not framed)
			cfg.SegmentMaxBytes = 3 * 108
			cfg.ManifestAppendBatchSize = batch
			cfg.UploadConcurrency = 1 // uploads finish in order: coalescing is deterministic
			p := newTestProducer(t, fs, cfg)
			before := fs.count("put", testManifest)
			var ds []*Durability
			for range 10 {
				d, err := p.Append(testCtx(t), [][]byte{make([]byte, 100)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ds = append(ds, d)
			}
			locs := map[string]int{}
			for i, d := range ds {
				if seq := mustWait(t, d); seq != uint64(i) {
					t.Fatalf("append %d at %d", i, seq)
				}
				pl, _ := d.Placement()
				locs[pl.Location]++
			}
			if len(locs) != 4 { // 3+3+3+1 records
				t.Fatalf("%d segments, want 4 (%v)", len(locs), locs)
			}
			commits := fs.count("put", testManifest) - before
			switch batch {
			case 0:
				if commits != 1 {
					t.Fatalf("%d commits for one flush with ManifestAppendBatchSize=0", commits)
				}
			case 1:
				if commits != 4 {
					t.Fatalf("%d commits with ManifestAppendBatchSize=1", commits)
				}
			case 2:
				if commits < 2 || commits > 4 {
					t.Fatalf("%d commits with ManifestAppendBatchSize=2", commits)
				}
			}
			m, _, _, _ := NewStore(fs, testManifest).Load(testCtx(t))
			if m.Count() != 4 || m.NextSequence() != 10 {
				t.Fatalf("manifest: %d entries, next %d", m.Count(), m.NextSequence())
			}
		})
	}
}

func TestProducerOversizedGroupGetsOwnSegment(t *testing.T) {
	cfg := testConfig()
	cfg.FlushInterval = time.Hour
	cfg.FlushBytes = 1000
	cfg.SegmentMaxBytes = 100
	p := newTestProducer(t, memstore.New(), cfg)
	small, _ := p.Append(testCtx(t), [][]byte{make([]byte, 10)}, nil)
	big, _ := p.Append(testCtx(t), [][]byte{make([]byte, 500), make([]byte, 500)}, nil)
	mustWait(t, small)
	mustWait(t, big)
	ps, _ := small.Placement()
	pb, _ := big.Placement()
	if ps.Location == pb.Location || pb.FirstIndex != 0 || pb.Length != 1000+2*frameHeaderSize {
		t.Fatalf("small %+v big %+v", ps, pb)
	}
}

func TestProducerCompressionAndLegacyFormats(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*ProducerConfig)
	}{
		{"zstd", func(c *ProducerConfig) { c.Compression = CompressionZstd }},
		{"legacy-v1", func(c *ProducerConfig) { c.LegacySegmentFormat = true }},
		{"legacy-v1-zstd", func(c *ProducerConfig) { c.LegacySegmentFormat, c.Compression = true, CompressionZstd }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memstore.New()
			cfg := testConfig()
			tc.mod(&cfg)
			p := newTestProducer(t, store, cfg)
			var ds []*Durability
			for i := range 20 {
				d, err := p.Append(testCtx(t), [][]byte{bytes.Repeat([]byte{byte(i)}, 200)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ds = append(ds, d)
			}
			for _, d := range ds {
				mustWait(t, d)
				if _, ok := d.Placement(); ok {
					t.Fatal("placement for a segment without range-readable frames")
				}
			}
			log := readLog(t, store, testManifest)
			if len(log) != 20 {
				t.Fatalf("%d records", len(log))
			}
			for i, r := range log {
				if r.data != string(bytes.Repeat([]byte{byte(i)}, 200)) {
					t.Fatalf("record %d wrong", i)
				}
			}
		})
	}
}

func TestTwoProducersOlderIsFenced(t *testing.T) {
	store := memstore.New()
	ctx := testCtx(t)
	old := newTestProducer(t, store, testConfig())
	d, _ := old.Append(ctx, [][]byte{[]byte("before")}, nil)
	mustWait(t, d)

	newer := newTestProducer(t, store, testConfig())
	if newer.Epoch() <= old.Epoch() {
		t.Fatalf("epochs old %d new %d", old.Epoch(), newer.Epoch())
	}
	d, err := old.Append(ctx, [][]byte{[]byte("stale")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Wait(ctx); !errors.Is(err, ErrFenced) || !errors.Is(err, ErrNotCommitted) {
		t.Fatalf("stale append: %v, want ErrFenced and ErrNotCommitted", err)
	}
	if _, err := old.Append(ctx, [][]byte{[]byte("after")}, nil); !errors.Is(err, ErrHalted) || !errors.Is(err, ErrFenced) {
		t.Fatalf("append after fencing: %v, want ErrHalted wrapping ErrFenced", err)
	}
	if err := old.Close(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("Close: %v", err)
	}
	d, _ = newer.Append(ctx, [][]byte{[]byte("fresh")}, nil)
	mustWait(t, d)
	log := readLog(t, store, testManifest)
	if len(log) != 2 || log[0].data != "before" || log[1].data != "fresh" {
		t.Fatalf("log %+v", log)
	}
}

// TestLostCommitResponse applies manifest CAS writes but loses the response;
// the producer must find its entries through TailLocations and never append
// them a second time.
func TestLostCommitResponse(t *testing.T) {
	fs := newFaultStore(memstore.New())
	var logBuf syncBuffer
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p := newTestProducer(t, fs, cfg)
	ctx := testCtx(t)
	lose := 0
	fs.setRule(func(op, key string) fault {
		if op == "put" && key == testManifest && lose < 3 {
			lose++
			return failAfter
		}
		return pass
	})
	var ds []*Durability
	for i := range 3 {
		d, err := p.Append(ctx, [][]byte{[]byte(fmt.Sprint(i))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		mustWait(t, d) // one at a time: each commit's response is lost once
		ds = append(ds, d)
	}
	for i, d := range ds {
		if seq, _ := d.Wait(ctx); seq != uint64(i) {
			t.Fatalf("append %d resolved at %d", i, seq)
		}
	}
	m, _, _, _ := NewStore(fs, testManifest).Load(ctx)
	es, _ := m.Entries()
	seen := map[string]bool{}
	for _, e := range es {
		if seen[e.Location] {
			t.Fatalf("location %s appended twice", e.Location)
		}
		seen[e.Location] = true
	}
	if len(es) != 3 || m.NextSequence() != 3 {
		t.Fatalf("%d entries, next %d", len(es), m.NextSequence())
	}
	if lose != 3 {
		t.Fatalf("only %d responses lost", lose)
	}
	// Each was resolved by finding the entries, not by re-appending.
	if n := strings.Count(logBuf.String(), "unknown outcome had landed"); n != 3 {
		t.Fatalf("%d lost commits resolved by re-reading, want 3:\n%s", n, logBuf.String())
	}
}

// TestLostCommitResponseThenTruncated: the lost commit landed and a
// truncator removed it before the producer reloaded; NextSequence proves it
// landed.
func TestLostCommitResponseThenTruncated(t *testing.T) {
	fs := newFaultStore(memstore.New())
	p := newTestProducer(t, fs, testConfig())
	ctx := testCtx(t)
	st := NewStore(memstoreOf(fs), testManifest)
	fs.setRule(func(op, key string) fault {
		if op == "put" && key == testManifest {
			// Land the commit, then truncate everything before answering.
			fs.rule = nil
			return failAfter
		}
		return pass
	})
	done := make(chan struct{})
	fs.setGate(func(op, key string) {
		if op == "get" && key == testManifest {
			select {
			case <-done:
			default:
				// First reload after the lost response: truncate first.
				close(done)
				m, ver, _, err := st.Load(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				m.TruncateThrough(m.NextSequence())
				if err := st.Commit(ctx, m, ver); err != nil {
					t.Error(err)
				}
			}
		}
	})
	d, _ := p.Append(ctx, [][]byte{[]byte("a"), []byte("b")}, nil)
	if seq := mustWait(t, d); seq != 0 {
		t.Fatalf("resolved at %d", seq)
	}
	fs.setGate(nil)
	d, _ = p.Append(ctx, [][]byte{[]byte("c")}, nil)
	if seq := mustWait(t, d); seq != 2 {
		t.Fatalf("next append at %d, want 2 (no double append)", seq)
	}
}

// memstoreOf unwraps a faultStore for direct, fault-free access.
func memstoreOf(fs *faultStore) objectstore.ObjectStore { return fs.inner }

func TestUploadRetries(t *testing.T) {
	fs := newFaultStore(memstore.New())
	p := newTestProducer(t, fs, testConfig())
	failures := 0
	fs.setRule(func(op, key string) fault {
		if op == "put" && keyClass(key) == "segment" && failures < 3 {
			failures++
			if failures%2 == 0 {
				return failAfter
			}
			return failClean
		}
		return pass
	})
	d, _ := p.Append(testCtx(t), [][]byte{[]byte("x")}, nil)
	mustWait(t, d)
	if n := fs.count("put", "seg.segments/x"); n != 4 {
		t.Fatalf("%d segment PUTs, want 4 (3 failures + success)", n)
	}
}

func TestUploadFailureHalts(t *testing.T) {
	fs := newFaultStore(memstore.New())
	cfg := testConfig()
	cfg.UploadMaxAttempts = 2
	p := newTestProducer(t, fs, cfg)
	fs.setRule(func(op, key string) fault {
		if op == "put" && keyClass(key) == "segment" {
			return failClean
		}
		return pass
	})
	ctx := testCtx(t)
	d, _ := p.Append(ctx, [][]byte{[]byte("x")}, nil)
	if _, err := d.Wait(ctx); !errors.Is(err, errInjected) || !errors.Is(err, ErrNotCommitted) {
		t.Fatalf("wait: %v", err)
	}
	if _, err := p.Append(ctx, [][]byte{[]byte("y")}, nil); !errors.Is(err, ErrHalted) {
		t.Fatalf("append after halt: %v", err)
	}
	if n := fs.count("put", "x.segments/"); n != 2 {
		t.Fatalf("%d upload attempts, want UploadMaxAttempts=2", n)
	}
	if m, _, _, _ := NewStore(fs, testManifest).Load(ctx); m.Count() != 0 {
		t.Fatal("failed segment was committed")
	}
}

func TestManifestRetryBounds(t *testing.T) {
	t.Run("transient", func(t *testing.T) {
		fs := newFaultStore(memstore.New())
		cfg := testConfig()
		cfg.ManifestMaxAttempts = 3
		p := newTestProducer(t, fs, cfg)
		fs.setRule(func(op, key string) fault {
			if op == "put" && key == testManifest {
				return failClean
			}
			return pass
		})
		d, _ := p.Append(testCtx(t), [][]byte{[]byte("x")}, nil)
		if _, err := d.Wait(testCtx(t)); err == nil || errors.Is(err, ErrNotCommitted) {
			t.Fatalf("after unknown outcomes: %v, want an unknown-outcome error", err)
		}
		if n := fs.count("put", testManifest); n != 1+3 { // claim + 3 attempts
			t.Fatalf("%d manifest PUTs", n)
		}
	})
	t.Run("conflicts", func(t *testing.T) {
		inner := memstore.New()
		cfg := testConfig()
		cfg.MaxCommitConflicts = 5
		p := newTestProducer(t, &conflictStore{ObjectStore: inner}, cfg)
		d, _ := p.Append(testCtx(t), [][]byte{[]byte("x")}, nil)
		if _, err := d.Wait(testCtx(t)); err == nil || !errors.Is(err, objectstore.ErrPreconditionFailed) {
			t.Fatalf("wait: %v", err)
		}
	})
	t.Run("claim", func(t *testing.T) {
		fs := newFaultStore(memstore.New())
		fs.setRule(func(op, key string) fault { return failClean })
		cfg := testConfig()
		cfg.MaxClaimAttempts = 3
		if _, err := NewProducer(testCtx(t), fs, cfg); err == nil {
			t.Fatal("claim succeeded")
		}
		if n := fs.count("get", testManifest); n != 3 {
			t.Fatalf("%d claim loads", n)
		}
	})
}

// conflictStore refuses every manifest update after the first with a 412,
// without anything having changed - a misclassified error the conflict
// bound must stop.
type conflictStore struct {
	objectstore.ObjectStore
	claimed atomic.Bool
}

func (c *conflictStore) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	if key == testManifest && c.claimed.Swap(true) {
		return objectstore.UpdateVersion{}, objectstore.ErrPreconditionFailed
	}
	return c.ObjectStore.Put(ctx, key, data, opts)
}

func TestBackpressureBlocksAndUnblocks(t *testing.T) {
	fs := newFaultStore(memstore.New())
	cfg := testConfig()
	cfg.MaxInFlightBytes = 100
	p := newTestProducer(t, fs, cfg)
	gate := make(chan struct{})
	fs.setGate(func(op, key string) {
		if op == "put" && key == testManifest {
			<-gate
		}
	})
	ctx := testCtx(t)
	d1, err := p.Append(ctx, [][]byte{make([]byte, 80)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan *Durability)
	go func() {
		d2, err := p.Append(ctx, [][]byte{make([]byte, 80)}, nil)
		if err != nil {
			t.Error(err)
		}
		returned <- d2
	}()
	// The second Append must be parked on the budget, not admitted.
	eventually(t, "second Append to block", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.space != nil && p.inFlightBatches == 1
	})
	select {
	case <-returned:
		t.Fatal("Append returned while the budget was exhausted")
	default:
	}
	// A cancelled context unblocks a waiter without admitting it.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Append(cctx, [][]byte{make([]byte, 80)}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Append: %v", err)
	}
	close(gate)
	mustWait(t, d1)
	d2 := <-returned
	mustWait(t, d2)
	// A lone Append larger than the whole budget is admitted when idle.
	d3, err := p.Append(ctx, [][]byte{make([]byte, 500)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustWait(t, d3)
}

func TestBackpressureBatchCount(t *testing.T) {
	fs := newFaultStore(memstore.New())
	cfg := testConfig()
	cfg.MaxInFlightBatches = 2
	p := newTestProducer(t, fs, cfg)
	gate := make(chan struct{})
	fs.setGate(func(op, key string) {
		if op == "put" && key == testManifest {
			<-gate
		}
	})
	ctx := testCtx(t)
	d1, _ := p.Append(ctx, [][]byte{[]byte("a")}, nil)
	d2, _ := p.Append(ctx, [][]byte{[]byte("b")}, nil)
	third := make(chan error, 1)
	go func() {
		d, err := p.Append(ctx, [][]byte{[]byte("c")}, nil)
		if err == nil {
			_, err = d.Wait(ctx)
		}
		third <- err
	}()
	eventually(t, "third Append to block", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.space != nil
	})
	close(gate)
	mustWait(t, d1)
	mustWait(t, d2)
	if err := <-third; err != nil {
		t.Fatal(err)
	}
}

// TestExternalTruncationIsNotFencing runs a truncator that Loads,
// TruncateThrough and Commits concurrently with a live producer at the same
// epoch. The producer must re-plan, never report fencing, and lose nothing.
func TestExternalTruncationIsNotFencing(t *testing.T) {
	store := memstore.New()
	var logBuf syncBuffer
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := newTestProducer(t, store, cfg)
	ctx := testCtx(t)
	stop := make(chan struct{})
	var truncations atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		st := NewStore(store, testManifest)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond): // pacing only
			}
			m, ver, _, err := st.Load(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if m.NextSequence() < 2 {
				continue
			}
			if n, _ := m.TruncateThrough(m.NextSequence() - 2); n == 0 {
				continue
			}
			m.SetSnapshot(SnapshotPointer{Location: "snap", ThroughSeq: m.NextSequence() - 2})
			switch err := st.Commit(ctx, m, ver); {
			case err == nil:
				truncations.Add(1)
			case errors.Is(err, objectstore.ErrPreconditionFailed):
			default:
				t.Error(err)
				return
			}
		}
	})
	var ds []*Durability
	for i := range 300 {
		d, err := p.Append(ctx, [][]byte{[]byte(fmt.Sprint(i))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
		if i%10 == 9 {
			mustWait(t, d)
		}
	}
	for i, d := range ds {
		if seq := mustWait(t, d); seq != uint64(i) {
			t.Fatalf("append %d at %d", i, seq)
		}
	}
	eventually(t, "a truncation to land", func() bool { return truncations.Load() > 0 })
	close(stop)
	wg.Wait()
	m, _, _, _ := NewStore(store, testManifest).Load(ctx)
	if m.NextSequence() != 300 || m.Epoch() != p.Epoch() || checkTiling(m) != nil {
		t.Fatalf("manifest next %d epoch %d", m.NextSequence(), m.Epoch())
	}
	if logBuf.String() != "" {
		t.Fatalf("warnings logged during healthy re-planning: %s", logBuf.String())
	}
	t.Logf("%d external truncations interleaved", truncations.Load())
}

// syncBuffer is a goroutine-safe bytes.Buffer for log capture.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestHealthyProducerIsSilentAndMetered(t *testing.T) {
	var logBuf syncBuffer
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Meter = provider.Meter("test")
	p := newTestProducer(t, memstore.New(), cfg)
	var ds []*Durability
	for range 30 {
		d, err := p.Append(testCtx(t), [][]byte{[]byte("abc"), []byte("de")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	for _, d := range ds {
		mustWait(t, d)
	}
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s := logBuf.String(); s != "" {
		t.Fatalf("healthy producer logged at Warn: %s", s)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(testCtx(t), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					got[m.Name] += dp.Value
				}
			}
		}
	}
	if got["nereus.wal.producer.records"] != 60 || got["nereus.wal.producer.bytes"] != 150 || got["nereus.wal.producer.commits"] < 1 {
		t.Fatalf("metrics %v", got)
	}
}

func TestCloseFlushesAndHalts(t *testing.T) {
	store := memstore.New()
	cfg := testConfig()
	cfg.FlushInterval = time.Hour
	p, err := NewProducer(testCtx(t), store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := p.Append(testCtx(t), [][]byte{[]byte("pending")}, nil)
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if mustWait(t, d) != 0 {
		t.Fatal("pending append not committed by Close")
	}
	if _, err := p.Append(testCtx(t), [][]byte{[]byte("late")}, nil); !errors.Is(err, ErrHalted) {
		t.Fatalf("append after Close: %v", err)
	}
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if log := readLog(t, store, testManifest); len(log) != 1 || log[0].data != "pending" {
		t.Fatalf("log %+v", log)
	}
}

func TestProducerConfigValidation(t *testing.T) {
	for _, cfg := range []ProducerConfig{
		{},
		{ManifestPath: "m", FlushBytes: -1},
		{ManifestPath: "m", Compression: 7},
	} {
		if _, err := NewProducer(testCtx(t), memstore.New(), cfg); err == nil {
			t.Fatalf("config %+v accepted", cfg)
		}
	}
	c, err := ProducerConfig{ManifestPath: "m"}.withDefaults()
	if err != nil || c.SegmentPrefix != "m.segments" || c.MaxInFlightBytes != DefaultMaxInFlightBytes ||
		c.UploadConcurrency != DefaultUploadConcurrency || !strings.HasPrefix(c.SegmentPrefix, "m") {
		t.Fatalf("defaults %+v %v", c, err)
	}
}

// TestCommitsStayOrderedWhenUploadsFinishOutOfOrder holds the first
// segment's upload until the second one has landed: commits must still follow
// ordinal order.
func TestCommitsStayOrderedWhenUploadsFinishOutOfOrder(t *testing.T) {
	store := &reorderStore{ObjectStore: memstore.New(), secondDone: make(chan struct{})}
	cfg := testConfig()
	cfg.FlushInterval = time.Hour
	cfg.FlushBytes = 200
	cfg.SegmentMaxBytes = 150 // one 100-byte record per segment
	cfg.ManifestAppendBatchSize = 1
	cfg.UploadConcurrency = 2
	p := newTestProducer(t, store, cfg)
	ctx := testCtx(t)
	d0, _ := p.Append(ctx, [][]byte{bytes.Repeat([]byte{'a'}, 100)}, nil)
	d1, _ := p.Append(ctx, [][]byte{bytes.Repeat([]byte{'b'}, 100)}, nil)
	if mustWait(t, d0) != 0 || mustWait(t, d1) != 1 {
		t.Fatal("sequences out of order")
	}
	m, _, _, _ := NewStore(store, testManifest).Load(ctx)
	es, _ := m.Entries()
	if len(es) != 2 || !strings.HasSuffix(es[0].Location, "/0000000000000000") || !strings.HasSuffix(es[1].Location, "/0000000000000001") {
		t.Fatalf("entries %+v", es)
	}
}

// reorderStore completes segment ordinal 1's PUT before letting ordinal 0's
// PUT through.
type reorderStore struct {
	objectstore.ObjectStore
	secondDone chan struct{}
}

func (r *reorderStore) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	if strings.HasSuffix(key, "/0000000000000000") {
		<-r.secondDone
	}
	v, err := r.ObjectStore.Put(ctx, key, data, opts)
	if strings.HasSuffix(key, "/0000000000000001") {
		close(r.secondDone)
	}
	return v, err
}

// scriptedStore returns scripted errors for manifest PUTs (after the claim)
// and can block them until the caller's context ends.
type scriptedStore struct {
	objectstore.ObjectStore
	mu      sync.Mutex
	claimed bool
	errs    []error // returned, in order, by the manifest PUTs after the claim
	block   bool    // block manifest PUTs until ctx ends
}

func (s *scriptedStore) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	if key == testManifest {
		s.mu.Lock()
		claimed := s.claimed
		s.claimed = true
		var err error
		if claimed && len(s.errs) > 0 {
			err, s.errs = s.errs[0], s.errs[1:]
		}
		block := claimed && s.block
		s.mu.Unlock()
		if block {
			<-ctx.Done()
			return objectstore.UpdateVersion{}, ctx.Err()
		}
		if err != nil {
			return objectstore.UpdateVersion{}, err
		}
	}
	return s.ObjectStore.Put(ctx, key, data, opts)
}

func TestCommitConflict409AndRefusal(t *testing.T) {
	t.Run("409 retried", func(t *testing.T) {
		s := &scriptedStore{ObjectStore: memstore.New(), errs: []error{objectstore.ErrConflict, objectstore.ErrConflict}}
		p := newTestProducer(t, s, testConfig())
		d, _ := p.Append(testCtx(t), [][]byte{[]byte("x")}, nil)
		if mustWait(t, d) != 0 {
			t.Fatal("wrong sequence")
		}
	})
	t.Run("invalid argument is fatal", func(t *testing.T) {
		s := &scriptedStore{ObjectStore: memstore.New(), errs: []error{objectstore.ErrInvalidArgument}}
		p := newTestProducer(t, s, testConfig())
		d, _ := p.Append(testCtx(t), [][]byte{[]byte("x")}, nil)
		if _, err := d.Wait(testCtx(t)); !errors.Is(err, objectstore.ErrInvalidArgument) || !errors.Is(err, ErrNotCommitted) {
			t.Fatalf("wait: %v", err)
		}
		if _, err := p.Append(testCtx(t), [][]byte{[]byte("y")}, nil); !errors.Is(err, ErrHalted) {
			t.Fatalf("append: %v", err)
		}
	})
}

func TestCloseWithExpiredContextAborts(t *testing.T) {
	s := &scriptedStore{ObjectStore: memstore.New(), block: true}
	p, err := NewProducer(testCtx(t), s, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := p.Append(testCtx(t), [][]byte{[]byte("stuck")}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v", err)
	}
	if _, err := d.Wait(testCtx(t)); err == nil || errors.Is(err, ErrNotCommitted) {
		t.Fatalf("an aborted commit: %v, want an unknown-outcome error", err)
	}
}

// TestExternalCommitBetweenProducerCommits lands a snapshotter's commit just
// before the producer's CAS, every time: each producer commit must lose the
// race once, re-plan on the fresh manifest, and keep the snapshotter's edit.
func TestExternalCommitBetweenProducerCommits(t *testing.T) {
	fs := newFaultStore(memstore.New())
	var logBuf syncBuffer
	cfg := testConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p := newTestProducer(t, fs, cfg)
	ctx := testCtx(t)
	st := NewStore(fs.inner, testManifest)
	var mu sync.Mutex
	interfere := true
	fs.setGate(func(op, key string) {
		mu.Lock()
		defer mu.Unlock()
		if op != "put" || key != testManifest || !interfere {
			return
		}
		interfere = false // the producer's retry goes through
		m, ver, _, err := st.Load(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		m.SetSnapshot(SnapshotPointer{Location: "snap", ThroughSeq: m.NextSequence()})
		m.TruncateThrough(m.NextSequence())
		if err := st.Commit(ctx, m, ver); err != nil {
			t.Error(err)
		}
	})
	for i := range 5 {
		mu.Lock()
		interfere = true
		mu.Unlock()
		d, _ := p.Append(ctx, [][]byte{[]byte(fmt.Sprint(i))}, nil)
		if seq := mustWait(t, d); seq != uint64(i) {
			t.Fatalf("append %d at %d", i, seq)
		}
	}
	if n := strings.Count(logBuf.String(), "re-planning"); n != 5 {
		t.Fatalf("%d re-plans, want 5:\n%s", n, logBuf.String())
	}
	if strings.Contains(logBuf.String(), "level=WARN") || strings.Contains(logBuf.String(), "fenced") {
		t.Fatalf("re-plan reported as a problem:\n%s", logBuf.String())
	}
	m, _, _, _ := st.Load(ctx)
	if m.Snapshot().Location != "snap" || m.Count() != 1 || m.NextSequence() != 5 || m.Epoch() != p.Epoch() {
		t.Fatalf("manifest: snap %+v, %d entries, next %d", m.Snapshot(), m.Count(), m.NextSequence())
	}
}
