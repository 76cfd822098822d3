package wal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

// TestMain stops the shared versitygw (started on first use by the S3
// benchmarks and tests) when the package's tests end.
func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

// Benchmarks (figures: go test -run '^$' -bench . -benchtime 100000x ./wal):
//
//	Producer/<store>/append=<n>x1KiB   records of 1 KiB, n per Append, 4 writers;
//	                                   MB/s via SetBytes, plus records/s, commits/s
//	ManifestCommit/<store>             CAS commits of a ~100-entry manifest, serial
//	ReplicaApply/<store>               a replica applying a pre-written log
//
// <store> is mem (CPU ceiling), fs (fsstore in a temp dir, fsync per object)
// or versitygw (s3store over loopback; skipped when versitygw is missing).

type benchStore struct {
	name string
	open func(b *testing.B) objectstore.ObjectStore
}

func benchStores() []benchStore {
	return []benchStore{
		{"mem", func(b *testing.B) objectstore.ObjectStore { return memstore.New() }},
		{"fs", func(b *testing.B) objectstore.ObjectStore {
			s, err := fsstore.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"versitygw", func(b *testing.B) objectstore.ObjectStore { return s3test.Require(b).NewStore(b) }},
	}
}

func benchRecords(n int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, 1024)
		for j := range out[i] {
			out[i][j] = byte(rng.Uint32())
		}
	}
	return out
}

func benchProducerConfig() ProducerConfig {
	return ProducerConfig{
		ManifestPath:      testManifest,
		FlushInterval:     10 * time.Millisecond,
		FlushBytes:        8 << 20,
		SegmentMaxBytes:   8 << 20,
		UploadConcurrency: 4,
		Logger:            quietLogger(),
	}
}

// countingStore counts manifest PUTs (commits, including the claim).
type countingStore struct {
	objectstore.ObjectStore
	mu      sync.Mutex
	commits int
}

func (c *countingStore) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	if key == testManifest {
		c.mu.Lock()
		c.commits++
		c.mu.Unlock()
	}
	return c.ObjectStore.Put(ctx, key, data, opts)
}

// produce appends total records, perAppend per Append, from writers
// goroutines, and waits for all of them.
func produce(b *testing.B, p *Producer, total, perAppend, writers int) {
	recs := benchRecords(256)
	ctx := context.Background()
	var wg sync.WaitGroup
	per := (total + writers - 1) / writers
	for w := range writers {
		n := min(per, total-w*per)
		wg.Go(func() {
			var pending []*Durability
			for i := 0; i < n; i += perAppend {
				k := min(perAppend, n-i)
				group := make([][]byte, k)
				for j := range group {
					group[j] = recs[(i+j+w)%len(recs)]
				}
				d, err := p.Append(ctx, group, nil)
				if err != nil {
					b.Error(err)
					return
				}
				pending = append(pending, d)
				if len(pending) >= 4096 {
					for _, d := range pending[:2048] {
						if _, err := d.Wait(ctx); err != nil {
							b.Error(err)
							return
						}
					}
					pending = pending[2048:]
				}
			}
			for _, d := range pending {
				if _, err := d.Wait(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkProducer(b *testing.B) {
	for _, bs := range benchStores() {
		for _, perAppend := range []int{64, 1} {
			b.Run(fmt.Sprintf("%s/append=%dx1KiB", bs.name, perAppend), func(b *testing.B) {
				store := &countingStore{ObjectStore: bs.open(b)}
				p, err := NewProducer(context.Background(), store, benchProducerConfig())
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close(context.Background())
				b.SetBytes(1024)
				b.ResetTimer()
				produce(b, p, b.N, perAppend, 4)
				b.StopTimer()
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N)/sec, "records/s")
				b.ReportMetric(float64(store.commits-1)/sec, "commits/s")
			})
		}
	}
}

func BenchmarkManifestCommit(b *testing.B) {
	for _, bs := range benchStores() {
		b.Run(bs.name, func(b *testing.B) {
			ctx := context.Background()
			st := NewStore(bs.open(b), testManifest)
			m := NewManifest()
			m.SetEpoch(1)
			ver, err := st.put(ctx, m, nil)
			if err != nil {
				b.Fatal(err)
			}
			meta := []RecordMeta{{IngestionTimeMs: time.Now().UnixMilli()}}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				work := m.clone()
				if _, err := work.Append(fmt.Sprintf("%s.segments/01JBENCHRUN/%016x", testManifest, i), meta, 8192); err != nil {
					b.Fatal(err)
				}
				if work.Count() > 100 { // a truncator keeps it bounded
					work.TruncateThrough(work.refs[0].end() - 1)
				}
				if ver, err = st.put(ctx, work, &ver); err != nil {
					b.Fatal(err)
				}
				m = work
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

func BenchmarkReplicaApply(b *testing.B) {
	for _, bs := range benchStores() {
		b.Run(bs.name, func(b *testing.B) {
			store := bs.open(b)
			cfg := benchProducerConfig()
			cfg.SegmentMaxBytes = 4 << 20
			p, err := NewProducer(context.Background(), store, cfg)
			if err != nil {
				b.Fatal(err)
			}
			produce(b, p, b.N, 64, 4)
			if err := p.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			var applied, bytes int
			r := NewReplica(store, ApplyFunc(func(_ context.Context, rec Record) error {
				applied++
				bytes += len(rec.Data)
				return nil
			}), ReplicaConfig{ManifestPath: testManifest, Logger: quietLogger()})
			b.SetBytes(1024)
			b.ResetTimer()
			if _, err := r.Poll(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if applied != b.N || bytes != b.N*1024 {
				b.Fatalf("applied %d records", applied)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkProducerWithRetention runs the fsstore producer while a
// snapshotter advances the snapshot pointer and a collector truncates and
// deletes in a loop (every 50ms plus the pass itself), reporting the largest
// manifest seen: it is bounded by the bytes written during one pass, not by
// the length of the run.
func BenchmarkProducerWithRetention(b *testing.B) {
	store, err := fsstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	cfg := benchProducerConfig()
	cfg.SegmentMaxBytes = 1 << 20 // many entries, to make growth visible
	p, err := NewProducer(context.Background(), store, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	g, err := NewCollector(store, GCConfig{ManifestPath: testManifest, Truncate: TruncateToSnapshot, GracePeriod: time.Nanosecond, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var maxBytes, entriesSeen, deleted, passes int
	done := make(chan struct{})
	go func() {
		defer close(done)
		st := NewStore(store, testManifest)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if raw, _, err := store.Get(ctx, testManifest); err == nil {
				maxBytes = max(maxBytes, len(raw))
			}
			for range 10 { // the snapshotter retries lost CAS races
				m, ver, _, err := st.Load(ctx)
				if err != nil || m.NextSequence() == 0 {
					break
				}
				entriesSeen = max(entriesSeen, m.Count())
				m.SetSnapshot(SnapshotPointer{Location: "snap", ThroughSeq: m.NextSequence() - 1})
				if st.Commit(ctx, m, ver) == nil {
					break
				}
			}
			if stats, err := g.Collect(ctx); err == nil {
				deleted += stats.DeletedSegments
				passes++
			}
		}
	}()
	b.SetBytes(1024)
	b.ResetTimer()
	produce(b, p, b.N, 64, 4)
	b.StopTimer()
	cancel()
	<-done
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(maxBytes), "max-manifest-bytes")
	b.ReportMetric(float64(entriesSeen), "max-entries")
	b.ReportMetric(float64(deleted), "segments-deleted")
	b.ReportMetric(float64(passes), "gc-passes")
}
