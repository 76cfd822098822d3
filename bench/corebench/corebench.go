// Package corebench is the stream core's load generator: it opens an
// embedded core (filesystem object store + bbolt metadata, both fsync'd, or
// the in-memory stores), creates N streams, keeps a window of appends in
// flight on each, and reports throughput, acknowledgement latency, metadata
// round trips and object PUTs per second, and the process's peak RSS.
//
// It measures; it must never be used by tests as a timing assertion.
package corebench

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/boltstore"
	mdmem "github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// Config is one benchmark run.
type Config struct {
	// Dir holds the data for the durable stores (a temp dir if empty).
	Dir string
	// Durable selects fsstore + boltstore (fsync'd); otherwise in-memory.
	Durable bool
	Streams int
	// EntryBytes is each entry's payload size; EntriesPerAppend entries go
	// in one append.
	EntryBytes, EntriesPerAppend int
	// Window is how many appends each stream keeps in flight.
	Window   int
	Duration time.Duration
	Warmup   time.Duration
	Profile  stream.Profile
	// FlushInterval of the Object WAL (0: its default).
	FlushInterval time.Duration
	// Progress, when set, receives a line per second.
	Progress func(string)
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
}

func (r Result) String() string {
	return fmt.Sprintf("streams=%d entry=%dB x%d window=%d durable=%v: %.0f appends/s, %.1f MB/s, ack p50=%v p99=%v p99.9=%v, "+
		"metadata %.0f round trips/s (%d ops), object PUTs %.1f/s, peak RSS %.0f MiB, errors %d",
		r.Config.Streams, r.Config.EntryBytes, r.Config.EntriesPerAppend, r.Config.Window, r.Config.Durable,
		r.AppendsPerSec, r.MBPerSec, r.P50, r.P99, r.P999, r.RoundTripsPerSec, r.MetaOps,
		r.PutsPerSec, float64(r.PeakRSSBytes)/(1<<20), r.Errors)
}

// countingStore counts PUTs.
type countingStore struct {
	objectstore.ObjectStore
	puts atomic.Int64
}

func (c *countingStore) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	c.puts.Add(1)
	return c.ObjectStore.Put(ctx, key, data, opts)
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
	if cfg.Window <= 0 {
		cfg.Window = 1
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	var meta metadata.Store
	var base objectstore.ObjectStore
	if cfg.Durable {
		dir := cfg.Dir
		if dir == "" {
			d, err := os.MkdirTemp("", "nereus-corebench-")
			if err != nil {
				return Result{}, err
			}
			defer os.RemoveAll(d)
			dir = d
		}
		fs, err := fsstore.Open(filepath.Join(dir, "objects"))
		if err != nil {
			return Result{}, err
		}
		base = fs
		bs, err := boltstore.Open(filepath.Join(dir, "meta.db"), boltstore.Options{})
		if err != nil {
			return Result{}, err
		}
		meta = bs
	} else {
		base, meta = osmem.New(), mdmem.New()
	}
	defer meta.Close()
	store := &countingStore{ObjectStore: base}
	prov, err := objectwal.Open(ctx, objectwal.Config{Store: store, Prefix: "wal/bench", FlushInterval: cfg.FlushInterval})
	if err != nil {
		return Result{}, err
	}
	core, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: prov, WriterID: "bench"})
	if err != nil {
		return Result{}, err
	}
	defer core.Close()

	sessions := make([]stream.Session, cfg.Streams)
	for i := range sessions {
		info, err := core.Create(ctx, "bench-"+strconv.Itoa(i), stream.CreateOptions{Profile: cfg.Profile})
		if err != nil {
			return Result{}, err
		}
		if sessions[i], err = core.AcquireSession(ctx, info.ID, stream.SessionOptions{}); err != nil {
			return Result{}, err
		}
		if cfg.Progress != nil && cfg.Streams >= 1000 && (i+1)%1000 == 0 {
			cfg.Progress(fmt.Sprintf("created %d/%d streams", i+1, cfg.Streams))
		}
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
	after := core.Stats()
	puts := store.puts.Load() - putsBefore
	cancel()
	wg.Wait()
	res := Result{
		Config: cfg, Appends: appends.Load(), Bytes: bytes.Load(), Seconds: secs, Errors: errs.Load(),
		MetaRoundTrips: after.MetadataRoundTrips - before.MetadataRoundTrips,
		MetaOps:        after.MetadataOps - before.MetadataOps,
		ObjectPuts:     puts,
	}
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
