// Package objectwal is the Object WAL provider of the stream core: one
// replication log (package wal) per writer identity in an object store, in
// which every flush becomes ONE segment object carrying the runs of many
// streams, each run an Append group whose manifest RecordMeta names the run
// (stream, session epoch/token, commit number, offsets): the durable commit
// intent.
//
// It owns physical bytes and the intent log only. It must never decide that
// a run is committed — the core's head CAS does — and it must never delete a
// segment that holds a run the core committed or might still commit.
//
// Layout under Config.Prefix:
//
//	<Prefix>/manifest                    the wal manifest (epoch-fenced per incarnation)
//	<Prefix>/seg/<runID>/<ordinal:016x>  segments (wal naming)
//
// Each run is one wal Append group: record 0 is a run header ("NRH1",
// identity, start, end) so segments are self-describing; then
// one record per entry: uvarint RecordCount, varint Timestamp, payload. The
// wal frames carry a CRC32C each, and wal places the group's frames
// contiguously, so a read fetches exactly the run's byte range (never the
// whole segment) and verifies every frame.
//
// Truncation: a manifest entry is dropped once every run in it has been
// released by the core (committed or not) or failed; a segment none of whose
// runs was committed is then deleted. At start-up, Recover settles every run
// left in the manifest by earlier incarnations with the core and does the
// same.
//
// Unreadable segments: a segment whose listing or read fails for it alone
// (corrupt) is skipped by ScanRuns (which then reports the scan incomplete,
// provider.ErrIncompleteScan) and by physical GC (which keeps it, reports it
// as pending and reads it again at its next relisting); both log it and
// count it (nereus.objectwal.unreadable_segments). It is never deleted and
// never stops the pass over the other segments.
//
// Completion callbacks: the waiter goroutine resolves durable writes in
// order by calling their done callbacks; Write may block on the waiter's
// queue (Config.WriteQueue) and on the producer's in-flight budget, so done
// must never call Write (provider.Provider; the core does not).
//
// Transient faults: when the wal producer halts (uploads or manifest commits
// kept failing: a full disk, an unreachable store), the provider closes it —
// every write it still held resolves not committed or unknown, and the core
// fails those appends, so none of them is ever committed — and claims the
// log again at a new epoch, with backoff, until the cause clears. Writes
// fail fast meanwhile and Health reports degraded; a newer incarnation's
// claim (fencing) is the only permanent failure.
package objectwal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/internal/simrt"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/stream/provider"
	"github.com/nereusstream/nereus-go/wal"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Config configures the provider. Zero values mean the documented defaults.
type Config struct {
	// Store holds the log. Required.
	Store objectstore.ObjectStore
	// Prefix is the log's key prefix, unique per writer identity (e.g.
	// "wal/<broker-id>"). Required.
	Prefix string
	// FlushMode says when a segment is sealed: FlushGroupCommit (the
	// default: as soon as the previous segment's upload finished, batching
	// what arrived meanwhile — latency-first, for a store whose PUT is
	// cheap) or FlushOnInterval (FlushInterval after the oldest pending
	// run — cost-first, for a store that charges per PUT).
	FlushMode FlushMode
	// FlushInterval is the longest a run waits before its segment is sealed
	// (default 5ms): with FlushGroupCommit only behind a slow upload, with
	// FlushOnInterval always. With FlushOnInterval one busy writer issues
	// about 2/FlushInterval PUTs per second (a segment and a manifest per
	// flush).
	FlushInterval time.Duration
	// FlushBytes seals a segment early at this many buffered bytes
	// (default 8 MiB).
	FlushBytes int
	// GroupCommitMinWait and GroupCommitMinBytes (FlushGroupCommit only):
	// runs written while earlier ones are still on their way are sealed,
	// once the previous upload finished, only when GroupCommitMinWait
	// (default 2ms) has passed since the previous seal or they add up to
	// GroupCommitMinBytes (default 512 KiB), so a busy log gets fewer,
	// larger segments (each costs a PUT, a manifest commit and a head-CAS
	// round); a run written to an idle log is still sealed at once. A
	// negative value turns the wait (or the size trigger) off
	// (wal.ProducerConfig.GroupCommitMinWait).
	GroupCommitMinWait  time.Duration
	GroupCommitMinBytes int
	// UploadConcurrency bounds parallel segment uploads (default 4).
	UploadConcurrency int
	// MaxInFlightBytes caps bytes written but not yet durable; Write blocks
	// beyond it (default 256 MiB).
	MaxInFlightBytes int
	// RetryBackoff is the first backoff of the wal producer's upload,
	// manifest-commit and claim retries (default: wal's, 100ms). With the
	// attempt limits it sets how long an unreachable store is retried
	// before the producer halts and the provider re-claims the log.
	RetryBackoff time.Duration
	// WriteQueue is how many writes may wait for durability at once before
	// Write blocks (default 16384; the queue is allocated whole at Open).
	WriteQueue int
	// CacheBytes bounds the decoded-run read cache (default 64 MiB).
	CacheBytes int64
	// TruncateInterval is how often settled manifest entries are dropped
	// (default 100ms). The manifest is rewritten whole on every flush, so
	// its size (the runs still unsettled or not yet truncated) is the cost
	// of each flush; truncating often keeps it to a few rounds' worth. The
	// truncation rides on the producer's next manifest commit (a commit of
	// its own only when the writer is idle), and a pass with nothing newly
	// settled does no I/O.
	TruncateInterval time.Duration
	// ScanPrefix is where ScanRuns looks for segments of every writer
	// (default: the parent of Prefix, e.g. "wal/").
	ScanPrefix string
	// Logger receives lifecycle events (default: warnings to stderr).
	Logger *slog.Logger
	// Meter receives the wal producer's metrics (segments, bytes, commits,
	// conflicts, commit latency; wal/metrics.go). Default: the global
	// OpenTelemetry meter, a no-op unless the process installed one.
	Meter metric.Meter
	// Runtime supplies the clock, timers, goroutines and randomness of the
	// provider and its wal producer (wal.Runtime). Nil: the real ones. The
	// stream package's deterministic simulator sets it.
	Runtime wal.Runtime
}

func (c *Config) withDefaults() error {
	if c.Store == nil || c.Prefix == "" {
		return errors.New("objectwal: Config.Store and Config.Prefix are required")
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = 5 * time.Millisecond
	}
	if c.FlushBytes <= 0 {
		c.FlushBytes = 8 << 20
	}
	switch {
	case c.GroupCommitMinWait == 0:
		c.GroupCommitMinWait = DefaultGroupCommitMinWait
	case c.GroupCommitMinWait < 0:
		c.GroupCommitMinWait = 0
	}
	switch {
	case c.GroupCommitMinBytes == 0:
		c.GroupCommitMinBytes = DefaultGroupCommitMinBytes
	case c.GroupCommitMinBytes < 0:
		c.GroupCommitMinBytes = 0
	}
	if c.UploadConcurrency <= 0 {
		c.UploadConcurrency = 4
	}
	if c.MaxInFlightBytes <= 0 {
		c.MaxInFlightBytes = 256 << 20
	}
	if c.WriteQueue <= 0 {
		c.WriteQueue = 1 << 14
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = 64 << 20
	}
	if c.TruncateInterval <= 0 {
		c.TruncateInterval = 100 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return nil
}

// Group-commit defaults (Config.GroupCommitMinWait, GroupCommitMinBytes).
const (
	DefaultGroupCommitMinWait  = 2 * time.Millisecond
	DefaultGroupCommitMinBytes = 512 << 10
)

// FlushMode is when the Object WAL seals a segment (Config.FlushMode).
type FlushMode uint8

const (
	// FlushGroupCommit seals as soon as no segment upload is in flight
	// (wal.ProducerConfig.GroupCommit); FlushInterval bounds the wait behind
	// a slow one.
	FlushGroupCommit FlushMode = iota
	// FlushOnInterval seals FlushInterval after the oldest pending run (or
	// at FlushBytes).
	FlushOnInterval
)

// Name is the provider name recorded in commit descriptors.
const Name = "objectwal"

// Provider is the Object WAL.
type Provider struct {
	cfg      Config
	rt       simrt.RT // a supplied runtime is cooperative: blocking waits tell it what they wait for
	log      *slog.Logger
	manifest *wal.Store
	cache    *runCache

	mu   sync.Mutex
	prod *wal.Producer
	// writeMu makes Append order and waiter (waitQ) order the same (Write).
	writeMu sync.Mutex
	// fatal is permanent: a newer incarnation claimed the log.
	fatal error
	// down is set while the producer is halted and the log is being
	// re-claimed (writes fail fast); degradedSince is when that began.
	down          error
	degradedSince time.Time
	recoveries    int64
	lastTruncWarn time.Time
	// truncDirty: a write resolved or a run was released since the
	// truncator's last pass (else it has nothing to do and does no I/O).
	truncDirty bool
	closing    bool // Close began: no recovery starts or installs a producer

	outstanding map[string]int               // segment -> runs written, not yet released
	committed   map[string][]provider.RunRef // segment -> runs released as committed
	// runsOf holds, per segment, the identities of the durable runs
	// written through Write until the core releases them (so Release can
	// record committed runs for reclaim.go).
	runsOf map[string]*segmentRuns
	// retained holds segments dropped from the manifest that hold
	// committed runs: physical GC (reclaim.go) deletes them once the core
	// judges every run retired.
	retained map[string]*retainedSegment
	// liveRuns are the producer run IDs of this process still writing
	// (their untracked segments may be in flight: never rediscovered).
	liveRuns    map[string]bool
	firstDead   map[string]time.Time
	reclaimPass int
	rediscoverQ []string
	segBytes    map[string]int64 // segment -> bytes known from placements (approximate size)
	// unreadable: this log's segments reclaim could not read (kept, and
	// reported as pending; reclaim.go), as of the last relisting.
	unreadable     map[string]unreadableSegment
	unreadableSegs metric.Int64Counter
	// resolvedThrough is the highest record sequence whose Durability the
	// waiter has processed: manifest entries at or below it are fully
	// accounted for in outstanding/committed.
	resolvedThrough uint64
	resolvedAny     bool
	recoverLimit    uint64 // entries below this are earlier incarnations'

	waitQ  chan pendingWrite
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// running counts the goroutines wg waits for (a cooperative runtime's
	// Block cannot wait on a WaitGroup).
	running atomic.Int32
}

type pendingWrite struct {
	prod *wal.Producer
	d    *wal.Durability
	ref  provider.RunRef
	done func(provider.Target, error)
}

// Open claims the log (fencing any earlier incarnation's producer) and
// starts the provider.
func Open(ctx context.Context, cfg Config) (*Provider, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	p := &Provider{
		cfg: cfg, log: cfg.Logger, rt: simrt.New(cfg.Runtime),
		manifest:    wal.NewStore(cfg.Store, cfg.Prefix+"/manifest"),
		cache:       newRunCache(cfg.CacheBytes),
		outstanding: map[string]int{}, committed: map[string][]provider.RunRef{},
		runsOf: map[string]*segmentRuns{}, retained: map[string]*retainedSegment{},
		liveRuns: map[string]bool{}, firstDead: map[string]time.Time{}, segBytes: map[string]int64{},
		waitQ:      make(chan pendingWrite, cfg.WriteQueue),
		unreadable: map[string]unreadableSegment{},
	}
	meter := cfg.Meter
	if meter == nil {
		meter = otel.GetMeterProvider().Meter("github.com/nereusstream/nereus-go/stream/objectwal")
	}
	var err error
	p.unreadableSegs, err = meter.Int64Counter("nereus.objectwal.unreadable_segments", metric.WithUnit("{segment}"),
		metric.WithDescription("segments skipped (and kept) because they could not be read, by op: scan (ScanRuns) or reclaim (physical GC)"))
	if err != nil {
		p.unreadableSegs, _ = noop.NewMeterProvider().Meter("objectwal").Int64Counter("nereus.objectwal.unreadable_segments")
	}
	prod, err := p.newProducer(ctx)
	if err != nil {
		return nil, err
	}
	p.prod = prod
	p.liveRuns[prod.RunID()] = true
	m, _, ok, err := p.manifest.Load(ctx)
	if err != nil {
		_ = prod.Close(ctx)
		return nil, fmt.Errorf("objectwal: loading manifest: %w", err)
	}
	if ok {
		p.recoverLimit = m.NextSequence()
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.goTracked(p.waiter)
	p.goTracked(p.truncator)
	return p, nil
}

func (p *Provider) newProducer(ctx context.Context) (*wal.Producer, error) {
	prod, err := wal.NewProducer(ctx, p.cfg.Store, wal.ProducerConfig{
		ManifestPath:        p.cfg.Prefix + "/manifest",
		SegmentPrefix:       p.cfg.Prefix + "/seg",
		FlushInterval:       p.cfg.FlushInterval,
		FlushBytes:          p.cfg.FlushBytes,
		GroupCommit:         p.cfg.FlushMode == FlushGroupCommit,
		GroupCommitMinWait:  p.cfg.GroupCommitMinWait,
		GroupCommitMinBytes: p.cfg.GroupCommitMinBytes,
		UploadConcurrency:   p.cfg.UploadConcurrency,
		MaxInFlightBytes:    p.cfg.MaxInFlightBytes,
		Logger:              p.cfg.Logger,
		Meter:               p.cfg.Meter,
		Runtime:             p.cfg.Runtime,

		UploadInitialBackoff:   p.cfg.RetryBackoff,
		ManifestInitialBackoff: p.cfg.RetryBackoff,
	})
	if err != nil {
		return nil, fmt.Errorf("objectwal: claiming log %s: %w", p.cfg.Prefix, err)
	}
	return prod, nil
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Write implements provider.Provider. It blocks only for the wal producer's
// in-flight budget (backpressure).
func (p *Provider) Write(run provider.Run, done func(provider.Target, error)) {
	records, meta := runRecords(run)
	p.mu.Lock()
	prod, fatal := p.prod, p.fatal
	if fatal == nil {
		fatal = p.down
	}
	p.mu.Unlock()
	if fatal != nil {
		done(nil, fatal)
		return
	}
	ref := provider.RunRef{Stream: run.Stream, Epoch: run.Epoch, Token: run.Token, Commit: run.Commit, Start: run.Start, End: run.End(), Committed: true}
	// The waiter must see writes in append (= sequence) order: truncation
	// drops every manifest entry at or below the last sequence the waiter
	// processed that has no outstanding run, so a write appended earlier but
	// queued later would find its segment deleted as garbage before its
	// run is counted outstanding — and then be committed. Appending and
	// queueing under one lock keeps the two orders equal.
	p.writeMu.Lock()
	d, err := prod.Append(p.ctx, records, meta)
	if err == nil {
		if h := testHookAppended; h != nil {
			h(d)
		}
		p.waitQ <- pendingWrite{prod: prod, d: d, ref: ref, done: done}
	}
	p.writeMu.Unlock()
	if err != nil {
		p.onProducerError(prod, err)
		done(nil, fmt.Errorf("objectwal: %w", err))
	}
}

// runRecords is a run's WAL records — its header, then one record per
// entry (record count, timestamp, payload) — and its manifest meta
// (encodeRunMeta). All of them are cut from one buffer sized for the
// largest encodings, so a run costs two allocations (the buffer and the
// slice of records) instead of one growing buffer per record and for the
// meta; with one append per stream per round, those allocations were per
// append. Each record and the meta is a capacity-clipped slice of the
// buffer, and the buffer is never written again once one is cut from it,
// so each one's bytes are exactly what its own encoding wrote (the meta's
// checksum covers the meta alone); the wal producer holds records and
// meta together until their segment is committed.
func runRecords(run provider.Run) (records [][]byte, meta []byte) {
	size := runHeaderMaxLen + runMetaMaxLen
	for _, e := range run.Entries {
		size += 2*binary.MaxVarintLen64 + len(e.Payload)
	}
	buf := make([]byte, 0, size)
	records = make([][]byte, 0, len(run.Entries)+1)
	buf = appendRunHeader(buf, run)
	records = append(records, buf[:len(buf):len(buf)])
	for _, e := range run.Entries {
		start := len(buf)
		buf = binary.AppendUvarint(buf, uint64(e.RecordCount))
		buf = binary.AppendVarint(buf, e.Timestamp)
		buf = append(buf, e.Payload...)
		records = append(records, buf[start:len(buf):len(buf)])
	}
	meta = appendRunMeta(buf[len(buf):], run)
	return records, meta[:len(meta):len(meta)]
}

// testHookAppended, when set (tests only), runs between a write's Append
// and its hand-over to the waiter.
var testHookAppended func(*wal.Durability)

// waiter resolves writes in append order (which is manifest order: Write
// appends and queues under writeMu).
func (p *Provider) waiter() {
	var targets targetChunk
	for {
		var pw pendingWrite
		p.rt.Wait(func() bool { return len(p.waitQ) > 0 || p.ctx.Err() != nil })
		select {
		case pw = <-p.waitQ:
		case <-simrt.Only(p.rt, p.ctx.Done(), len(p.waitQ) == 0):
			return
		}
		p.rt.Wait(func() bool { return simrt.IsClosed(pw.d.Done()) || p.ctx.Err() != nil })
		select {
		case <-pw.d.Done():
		case <-simrt.Only(p.rt, p.ctx.Done(), !simrt.IsClosed(pw.d.Done())):
			pw.done(nil, errors.New("objectwal: provider closed"))
			return
		}
		first, err := pw.d.Wait(p.ctx)
		if err != nil {
			// Not committed or unknown: the core fails the append, so even
			// if the records landed they can never be committed.
			if halt := pw.prod.Err(); halt != nil {
				// Start re-claiming the log now, not on the next Write.
				p.onProducerError(pw.prod, fmt.Errorf("%w: %w", wal.ErrHalted, halt))
			}
			pw.done(nil, fmt.Errorf("objectwal: segment not committed to the WAL: %w", err))
			continue
		}
		pl, ok := pw.d.Placement()
		if !ok {
			pw.done(nil, errors.New("objectwal: wal returned no byte placement (compressed segment?)"))
			continue
		}
		t := targets.encode(pl, pw.d.Count()-1)
		p.mu.Lock()
		p.outstanding[pl.Location]++
		sr := p.runsOf[pl.Location]
		if sr == nil {
			sr = &segmentRuns{location: pl.Location, runs: map[int64]provider.RunRef{}}
			p.runsOf[pl.Location] = sr
		}
		sr.runs[pl.Offset] = pw.ref
		p.segBytes[pl.Location] = max(p.segBytes[pl.Location], pl.Offset+pl.Length)
		last := first + uint64(pw.d.Count()) - 1
		if !p.resolvedAny || last > p.resolvedThrough {
			p.resolvedThrough, p.resolvedAny = last, true
		}
		p.truncDirty = true
		p.mu.Unlock()
		pw.done(t, nil)
	}
}

// onProducerError reacts to an error of prod: fencing is permanent; a halt
// (uploads or manifest commits kept failing: a full disk, an unreachable
// store) starts recovery — the halted producer is closed, which settles
// everything it still held (each in-flight write resolves not committed or
// unknown, and the core fails those appends: none of them is ever
// committed), and the log is re-claimed at a new epoch with backoff until
// the cause clears. Writes fail fast meanwhile and Health says degraded.
func (p *Provider) onProducerError(prod *wal.Producer, err error) {
	if errors.Is(err, wal.ErrFenced) {
		p.mu.Lock()
		if p.fatal == nil {
			p.fatal = fmt.Errorf("objectwal: log %s was claimed by a newer incarnation: %w", p.cfg.Prefix, err)
			if p.degradedSince.IsZero() {
				p.degradedSince = p.rt.Now()
			}
			p.log.Error("object WAL fenced; this process can no longer write", "prefix", p.cfg.Prefix)
		}
		p.mu.Unlock()
		return
	}
	if !errors.Is(err, wal.ErrHalted) {
		return
	}
	p.mu.Lock()
	if p.prod != prod || p.fatal != nil || p.down != nil || p.closing {
		p.mu.Unlock()
		return
	}
	p.down = fmt.Errorf("objectwal: WAL producer halted, re-claiming the log: %w", err)
	p.degradedSince = p.rt.Now()
	p.wg.Add(1)
	p.running.Add(1)
	p.mu.Unlock()
	p.log.Warn("object WAL cannot write; recovering", "prefix", p.cfg.Prefix, "err", err)
	p.rt.Go(func() { p.recoverProducer(prod) })
}

// goTracked runs f on the runtime, counted by wg (and running).
func (p *Provider) goTracked(f func()) {
	p.wg.Add(1)
	p.running.Add(1)
	p.rt.Go(func() {
		defer p.wg.Done()
		defer p.running.Add(-1)
		f()
	})
}

// recoverProducer closes the halted producer and claims the log again until
// it succeeds, is fenced, or the provider closes.
func (p *Provider) recoverProducer(halted *wal.Producer) {
	defer p.wg.Done()
	defer p.running.Add(-1)
	cctx, cancel := p.rt.WithTimeout(p.ctx, 30*time.Second)
	_ = halted.Close(cctx) // returns the halt cause; its writes resolve
	cancel()
	for backoff := 100 * time.Millisecond; p.ctx.Err() == nil; backoff = min(2*backoff, 5*time.Second) {
		np, err := p.newProducer(p.ctx)
		if err == nil {
			p.mu.Lock()
			if p.closing {
				p.mu.Unlock()
				_ = np.Close(context.Background())
				return
			}
			delete(p.liveRuns, halted.RunID()) // settled: its leftovers may be rediscovered
			p.liveRuns[np.RunID()] = true
			since := p.degradedSince
			p.prod, p.down, p.degradedSince = np, nil, time.Time{}
			p.recoveries++
			p.mu.Unlock()
			p.log.Warn("object WAL recovered: log re-claimed", "prefix", p.cfg.Prefix, "epoch", np.Epoch(),
				"degraded_for", p.rt.Now().Sub(since).Round(time.Millisecond))
			return
		}
		if errors.Is(err, wal.ErrFenced) {
			p.mu.Lock()
			p.down = nil
			p.mu.Unlock()
			p.onProducerError(nil, err)
			return
		}
		p.mu.Lock()
		p.down = fmt.Errorf("objectwal: WAL producer halted, re-claiming the log (last attempt: %v)", err)
		p.mu.Unlock()
		_ = p.rt.Sleep(p.ctx, backoff)
	}
}

var _ provider.HealthReporter = (*Provider)(nil)

// Health implements provider.HealthReporter: degraded from the moment the
// WAL producer halted (or was fenced) until the log is re-claimed.
func (p *Provider) Health() provider.Health {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := provider.Health{Recoveries: p.recoveries}
	switch {
	case p.fatal != nil:
		h.Degraded, h.Reason, h.Since = true, p.fatal.Error(), p.degradedSince
	case p.down != nil:
		h.Degraded, h.Reason, h.Since = true, p.down.Error(), p.degradedSince
	}
	return h
}

// Read implements provider.Provider.
func (p *Provider) Read(ctx context.Context, target provider.Target, runStart, from int64, maxBytes int) ([]provider.ReadEntry, error) {
	tg, err := decodeTarget(target)
	if err != nil {
		return nil, err
	}
	entries, ok := p.cache.get(string(target))
	if !ok {
		entries, err = readRun(ctx, p.cfg.Store, tg, runStart)
		if err != nil {
			return nil, err
		}
		p.cache.put(string(target), entries)
	}
	var out []provider.ReadEntry
	size := 0
	for _, e := range entries {
		if e.Offset+int64(e.RecordCount) <= from {
			continue
		}
		if len(out) > 0 && size+len(e.Payload) > maxBytes {
			break
		}
		out = append(out, e)
		size += len(e.Payload)
	}
	return out, nil
}

// ReadRun reads and verifies the whole run a target of this provider names
// from store, without a provider (an oracle or a debugging tool: no cache,
// no claim).
func ReadRun(ctx context.Context, store objectstore.ObjectStore, target provider.Target, runStart int64) ([]provider.ReadEntry, error) {
	tg, err := decodeTarget(target)
	if err != nil {
		return nil, err
	}
	return readRun(ctx, store, tg, runStart)
}

func readRun(ctx context.Context, store objectstore.ObjectStore, tg target, runStart int64) ([]provider.ReadEntry, error) {
	raw, err := store.GetRange(ctx, tg.location, tg.offset, tg.length)
	switch {
	case errors.Is(err, objectstore.ErrNotFound):
		return nil, fmt.Errorf("%w: segment %s", provider.ErrNotFound, tg.location)
	case errors.Is(err, objectstore.ErrCorrupt):
		return nil, fmt.Errorf("%w: segment %s: %w", provider.ErrCorrupt, tg.location, err)
	case err != nil:
		return nil, err
	}
	if int64(len(raw)) != tg.length {
		return nil, fmt.Errorf("%w: segment %s is shorter than the run's range", provider.ErrCorrupt, tg.location)
	}
	entries, err := decodeRun(raw, runStart)
	if err != nil {
		return nil, fmt.Errorf("%w: segment %s: %w", provider.ErrCorrupt, tg.location, err)
	}
	return entries, nil
}

// TargetSegment returns the segment object a target of this provider
// names (for oracles and tools).
func TargetSegment(target provider.Target) (string, error) {
	tg, err := decodeTarget(target)
	return tg.location, err
}

// segmentRuns is one segment's runs written through Write and not yet
// released, by byte offset: a run is identified by its segment and offset
// (two runs of a segment never start at the same byte, and the waiter is
// the only place a target of this process's writes is made). Keyed so,
// Release finds a run from its target's bytes without allocating (the map
// keyed by the whole target needed a string copy of each target, and
// decoding the target another of its location), and location is the
// segment's canonical name for the other per-segment maps. Truncation's
// and reclaim's inputs are fed exactly as before: Release decrements the
// segment's outstanding count and records a committed run (with its
// identity when found here, unknown otherwise) once per released target,
// under p.mu, so a segment with an unreleased run is still never truncated
// and every committed run still reaches reclaim's judge.
type segmentRuns struct {
	location string
	runs     map[int64]provider.RunRef
}

// targetPlace is the segment and byte offset a target names, aliasing
// target's bytes (no allocation); ok is false if it does not parse.
func targetPlace(target provider.Target) (location []byte, offset int64, ok bool) {
	r := bin.Reader{B: target}
	if r.U8() != targetV1 {
		return nil, 0, false
	}
	location = r.Bytes()
	offset = int64(r.Uvarint())
	return location, offset, r.Err() == nil
}

// Release implements provider.Provider.
func (p *Provider) Release(target provider.Target, committed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if loc, off, ok := targetPlace(target); ok {
		if sr := p.runsOf[string(loc)]; sr != nil {
			if ref, known := sr.runs[off]; known {
				delete(sr.runs, off)
				if len(sr.runs) == 0 {
					delete(p.runsOf, sr.location)
				}
				p.releaseLocked(sr.location, target, ref, committed)
				return
			}
		}
	}
	tg, err := decodeTarget(target)
	if err != nil {
		return
	}
	// Not written through this process's Write: identity unknown, so
	// reclaim.go must look it up before judging the segment.
	p.releaseLocked(tg.location, target, provider.RunRef{Stream: ^uint64(0)}, committed)
}

// releaseLocked settles a released run of segment location (p.mu held).
func (p *Provider) releaseLocked(location string, target provider.Target, ref provider.RunRef, committed bool) {
	if p.outstanding[location]--; p.outstanding[location] <= 0 {
		delete(p.outstanding, location)
	}
	p.truncDirty = true
	if committed {
		p.committed[location] = append(p.committed[location], ref)
	} else {
		p.cache.drop(string(target))
	}
}

// Recover implements provider.Provider.
func (p *Provider) Recover(ctx context.Context, settle func(context.Context, provider.Intent) (bool, error)) error {
	m, _, ok, err := p.manifest.Load(ctx)
	if err != nil || !ok {
		return err
	}
	entries, err := m.Entries()
	if err != nil {
		return err
	}
	settled := 0
	for _, e := range entries {
		if e.Sequence >= p.recoverLimit {
			break
		}
		for _, md := range e.Metadata {
			run, err := decodeRunMeta(md.Payload)
			if err != nil {
				return fmt.Errorf("objectwal: intent in %s: %w", e.Location, err)
			}
			committed, err := settle(ctx, provider.Intent{Run: run})
			if err != nil {
				return err
			}
			if committed {
				p.mu.Lock()
				p.committed[e.Location] = append(p.committed[e.Location], provider.RunRef{Stream: run.Stream,
					Epoch: run.Epoch, Token: run.Token, Commit: run.Commit, Start: run.Start, End: run.End(), Committed: true})
				p.mu.Unlock()
			}
			settled++
		}
	}
	if settled > 0 {
		p.log.Info("settled intents of earlier incarnations", "prefix", p.cfg.Prefix, "runs", settled)
	}
	if p.recoverLimit > 0 {
		return p.truncate(ctx, p.recoverLimit-1)
	}
	return nil
}

// truncator drops manifest entries whose runs are all settled. It does no
// I/O unless something was resolved or released since its last pass
// (truncDirty): an idle node reads and writes nothing. The truncation itself
// rides on the producer's own manifest commits (wal.Producer.Truncate), so
// the producer stays the manifest's only writer and never re-plans a CAS.
func (p *Provider) truncator() {
	for {
		if p.rt.Sleep(p.ctx, p.cfg.TruncateInterval) != nil {
			return
		}
		p.mu.Lock()
		limit, any, dirty := p.resolvedThrough, p.resolvedAny, p.truncDirty
		p.truncDirty = false
		p.mu.Unlock()
		if !any || !dirty {
			continue
		}
		ctx, cancel := p.rt.WithTimeout(p.ctx, 30*time.Second)
		if err := p.truncate(ctx, limit); err != nil && p.ctx.Err() == nil {
			p.mu.Lock()
			p.truncDirty = true // try again next tick
			// At most one warning per 30 s: while the store is down this
			// fails every TruncateInterval.
			now := p.rt.Now()
			warn := now.Sub(p.lastTruncWarn) >= 30*time.Second
			if warn {
				p.lastTruncWarn = now
			}
			p.mu.Unlock()
			if warn {
				p.log.Warn("manifest truncation failed (retrying; repeats suppressed for 30s)", "prefix", p.cfg.Prefix, "err", err)
			}
		}
		cancel()
	}
}

// truncate drops the prefix of manifest entries that end at or below limit
// and hold no outstanding run (in the producer's next manifest commit),
// then deletes the segments among them that hold no committed run.
func (p *Provider) truncate(ctx context.Context, limit uint64) error {
	p.mu.Lock()
	prod, down := p.prod, p.down
	if down == nil {
		down = p.fatal
	}
	p.mu.Unlock()
	if down != nil {
		return down
	}
	drop, err := prod.Truncate(ctx, func(entries []wal.Entry) (uint64, bool) {
		var through uint64
		any := false
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, e := range entries {
			if e.End()-1 > limit || p.outstanding[e.Location] > 0 && PlantedBug != BugTruncateIgnoresOutstanding {
				break
			}
			through, any = e.End()-1, true
		}
		return through, any
	})
	if err != nil {
		return err
	}
	for _, e := range drop {
		p.mu.Lock()
		runs := p.committed[e.Location]
		size := p.segBytes[e.Location]
		delete(p.committed, e.Location)
		delete(p.segBytes, e.Location)
		if len(runs) > 0 {
			// Referenced by the offset index: physical GC deletes it
			// once the core retires every committed run in it.
			p.retain(e.Location, runs, size)
		}
		p.mu.Unlock()
		if len(runs) > 0 && PlantedBug != BugTruncateDeletesCommitted {
			continue
		}
		if err := p.cfg.Store.Delete(ctx, e.Location, nil); err != nil && !errors.Is(err, objectstore.ErrNotFound) {
			p.log.Warn("deleting garbage segment failed", "segment", e.Location, "err", err)
		}
	}
	return nil
}

// Close implements provider.Provider.
func (p *Provider) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closing = true
	prod := p.prod
	p.mu.Unlock()
	err := prod.Close(ctx)
	p.mu.Lock()
	if p.down != nil {
		err = nil // the halt is what recovery was handling, not a Close failure
	}
	p.mu.Unlock()
	p.cancel()
	p.rt.Wait(func() bool { return p.running.Load() == 0 })
	p.wg.Wait()
	// Anything still queued never resolved: the core treats those appends
	// as unknown and the next incarnation settles them.
	for {
		select {
		case pw := <-p.waitQ:
			pw.done(nil, errors.New("objectwal: provider closed"))
		default:
			return err
		}
	}
}

// --- encodings ---

const (
	runHeaderMagic = "NRH1"
	runMetaV1      = 1
	targetV1       = 1
)

// encodeRunMeta is the manifest RecordMeta payload: the run's identity and
// offsets, i.e. the commit intent.
func encodeRunMeta(run provider.Run) []byte {
	return appendRunMeta(make([]byte, 0, runMetaMaxLen), run)
}

// appendRunMeta appends encodeRunMeta's bytes to the empty slice b (the
// checksum covers all of b, so b must start empty).
func appendRunMeta(b []byte, run provider.Run) []byte {
	w := bin.Writer{B: b}
	w.U8(runMetaV1)
	w.U64(run.Stream)
	w.Uvarint(run.Epoch)
	w.U64(run.Token)
	w.Uvarint(run.Commit)
	w.Varint(run.Start)
	w.Varint(run.End())
	return w.Seal()
}

func decodeRunMeta(b []byte) (provider.Run, error) {
	body, err := bin.Open(b)
	if err != nil {
		return provider.Run{}, err
	}
	r := bin.Reader{B: body}
	if v := r.U8(); v != runMetaV1 {
		return provider.Run{}, fmt.Errorf("run meta version %d", v)
	}
	run := provider.Run{Stream: r.U64(), Epoch: r.Uvarint(), Token: r.U64(), Commit: r.Uvarint(), Start: r.Varint()}
	end := r.Varint()
	if err := r.Done(); err != nil || end <= run.Start {
		return provider.Run{}, bin.ErrCorrupt
	}
	run.Entries = []provider.Entry{{RecordCount: uint32(end - run.Start)}}
	return run, nil
}

// runMetaMaxLen and runHeaderMaxLen bound encodeRunMeta's and
// appendRunHeader's output (version or magic, two fixed 8-byte fields, four
// varints, and the meta's CRC32C), so each is written into one allocation.
const (
	runMetaMaxLen   = 1 + 2*8 + 4*binary.MaxVarintLen64 + 4
	runHeaderMaxLen = len(runHeaderMagic) + 2*8 + 4*binary.MaxVarintLen64
)

// appendRunHeader appends a run's header record to b.
func appendRunHeader(b []byte, run provider.Run) []byte {
	w := bin.Writer{B: b}
	w.Raw([]byte(runHeaderMagic))
	w.U64(run.Stream)
	w.Uvarint(run.Epoch)
	w.U64(run.Token)
	w.Uvarint(run.Commit)
	w.Varint(run.Start)
	w.Varint(run.End())
	return w.B
}

// decodeRun decodes a run's frames (header + entries).
func decodeRun(raw []byte, runStart int64) ([]provider.ReadEntry, error) {
	frames, err := wal.DecodeFrames(raw)
	if err != nil {
		return nil, err
	}
	if len(frames) == 0 || len(frames[0]) < len(runHeaderMagic) || string(frames[0][:4]) != runHeaderMagic {
		return nil, errors.New("missing run header")
	}
	hr := bin.Reader{B: frames[0][4:]}
	hr.U64()
	hr.Uvarint()
	hr.U64()
	hr.Uvarint()
	start, end := hr.Varint(), hr.Varint()
	if hr.Done() != nil || start != runStart {
		return nil, fmt.Errorf("run header says [%d, %d), descriptor says start %d", start, end, runStart)
	}
	out := make([]provider.ReadEntry, 0, len(frames)-1)
	off := start
	for _, f := range frames[1:] {
		n, k := binary.Uvarint(f)
		if k <= 0 || n == 0 || n > 1<<31 {
			return nil, errors.New("bad entry record count")
		}
		ts, k2 := binary.Varint(f[k:])
		if k2 <= 0 {
			return nil, errors.New("bad entry timestamp")
		}
		out = append(out, provider.ReadEntry{Offset: off, RecordCount: uint32(n), Timestamp: ts, Payload: f[k+k2:]})
		off += int64(n)
	}
	if off != end {
		return nil, fmt.Errorf("entries cover [%d, %d), header says end %d", start, off, end)
	}
	return out, nil
}

type target struct {
	location       string
	offset, length int64
	entries        int
}

func encodeTarget(pl wal.Placement, entries int) provider.Target {
	return appendTarget(make([]byte, 0, targetMaxLen(pl)), pl, entries)
}

// targetMaxLen bounds appendTarget's output for pl.
func targetMaxLen(pl wal.Placement) int { return 1 + 4*binary.MaxVarintLen64 + len(pl.Location) }

func appendTarget(b []byte, pl wal.Placement, entries int) []byte {
	w := bin.Writer{B: b}
	w.U8(targetV1)
	w.String(pl.Location)
	w.Uvarint(uint64(pl.Offset))
	w.Uvarint(uint64(pl.Length))
	w.Uvarint(uint64(entries))
	return w.B
}

// targetChunkLen is the size of the chunks targetChunk cuts targets from:
// ~10 targets of a typical segment name, so a chunk kept alive by one
// target still in use (the core holds a run's target until its descriptor
// leaves the stream head) costs at most this much.
const targetChunkLen = 512

// targetChunk hands out encodeTarget's bytes cut from a shared chunk: one
// allocation per ~10 targets instead of one per durable run (the waiter
// makes one per append). Each target is capacity-clipped and the chunk is
// only ever appended to past every target cut from it, so no target's
// bytes are written again; the core stores targets without changing them.
type targetChunk struct{ b []byte }

func (c *targetChunk) encode(pl wal.Placement, entries int) provider.Target {
	if need := targetMaxLen(pl); cap(c.b)-len(c.b) < need {
		c.b = make([]byte, 0, max(targetChunkLen, need))
	}
	start := len(c.b)
	c.b = appendTarget(c.b, pl, entries)
	return provider.Target(c.b[start:len(c.b):len(c.b)])
}

func decodeTarget(b provider.Target) (target, error) {
	r := bin.Reader{B: b}
	if v := r.U8(); v != targetV1 {
		return target{}, fmt.Errorf("%w: objectwal target version %d", provider.ErrCorrupt, v)
	}
	t := target{location: r.String(), offset: int64(r.Uvarint()), length: int64(r.Uvarint()), entries: int(r.Uvarint())}
	if err := r.Done(); err != nil || t.length <= 0 || t.location == "" {
		return target{}, fmt.Errorf("%w: objectwal target", provider.ErrCorrupt)
	}
	return t, nil
}
