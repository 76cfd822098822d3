// Package corebench is the stream core's load generator: it opens a core
// (filesystem object store + bbolt metadata, both fsync'd, or the in-memory
// stores, or stores the caller hands in, such as S3 and etcd), creates N
// streams, keeps a window of appends in flight on each, and reports
// throughput, acknowledgement latency, metadata round trips and object PUTs
// per second, and the process's peak RSS.
//
// It measures; it must never be used by tests as a timing assertion.
package corebench

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/boltstore"
	"github.com/nereusstream/nereus-go/metadata/logstore"
	mdmem "github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/objectstore/walstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// Config is one benchmark run.
type Config struct {
	// Dir holds the data for the durable stores (a temp dir if empty).
	Dir string
	// Durable selects fsstore + boltstore (fsync'd); otherwise in-memory.
	Durable bool
	// LocalMetadata is the embedded metadata store Durable opens: "bolt"
	// (or empty: boltstore) or "log" (logstore).
	LocalMetadata string
	// LocalWAL is where Durable keeps the Object WAL's objects, as
	// `nereus serve --wal-object-store` does: "log" (or empty: walstore,
	// the server's default, beside fsstore for every other key) or
	// "files" (fsstore alone).
	LocalWAL string
	// Objects, when set, replaces the object store Durable selects (e.g.
	// an s3store on versitygw); Metadata likewise replaces the metadata
	// store (e.g. an etcdstore). The caller owns and closes them.
	Objects  objectstore.ObjectStore
	Metadata metadata.Store
	Streams  int
	// EntryBytes is each entry's payload size; EntriesPerAppend entries go
	// in one append.
	EntryBytes, EntriesPerAppend int
	// Window is how many appends each stream keeps in flight.
	Window int
	// Inflight, when set, fixes the total number of appends in flight
	// instead: each stream keeps max(1, Inflight/Streams) of them, so runs
	// with different stream counts offer the same total load.
	Inflight int
	Duration time.Duration
	Warmup   time.Duration
	Profile  stream.Profile
	// FlushInterval of the Object WAL (0: its default).
	FlushInterval time.Duration
	// Lifecycle configures the core's materialization and GC (zero: the
	// core's defaults, which are a server's defaults).
	Lifecycle stream.LifecycleConfig
	// CommitShards is the core's Config.CommitShards (0: its default).
	CommitShards int
	// Progress, when set, receives a line per second.
	Progress func(string)
	// OnMeasure, when set, is called when the measured window starts and
	// the function it returns when it ends (e.g. to profile only the
	// window, not stream creation).
	OnMeasure func() (stop func())
}

// Result is what a run measured (after warm-up).
type Result struct {
	Config                  Config
	Appends                 int64
	Bytes                   int64
	Seconds                 float64
	AppendsPerSec           float64
	MBPerSec                float64
	P50, P99                time.Duration
	P999                    time.Duration
	MetaRoundTrips, MetaOps int64
	RoundTripsPerSec        float64
	ObjectPuts              int64
	PutsPerSec              float64
	PeakRSSBytes            int64
	Errors                  int64
	// CPUSeconds is the process's user+system CPU time over the measured
	// window: on a shared machine CPU per append is steadier than appends/s.
	CPUSeconds   float64
	CPUPerAppend time.Duration
	// AllocsPerAppend and AllocBytesPerAppend are the heap allocations
	// of the whole process over the window divided by appends.
	AllocsPerAppend, AllocBytesPerAppend float64
	Goroutines                           int   // at the end of the window
	HeapBytes                            int64 // live heap objects at the end of the window
	Meta                                 MetaCounts
	HeadPutsPerSec                       float64
	// HeadBytesPerPut is the mean size of a head record written.
	HeadBytesPerPut float64
}

func (r Result) String() string {
	mc := r.Meta
	perRound := func(n int64) float64 { return float64(n) / math.Max(1, float64(r.MetaRoundTrips)) }
	return fmt.Sprintf("streams=%d entry=%dB x%d window=%d %s: %.0f appends/s, %.1f MB/s, ack p50=%v p99=%v p99.9=%v, "+
		"CPU %.2fs (%v/append, %.0f allocs %.0f B/append), metadata %.0f round trips/s (%d ops, %.0f ops/round), "+
		"head puts %.0f/s (%.1f/round, %.0f B each), index puts %d (%.0f B each), other puts %d, deletes %d, reads %d, scans %d (%d records), "+
		"object PUTs %.1f/s, goroutines %d, heap %.0f MiB, peak RSS %.0f MiB, errors %d",
		r.Config.Streams, r.Config.EntryBytes, r.Config.EntriesPerAppend, r.Config.Window, r.Config.stores(),
		r.AppendsPerSec, r.MBPerSec, r.P50, r.P99, r.P999,
		r.CPUSeconds, r.CPUPerAppend, r.AllocsPerAppend, r.AllocBytesPerAppend, r.RoundTripsPerSec, r.MetaOps, perRound(r.MetaOps),
		r.HeadPutsPerSec, perRound(mc.HeadPuts), r.HeadBytesPerPut, mc.IndexPuts, float64(mc.IndexPutBytes)/math.Max(1, float64(mc.IndexPuts)),
		mc.OtherPuts, mc.Deletes, mc.Reads, mc.Scans, mc.ScannedRecords,
		r.PutsPerSec, r.Goroutines, float64(r.HeapBytes)/(1<<20), float64(r.PeakRSSBytes)/(1<<20), r.Errors)
}

// stores names the stores a run uses.
func (c Config) stores() string {
	objects, meta := "mem", "mem"
	if c.Durable {
		objects, meta = "walstore+fsstore", "boltstore"
		if c.LocalWAL == "files" {
			objects = "fsstore"
		}
		if c.LocalMetadata == "log" {
			meta = "logstore"
		}
	}
	if c.Objects != nil {
		objects = typeName(c.Objects)
	}
	if c.Metadata != nil {
		meta = typeName(c.Metadata)
	}
	out := "objects=" + objects + " metadata=" + meta
	if c.CommitShards > 0 {
		out += " shards=" + strconv.Itoa(c.CommitShards)
	}
	return out
}

// typeName turns *s3store.Store into "s3store".
func typeName(v any) string {
	return strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", v), "*"), ".Store")
}

// Run executes one benchmark.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Streams <= 0 {
		cfg.Streams = 1
	}
	if cfg.EntryBytes <= 0 {
		cfg.EntryBytes = 1024
	}
	if cfg.EntriesPerAppend <= 0 {
		cfg.EntriesPerAppend = 1
	}
	if cfg.Inflight > 0 {
		cfg.Window = max(1, cfg.Inflight/cfg.Streams)
	}
	if cfg.Window <= 0 {
		cfg.Window = 1
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	var meta metadata.Store
	var base objectstore.ObjectStore
	if cfg.Durable && (cfg.Objects == nil || cfg.Metadata == nil) {
		dir := cfg.Dir
		if dir == "" {
			d, err := os.MkdirTemp("", "nereus-corebench-")
			if err != nil {
				return Result{}, err
			}
			defer os.RemoveAll(d)
			dir = d
		}
		if cfg.Objects == nil {
			fs, err := fsstore.Open(filepath.Join(dir, "objects"))
			if err != nil {
				return Result{}, err
			}
			defer fs.Close()
			base = fs
			switch cfg.LocalWAL {
			case "", "log":
				ws, err := walstore.Open(filepath.Join(dir, "walstore"), walstore.Options{})
				if err != nil {
					return Result{}, err
				}
				defer ws.Close()
				base = objectstore.Route(fs, "wal/", ws)
			case "files":
			default:
				return Result{}, fmt.Errorf("corebench: local WAL %q: want log or files", cfg.LocalWAL)
			}
		}
		if cfg.Metadata == nil {
			switch cfg.LocalMetadata {
			case "", "bolt":
				bs, err := boltstore.Open(filepath.Join(dir, "meta.db"), boltstore.Options{})
				if err != nil {
					return Result{}, err
				}
				defer bs.Close()
				meta = bs
			case "log":
				ls, err := logstore.Open(filepath.Join(dir, "meta"), logstore.Options{})
				if err != nil {
					return Result{}, err
				}
				defer ls.Close()
				meta = ls
			default:
				return Result{}, fmt.Errorf("corebench: local metadata %q: want bolt or log", cfg.LocalMetadata)
			}
		}
	} else if !cfg.Durable {
		if cfg.Objects == nil {
			base = osmem.New()
		}
		if cfg.Metadata == nil {
			m := mdmem.New()
			defer m.Close()
			meta = m
		}
	}
	if cfg.Objects != nil {
		base = cfg.Objects
	}
	if cfg.Metadata != nil {
		meta = cfg.Metadata
	}
	store := &countingStore{ObjectStore: base}
	cmeta := &countingMeta{Store: meta}
	prov, err := objectwal.Open(ctx, objectwal.Config{Store: store, Prefix: "wal/bench", FlushInterval: cfg.FlushInterval})
	if err != nil {
		return Result{}, err
	}
	core, err := stream.Open(ctx, stream.Config{Metadata: cmeta, ObjectWAL: prov, WriterID: "bench", Lifecycle: cfg.Lifecycle, CommitShards: cfg.CommitShards})
	if err != nil {
		return Result{}, err
	}
	defer core.Close()

	sessions, err := createStreams(ctx, core, cfg)
	if err != nil {
		return Result{}, err
	}
	payload := make([]byte, cfg.EntryBytes)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}

	var measuring atomic.Bool
	var appends, bytes, errs atomic.Int64
	lat := newLatencies()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// One goroutine drives a group of streams so 10,000 streams do not
	// need 10,000 goroutines per window slot.
	drivers := min(cfg.Streams, 64)
	for d := 0; d < drivers; d++ {
		wg.Add(1)
		go func(d int) {
			defer wg.Done()
			type slot struct {
				f     *stream.AppendFuture
				start time.Time
				sess  stream.Session
			}
			var inflight []slot
			submit := func(s stream.Session) {
				entries := make([]stream.Entry, cfg.EntriesPerAppend)
				for k := range entries {
					// The core takes ownership of payloads; each append
					// gets its own copy.
					p := append([]byte(nil), payload...)
					entries[k] = stream.Entry{Payload: p, RecordCount: 1, Timestamp: time.Now().UnixMilli()}
				}
				inflight = append(inflight, slot{f: core.AppendAsync(s, stream.AppendRequest{Entries: entries, ExpectedStart: -1}), start: time.Now(), sess: s})
			}
			for i := d; i < cfg.Streams; i += drivers {
				for w := 0; w < cfg.Window; w++ {
					submit(sessions[i])
				}
			}
			for len(inflight) > 0 {
				sl := inflight[0]
				inflight = inflight[1:]
				_, err := sl.f.Wait(runCtx)
				if runCtx.Err() != nil {
					return
				}
				if measuring.Load() {
					if err != nil {
						errs.Add(1)
					} else {
						appends.Add(1)
						bytes.Add(int64(cfg.EntryBytes * cfg.EntriesPerAppend))
						lat.add(time.Since(sl.start))
					}
				}
				submit(sl.sess)
			}
		}(d)
	}
	time.Sleep(cfg.Warmup)
	before := core.Stats()
	putsBefore := store.puts.Load()
	metaBefore := cmeta.c.snapshot()
	var stopMeasure func()
	if cfg.OnMeasure != nil {
		stopMeasure = cfg.OnMeasure()
	}
	cpuBefore := cpuTime()
	allocsBefore, allocBytesBefore := allocs()
	measuring.Store(true)
	start := time.Now()
	tick := time.NewTicker(time.Second)
	deadline := time.After(cfg.Duration)
loop:
	for {
		select {
		case <-tick.C:
			if cfg.Progress != nil {
				el := time.Since(start).Seconds()
				cfg.Progress(fmt.Sprintf("%4.0fs %9.0f appends/s %7.1f MB/s", el, float64(appends.Load())/el, float64(bytes.Load())/el/1e6))
			}
		case <-deadline:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	tick.Stop()
	measuring.Store(false)
	secs := time.Since(start).Seconds()
	cpu := cpuTime() - cpuBefore
	allocsAfter, allocBytesAfter := allocs()
	if stopMeasure != nil {
		stopMeasure()
	}
	after := core.Stats()
	puts := store.puts.Load() - putsBefore
	metaCounts := cmeta.c.snapshot().sub(metaBefore)
	goroutines, heap := runtime.NumGoroutine(), heapBytes()
	cancel()
	wg.Wait()
	res := Result{
		Config: cfg, Appends: appends.Load(), Bytes: bytes.Load(), Seconds: secs, Errors: errs.Load(),
		MetaRoundTrips: after.MetadataRoundTrips - before.MetadataRoundTrips,
		MetaOps:        after.MetadataOps - before.MetadataOps,
		ObjectPuts:     puts,
		CPUSeconds:     cpu.Seconds(), Goroutines: goroutines, HeapBytes: heap, Meta: metaCounts,
	}
	if res.Appends > 0 {
		res.CPUPerAppend = cpu / time.Duration(res.Appends)
		res.AllocsPerAppend = float64(allocsAfter-allocsBefore) / float64(res.Appends)
		res.AllocBytesPerAppend = float64(allocBytesAfter-allocBytesBefore) / float64(res.Appends)
	}
	res.HeadPutsPerSec = float64(metaCounts.HeadPuts) / secs
	res.HeadBytesPerPut = float64(metaCounts.HeadPutBytes) / math.Max(1, float64(metaCounts.HeadPuts))
	res.AppendsPerSec = float64(res.Appends) / secs
	res.MBPerSec = float64(res.Bytes) / secs / 1e6
	res.RoundTripsPerSec = float64(res.MetaRoundTrips) / secs
	res.PutsPerSec = float64(puts) / secs
	res.P50, res.P99, res.P999 = lat.quantile(0.5), lat.quantile(0.99), lat.quantile(0.999)
	res.PeakRSSBytes = peakRSS()
	return res, nil
}

// latencies keeps a bounded reservoir of samples.
type latencies struct {
	mu      sync.Mutex
	samples []time.Duration
	n       int64
}

func newLatencies() *latencies { return &latencies{samples: make([]time.Duration, 0, 1<<16)} }

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if len(l.samples) < cap(l.samples) {
		l.samples = append(l.samples, d)
		return
	}
	// Reservoir sampling keeps every sample equally likely.
	if j := int64(uint64(l.n*2654435761) % uint64(l.n)); j < int64(len(l.samples)) {
		l.samples[j] = d
	}
}

func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), l.samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(math.Min(float64(len(s)-1), q*float64(len(s))))]
}

// peakRSS reads the process's resident-set high-water mark (Linux).
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// createStreams creates and opens the sessions of cfg.Streams streams, 64
// at a time (a durable metadata store commits concurrent writes together,
// so 10,000 streams do not cost 10,000 fsyncs in a row).
func createStreams(ctx context.Context, core *stream.Core, cfg Config) ([]stream.Session, error) {
	sessions := make([]stream.Session, cfg.Streams)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < min(64, cfg.Streams); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.Streams {
					return
				}
				info, err := core.Create(ctx, "bench-"+strconv.Itoa(i), stream.CreateOptions{Profile: cfg.Profile})
				if err == nil {
					sessions[i], err = core.AcquireSession(ctx, info.ID, stream.SessionOptions{})
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				if n := done.Add(1); cfg.Progress != nil && cfg.Streams >= 1000 && n%1000 == 0 {
					cfg.Progress(fmt.Sprintf("created %d/%d streams", n, cfg.Streams))
				}
			}
		}()
	}
	wg.Wait()
	return sessions, firstErr
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapBytes is the size of the live and not yet swept heap objects.
func heapBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// allocs is the process's cumulative heap allocation count and bytes.
func allocs() (n, bytes uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		n = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		bytes = s[1].Value.Uint64()
	}
	return n, bytes
}
