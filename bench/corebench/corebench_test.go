package corebench

import (
	"context"
	"flag"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nereusstream/nereus-go/internal/testenv/etcdtest"
	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/etcdstore"
	"github.com/nereusstream/nereus-go/objectstore"
)

var (
	benchStreams = flag.Int("corebench.streams", 100, "streams")
	benchWindow  = flag.Int("corebench.window", 4, "appends in flight per stream")
	benchEntry   = flag.Int("corebench.entry", 1024, "entry bytes")
	benchDur     = flag.Duration("corebench.duration", 5*time.Second, "measured duration")
	benchDurable = flag.Bool("corebench.durable", true, "fsstore+boltstore instead of memory")
	benchObjects = flag.String("corebench.objects", "", "object store: empty follows -corebench.durable; s3 runs the Object WAL on versitygw (internal/testenv/s3test)")
	benchMeta    = flag.String("corebench.metadata", "", "metadata store: empty or bolt follows -corebench.durable (boltstore); log is logstore (durable); etcd uses an embedded etcd in this process (internal/testenv/etcdtest)")
	benchInfl    = flag.Int("corebench.inflight", 0, "total appends in flight, split over the streams (overrides -corebench.window; same offered load at any stream count)")
	benchShards  = flag.Int("corebench.shards", 0, "the core's commit shards (stream.Config.CommitShards; 0: its default, GOMAXPROCS)")
	benchWAL     = flag.String("corebench.walstore", "log", "durable Object WAL objects: log (walstore beside fsstore, as nereus serve's default) or files (fsstore alone)")
	benchNoGC    = flag.Bool("corebench.nogc", false, "disable the core's periodic GC pass")
	benchProf    = flag.String("corebench.cpuprofile", "", "write a CPU profile of the measured window (not stream creation) to this file")
	benchMemProf = flag.String("corebench.memprofile", "", "write heap profiles at the start (FILE.start) and end (FILE) of the measured window; the window's allocations: go tool pprof -sample_index=alloc_space -diff_base FILE.start BIN FILE")
)

func TestMain(m *testing.M) {
	code := s3test.Main(m)
	etcdtest.Stop()
	os.Exit(code)
}

// stores builds the stores the -corebench.objects and -corebench.metadata
// flags select (nil: Run's own, per -corebench.durable).
func stores(b *testing.B) (objectstore.ObjectStore, metadata.Store) {
	var objects objectstore.ObjectStore
	var meta metadata.Store
	switch *benchObjects {
	case "":
	case "s3":
		objects = s3test.Require(b).NewStore(b)
	default:
		b.Fatalf("-corebench.objects=%q: want empty or s3", *benchObjects)
	}
	switch *benchMeta {
	case "", "bolt", "log": // Run opens these itself (Config.LocalMetadata)
	case "etcd":
		st, err := etcdstore.Open(clientv3.Config{Endpoints: []string{etcdtest.Endpoint(b)}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()},
			etcdstore.Options{Prefix: etcdtest.Prefix()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		meta = st
	default:
		b.Fatalf("-corebench.metadata=%q: want empty, bolt, log or etcd", *benchMeta)
	}
	return objects, meta
}

// TestSmoke runs a tiny in-memory benchmark so the harness itself stays
// working; it asserts nothing about speed.
func TestSmoke(t *testing.T) {
	res, err := Run(context.Background(), Config{Streams: 3, Window: 2, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Appends == 0 || res.Errors != 0 {
		t.Fatalf("smoke run: %v", res)
	}
}

// BenchmarkCore runs the load generator once with the flags above and
// reports its figures as custom metrics, e.g.
//
//	go test ./bench/corebench -run '^$' -bench Core -benchtime 1x -corebench.streams 10000 -corebench.window 1
//	go test ./bench/corebench -run '^$' -bench Core -benchtime 1x -corebench.objects s3   # Object WAL on versitygw
//	go test ./bench/corebench -run '^$' -bench Core -benchtime 1x -corebench.objects s3 -corebench.metadata etcd
//	go test ./bench/corebench -run '^$' -bench Core -benchtime 1x -corebench.inflight 10000 -corebench.streams 10000 -corebench.cpuprofile cpu.out
//	go test ./bench/corebench -run '^$' -bench Core -benchtime 1x -corebench.inflight 10000 -corebench.streams 10000 -corebench.metadata log
func BenchmarkCore(b *testing.B) {
	objects, meta := stores(b)
	for i := 0; i < b.N; i++ {
		cfg := Config{Durable: *benchDurable, Streams: *benchStreams, Window: *benchWindow, Inflight: *benchInfl,
			EntryBytes: *benchEntry, Duration: *benchDur, Warmup: time.Second, Dir: b.TempDir(),
			Objects: objects, Metadata: meta, LocalMetadata: *benchMeta, LocalWAL: *benchWAL}
		if *benchMeta == "etcd" {
			cfg.LocalMetadata = ""
		}
		cfg.Lifecycle.GCDisabled = *benchNoGC
		cfg.CommitShards = *benchShards
		var onMeasure []func() func()
		if *benchMemProf != "" {
			onMeasure = append(onMeasure, func() func() {
				writeHeap(b, *benchMemProf+".start")
				return func() { writeHeap(b, *benchMemProf) }
			})
		}
		if *benchProf != "" {
			onMeasure = append(onMeasure, func() func() {
				f, err := os.Create(*benchProf)
				if err != nil {
					b.Fatal(err)
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					b.Fatal(err)
				}
				return func() { pprof.StopCPUProfile(); _ = f.Close() }
			})
		}
		if len(onMeasure) > 0 {
			cfg.OnMeasure = func() func() {
				var stops []func()
				for _, f := range onMeasure {
					stops = append(stops, f())
				}
				return func() {
					for _, stop := range stops {
						stop()
					}
				}
			}
		}
		res, err := Run(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.AppendsPerSec, "appends/s")
		b.ReportMetric(res.MBPerSec, "MB/s")
		b.ReportMetric(float64(res.P50.Microseconds()), "p50-µs")
		b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
		b.ReportMetric(res.RoundTripsPerSec, "meta-rt/s")
		b.ReportMetric(res.PutsPerSec, "puts/s")
		b.ReportMetric(float64(res.PeakRSSBytes)/(1<<20), "peakRSS-MiB")
		b.ReportMetric(float64(res.CPUPerAppend.Nanoseconds())/1e3, "cpu-µs/append")
		b.ReportMetric(res.AllocsPerAppend, "allocs/append")
		b.Log(res)
	}
}

// writeHeap writes the heap profile (allocations since the process
// started, by allocation site) to path.
func writeHeap(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
