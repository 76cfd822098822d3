package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/internal/simrt"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/oklog/ulid/v2"
	"go.opentelemetry.io/otel/metric"
)

// Producer defaults (zero in ProducerConfig means "use the default").
const (
	DefaultFlushInterval          = 50 * time.Millisecond
	DefaultMaxInFlightBytes       = 256 << 20
	DefaultMaxInFlightBatches     = 4096
	DefaultMaxClaimAttempts       = 8
	DefaultUploadMaxAttempts      = 6
	DefaultUploadInitialBackoff   = 100 * time.Millisecond
	DefaultUploadConcurrency      = 4
	DefaultManifestMaxAttempts    = 6
	DefaultManifestInitialBackoff = 100 * time.Millisecond
	DefaultMaxCommitConflicts     = 64
)

// ProducerConfig configures the primary's write path. Zero values mean the
// documented default; negative values are rejected by NewProducer.
type ProducerConfig struct {
	// ManifestPath is the manifest object key. Required.
	ManifestPath string
	// SegmentPrefix is the key prefix for segment objects; segments are named
	// "<SegmentPrefix>/<runID>/<ordinal:016x>". Default: ManifestPath+".segments".
	SegmentPrefix string
	// FlushInterval bounds how long records wait before a segment is sealed:
	// the oldest unsealed record is sealed at most this long after its Append
	// (default 50ms).
	FlushInterval time.Duration
	// FlushBytes seals a segment early once buffered record bytes reach it.
	// Zero disables size-based flushing.
	FlushBytes int
	// GroupCommit seals pending records as soon as no segment upload is in
	// flight, instead of waiting for FlushInterval: a lone Append is sealed
	// at once, and what arrives while an upload runs is batched into the
	// next segment, sealed when that upload finishes (its upload then
	// overlaps the previous segment's manifest commit). FlushInterval becomes
	// the longest a record waits behind a slow upload before it is sealed
	// anyway (into an upload that runs in parallel, UploadConcurrency).
	// Latency-first for stores whose PUT is cheap (a local filesystem); with
	// a per-request price (S3) leave it off and let FlushInterval batch.
	GroupCommit bool
	// GroupCommitMinWait and GroupCommitMinBytes keep GroupCommit from
	// cutting a busy log into many small segments. Records that arrive
	// while the producer has nothing in flight are sealed at once (the
	// lone-record latency group commit is for). Records that arrive while
	// earlier ones are still on their way (uploading or committing) are
	// sealed, once no upload is in flight, only when GroupCommitMinWait has
	// passed since the previous seal or they add up to GroupCommitMinBytes
	// (so a busy producer cuts at most one segment per GroupCommitMinWait,
	// and a record arriving after a longer gap does not wait at all):
	// every segment costs a PUT and a manifest commit (on a local disk,
	// fsyncs that contend with each other), so under load a short wait for
	// the next arrivals buys fewer, larger segments. FlushInterval still
	// bounds every wait. Zero GroupCommitMinWait seals at every upload's
	// end; zero GroupCommitMinBytes never seals early by size.
	GroupCommitMinWait  time.Duration
	GroupCommitMinBytes int
	// Compression applied to segment record blocks. Compressed segments have
	// no Placement (their frames cannot be range-read).
	Compression Compression
	// LegacySegmentFormat writes unchecksummed batch-v1 segments instead of
	// v2, for downstream consumers that read them as upstream buffer batches.
	// Gives up corruption detection and Placement. Reading v1 is always
	// supported.
	LegacySegmentFormat bool
	// MaxInFlightBytes caps the total record bytes Appended but not yet
	// durably committed. Append BLOCKS once a further record would exceed it -
	// the primary backpressure signal (default 256 MiB). A single Append larger
	// than the cap is admitted only when nothing else is in flight, to avoid
	// deadlock.
	MaxInFlightBytes int
	// MaxInFlightBatches caps the number of un-committed Append calls in
	// flight - a secondary safety stop against many tiny Appends (default
	// 4096).
	MaxInFlightBatches int
	// SegmentMaxBytes caps the size of a single segment object. When a flush
	// drains more than this, it rotates into multiple segments (whole Append
	// groups are kept intact; an oversized group gets its own segment). Zero
	// means one segment per flush (no rotation), up to the 1 GiB frame-block
	// limit of the segment format.
	SegmentMaxBytes int
	// ManifestAppendBatchSize caps how many segment entries are coalesced into
	// one manifest CAS. Zero coalesces all of a flush's segments (plus any
	// later segments already uploaded) into a single CAS. Coalescing cuts
	// manifest write rate/cost and raises the throughput ceiling
	// (bytes-per-commit), at the cost of one CAS covering several segments.
	ManifestAppendBatchSize int
	// MaxClaimAttempts bounds epoch-claim CAS retries (default 8).
	MaxClaimAttempts int
	// UploadMaxAttempts bounds segment-upload attempts (default 6). A segment
	// that still fails halts the producer: the log cannot skip past it
	// without reordering.
	UploadMaxAttempts int
	// UploadInitialBackoff is the first upload retry backoff (default 100ms,
	// doubling with full jitter up to 5s).
	UploadInitialBackoff time.Duration
	// UploadConcurrency bounds how many segment uploads run in parallel
	// (default 4). Uploads overlap - within a flush and across flushes - but
	// commits remain strictly serial and in ordinal order, so total log order
	// is preserved. Set to 1 for fully sequential uploads.
	UploadConcurrency int
	// ManifestMaxAttempts bounds retries of *transient* manifest-commit errors
	// (default 6). A precondition conflict is a free re-plan (not counted), and
	// the re-load's epoch check converts a competing writer into ErrFenced.
	ManifestMaxAttempts int
	// ManifestInitialBackoff is the first backoff for transient commit and
	// claim retries (default 100ms).
	ManifestInitialBackoff time.Duration
	// MaxCommitConflicts bounds how many times one commit may lose the
	// manifest CAS race (412) before giving up (default 64), so a
	// misclassified error cannot spin forever.
	MaxCommitConflicts int
	// Logger receives structured lifecycle events: claims, fencing, commit
	// retries/conflicts, upload failures, halts. Defaults to a text logger on
	// stderr filtered to Warn, so a healthy producer is silent; pass your own
	// *slog.Logger (any handler, any level, including Debug/Info for routine
	// flow) to change verbosity or destination.
	Logger *slog.Logger
	// Meter records batch/commit/retry/fencing metrics (names in metrics.go).
	// Defaults to otel.GetMeterProvider()'s meter, which is a no-op until the
	// process calls otel.SetMeterProvider - so metrics cost nothing unless
	// wired up, here or globally.
	Meter metric.Meter
	// Runtime supplies the clock, timers, goroutines and randomness
	// (runtime.go). Nil: the real ones. A deterministic simulator sets it.
	Runtime Runtime
}

func (c ProducerConfig) withDefaults() (ProducerConfig, error) {
	if c.ManifestPath == "" {
		return c, errors.New("nereus/wal: ProducerConfig.ManifestPath is required")
	}
	if c.FlushInterval < 0 || c.FlushBytes < 0 || c.GroupCommitMinWait < 0 || c.GroupCommitMinBytes < 0 || c.MaxInFlightBytes < 0 || c.MaxInFlightBatches < 0 ||
		c.SegmentMaxBytes < 0 || c.ManifestAppendBatchSize < 0 || c.MaxClaimAttempts < 0 ||
		c.UploadMaxAttempts < 0 || c.UploadInitialBackoff < 0 || c.UploadConcurrency < 0 ||
		c.ManifestMaxAttempts < 0 || c.ManifestInitialBackoff < 0 || c.MaxCommitConflicts < 0 {
		return c, errors.New("nereus/wal: ProducerConfig fields must not be negative")
	}
	if c.Compression != CompressionNone && c.Compression != CompressionZstd {
		return c, fmt.Errorf("nereus/wal: unknown compression %d", c.Compression)
	}
	if c.SegmentPrefix == "" {
		c.SegmentPrefix = c.ManifestPath + ".segments"
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defDur(&c.FlushInterval, DefaultFlushInterval)
	def(&c.MaxInFlightBytes, DefaultMaxInFlightBytes)
	def(&c.MaxInFlightBatches, DefaultMaxInFlightBatches)
	def(&c.MaxClaimAttempts, DefaultMaxClaimAttempts)
	def(&c.UploadMaxAttempts, DefaultUploadMaxAttempts)
	defDur(&c.UploadInitialBackoff, DefaultUploadInitialBackoff)
	def(&c.UploadConcurrency, DefaultUploadConcurrency)
	def(&c.ManifestMaxAttempts, DefaultManifestMaxAttempts)
	defDur(&c.ManifestInitialBackoff, DefaultManifestInitialBackoff)
	def(&c.MaxCommitConflicts, DefaultMaxCommitConflicts)
	if c.Logger == nil {
		c.Logger = defaultLogger()
	}
	if c.Meter == nil {
		c.Meter = defaultMeter()
	}
	return c, nil
}

// SeqRange is the contiguous record-sequence range a single Append occupies:
// its records have sequences [First, First+Count). Use it instead of
// recomputing First+i offsets at call sites, which is an easy place to
// introduce off-by-one errors.
type SeqRange struct {
	First uint64
	Count int
}

// End is the exclusive upper bound of the range (First+Count).
func (r SeqRange) End() uint64 { return r.First + uint64(r.Count) }

// Last is the sequence of the final record (First+Count-1); only meaningful
// when Count >= 1.
func (r SeqRange) Last() uint64 { return r.First + uint64(r.Count) - 1 }

// At returns the sequence of the i-th record in the Append (0-indexed). It
// panics if i is outside [0, Count).
func (r SeqRange) At(i int) uint64 {
	if i < 0 || i >= r.Count {
		panic(fmt.Sprintf("nereus/wal: SeqRange.At(%d) out of range [0,%d)", i, r.Count))
	}
	return r.First + uint64(i)
}

// Contains reports whether seq is one of this Append's record sequences.
func (r SeqRange) Contains(seq uint64) bool { return seq >= r.First && seq < r.End() }

// All materializes every sequence in the range. Prefer First/Count/At for
// large batches; this allocates a slice.
func (r SeqRange) All() []uint64 {
	out := make([]uint64, r.Count)
	for i := range out {
		out[i] = r.First + uint64(i)
	}
	return out
}

// Placement says where one Append's records physically live: the segment
// object, the index of the first record inside it, and the exact byte range
// [Offset, Offset+Length) of the Append's framed records inside the object.
// The range holds whole v2 frames only, so a ranged GET of it decodes with
// DecodeFrames, each frame verified by its own CRC32C.
type Placement struct {
	Location   string
	FirstIndex int
	Offset     int64
	Length     int64
}

// Durability resolves when the records of an Append have been committed to the
// manifest (or failed permanently).
//
// A nil error from Wait means the records are committed: ordered, durable and
// visible to replicas. An error wrapping ErrNotCommitted proves they are not in
// the log (no manifest write carrying them can have landed), so resubmitting
// them to a new producer cannot duplicate them. Any other error means the
// outcome is UNKNOWN: the records may or may not be in the log, and they are
// never in it twice.
type Durability struct {
	rt        rt
	done      chan struct{}
	n         int
	first     uint64
	err       error
	placement Placement
	placed    bool
}

func (d *Durability) resolve(first uint64, pl *Placement, err error) {
	d.first, d.err = first, err
	if pl != nil {
		d.placement, d.placed = *pl, true
	}
	close(d.done)
}

// Wait blocks until the records are durable, returning the sequence of this
// Append's first record, or ctx's error if it is cancelled first (the Append
// itself is not cancelled).
func (d *Durability) Wait(ctx context.Context) (uint64, error) {
	d.rt.Wait(func() bool { return simrt.IsClosed(d.done) || ctx.Err() != nil })
	select {
	case <-d.done:
		return d.first, d.err
	case <-simrt.Only(d.rt, ctx.Done(), !simrt.IsClosed(d.done)):
		return 0, ctx.Err()
	}
}

// WaitRange blocks like Wait and returns the full record-sequence range this
// Append occupies.
func (d *Durability) WaitRange(ctx context.Context) (SeqRange, error) {
	first, err := d.Wait(ctx)
	if err != nil {
		return SeqRange{}, err
	}
	return SeqRange{First: first, Count: d.n}, nil
}

// Done is closed when the Durability has resolved; Wait then returns at once.
func (d *Durability) Done() <-chan struct{} { return d.done }

// Count is the number of records this Append wrote. They occupy the contiguous
// record-sequence range [first, first+Count), where first is what Wait returns.
func (d *Durability) Count() int { return d.n }

// Placement returns where the Append's records live. It is valid only after
// Wait returned nil; ok is false before that, and for compressed or legacy v1
// segments, whose frames have no independently readable byte range.
func (d *Durability) Placement() (Placement, bool) {
	select {
	case <-d.done:
		if d.err == nil && d.placed {
			return d.placement, true
		}
	default:
	}
	return Placement{}, false
}

// appendGroup is one Append call travelling through the pipeline.
type appendGroup struct {
	records    [][]byte
	meta       []byte
	bytes      int
	startIndex int // index of the first record in its segment (set at seal)
	d          *Durability
	at         time.Time // when Append queued it (the append_stage metric)
}

// pipeSegment is one sealed segment: planned by the sealer, uploaded by a
// worker, committed by the committer. Fields below uploaded are written by
// the worker before it closes uploaded.
type pipeSegment struct {
	ordinal     uint64
	flushID     uint64
	lastOfFlush bool
	location    string
	groups      []*appendGroup
	metas       []RecordMeta
	records     int
	frameBytes  int
	sealedAt    time.Time // set by the sealer (the append_stage metric)

	uploaded   chan struct{}
	uploadErr  error
	spans      []frameSpan
	objBytes   int
	uploadedAt time.Time // the worker's clock when the PUT returned
}

// Producer is the epoch-fenced single-writer primary. It accepts opaque framed
// records, group-commits them into segment objects, and CAS-appends manifest
// entries. It knows nothing about record contents.
//
// Pipeline (each stage one or more goroutines, see the package doc):
//
//	Append -> pending -> sealer (plans segments, assigns ordinals)
//	       -> upload workers (encode + PUT, parallel, retried)
//	       -> committer (strict ordinal order, coalesced manifest CAS)
//	       -> Durability resolved, in-flight budget released
//
// Lock order: p.mu is a leaf lock; no I/O happens under it. The cached
// manifest (m, ver) is owned by the committer goroutine after NewProducer.
type Producer struct {
	os    objectstore.ObjectStore
	store *Store
	cfg   ProducerConfig
	log   *slog.Logger
	met   *producerMetrics
	runID string
	epoch uint64
	now   func() time.Time
	rt    rt

	ctx    context.Context // internal; cancelled by Close when its ctx expires
	cancel context.CancelFunc

	// Committer-owned: the manifest as last written or loaded at our epoch.
	m   *Manifest
	ver objectstore.UpdateVersion

	mu           sync.Mutex
	pending      []*appendGroup
	pendingBytes int
	pendingSince time.Time
	// pendingIdle: the oldest pending Append found nothing in flight
	// (GroupCommit seals it at once, GroupCommitMinWait does not apply).
	pendingIdle bool
	// lastSeal: when the sealer last took pending groups (GroupCommitMinWait
	// counts from it).
	lastSeal        time.Time
	inFlightBytes   int
	inFlightBatches int
	uploading       int           // segments sealed whose upload has not finished
	space           chan struct{} // closed (and cleared) when budget frees or the producer stops
	halted          error         // first fatal cause; nil while healthy
	closing         bool

	// Sealer-owned.
	nextOrdinal uint64
	flushSeq    uint64

	kick          chan struct{}
	closeCh       chan struct{}
	closeOnce     sync.Once
	uploadQ       chan *pipeSegment
	commitQ       chan *pipeSegment
	workers       sync.WaitGroup
	committerDone chan struct{}
	bufs          sync.Pool

	// truncQ carries Truncate requests to the committer, which folds them
	// into its next manifest commit (truncate.go); truncs are the ones it
	// holds (committer-owned).
	truncQ    chan *truncReq
	truncs    []*truncReq
	truncSent atomic.Int64 // requests handed to the committer (tests wait on it)
	// sealPasses counts the sealer's decisions (tests wait on it).
	sealPasses atomic.Int64
	// truncPlanned: the entries the attempts of the current commit (and
	// truncMaybe: of earlier failed commits whose outcome was unknown)
	// planned to drop, by sequence; what is reported as dropped is proven
	// from them against the final manifest (truncate.go). Committer-owned.
	truncPlanned map[uint64]Entry
	truncMaybe   []Entry

	// For a cooperative runtime's Block (runtime.go): queuesClosed is set
	// before the sealer closes uploadQ and commitQ; workersLeft counts
	// upload workers still running.
	queuesClosed atomic.Bool
	workersLeft  atomic.Int32
}

// NewProducer constructs a producer and claims the log by bumping the manifest
// epoch. A successful return means this node owns the log at its claimed
// epoch. ctx bounds only the claim; the producer runs until Close, which
// also releases its goroutines (always call it, even after a halt).
func NewProducer(ctx context.Context, os objectstore.ObjectStore, cfg ProducerConfig) (*Producer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := simrt.New(cfg.Runtime)
	p := &Producer{
		os:            os,
		store:         NewStore(os, cfg.ManifestPath),
		cfg:           cfg,
		met:           newProducerMetrics(cfg.Meter),
		runID:         ulid.MustNew(ulid.Timestamp(r.Now()), r.Entropy()).String(),
		now:           r.Now,
		rt:            r,
		kick:          make(chan struct{}, 1),
		closeCh:       make(chan struct{}),
		uploadQ:       make(chan *pipeSegment, cfg.MaxInFlightBatches),
		commitQ:       make(chan *pipeSegment, cfg.MaxInFlightBatches),
		committerDone: make(chan struct{}),
		truncQ:        make(chan *truncReq, 16),
	}
	p.log = cfg.Logger.With("component", "wal.producer", "manifest", cfg.ManifestPath, "run", p.runID)
	if err := p.claim(ctx); err != nil {
		return nil, err
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.workers.Add(cfg.UploadConcurrency)
	p.workersLeft.Store(int32(cfg.UploadConcurrency))
	for range cfg.UploadConcurrency {
		r.Go(p.uploadLoop)
	}
	r.Go(p.sealLoop)
	r.Go(p.commitLoop)
	return p, nil
}

// Epoch returns the epoch this producer claimed.
func (p *Producer) Epoch() uint64 { return p.epoch }

// RunID returns the producer's run identifier: every segment it writes is
// named "<SegmentPrefix>/<RunID>/<ordinal>", so a segment key tells which
// producer wrote it.
func (p *Producer) RunID() string { return p.runID }

// claim bumps the manifest epoch under CAS, establishing this producer as the
// current primary.
//
// Every failure mode - a lost race, a transient error, or an ambiguous PUT
// whose response was lost - is handled by the same retry: reload, bump again,
// re-CAS. That is safe without a claimant identity in the manifest because a
// claim only counts once a CAS returned cleanly, and a retry's higher epoch
// supersedes any earlier attempt of ours that silently landed. The cost is
// epoch inflation under flapping, which is free in a uint64.
func (p *Producer) claim(ctx context.Context) error {
	bo := newBackoff(p.cfg.ManifestInitialBackoff, p.rt)
	var last error
	for attempt := 1; attempt <= p.cfg.MaxClaimAttempts; attempt++ {
		m, ver, _, err := p.store.Load(ctx)
		if err != nil {
			if errors.Is(err, ErrCorrupt) || ctx.Err() != nil {
				return fmt.Errorf("nereus/wal: claim: %w", err)
			}
			last = err
		} else {
			m.SetEpoch(m.Epoch() + 1)
			newVer, err := p.store.put(ctx, m, ver)
			if err == nil {
				p.epoch, p.m, p.ver = m.Epoch(), m, newVer
				p.log.Info("claimed log", "epoch", p.epoch, "attempts", attempt)
				return nil
			}
			last = err
			switch objectstore.Classify(err) {
			case objectstore.Conflict:
				continue // lost a race: re-plan at once
			case objectstore.NotApplied:
				if !errors.Is(err, objectstore.ErrConflict) {
					return fmt.Errorf("nereus/wal: claim: %w", err)
				}
			}
		}
		p.log.Warn("claim attempt failed, retrying", "attempt", attempt, "err", last)
		if err := bo.sleep(ctx); err != nil {
			return fmt.Errorf("nereus/wal: claim: %w", err)
		}
	}
	return fmt.Errorf("nereus/wal: claim failed after %d attempts: %w", p.cfg.MaxClaimAttempts, last)
}

// stoppedErrLocked returns the error Append reports once the producer
// stopped, or nil while it runs.
func (p *Producer) stoppedErrLocked() error {
	switch {
	case p.halted != nil && !errors.Is(p.halted, ErrHalted):
		return fmt.Errorf("%w: %w", ErrHalted, p.halted)
	case p.halted != nil || p.closing:
		return ErrHalted
	}
	return nil
}

// Append enqueues a group of framed records with an optional metadata payload.
// It BLOCKS when the in-flight byte (or batch-count) budget is exhausted, until
// a commit frees space or ctx is cancelled - this is the producer's
// backpressure onto the caller. The returned Durability resolves when the group
// is committed. Records are not copied; do not mutate them until it resolves.
// Once the producer has halted or closed, Append returns an error wrapping
// ErrHalted (and the cause, e.g. ErrFenced).
func (p *Producer) Append(ctx context.Context, records [][]byte, meta []byte) (*Durability, error) {
	if len(records) == 0 {
		return nil, ErrNoRecords
	}
	size := 0
	for _, r := range records {
		size += len(r)
	}
	if framed := size + frameHeaderSize*len(records); framed > maxFramesLen {
		// Refused up front: an unencodable group would halt the producer.
		return nil, fmt.Errorf("nereus/wal: Append of %d framed bytes exceeds the %d-byte segment limit", framed, maxFramesLen)
	}
	blocked := false
	for {
		p.mu.Lock()
		if err := p.stoppedErrLocked(); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		if p.inFlightBatches == 0 ||
			(p.inFlightBytes+size <= p.cfg.MaxInFlightBytes && p.inFlightBatches < p.cfg.MaxInFlightBatches) {
			d := &Durability{done: make(chan struct{}), n: len(records), rt: p.rt}
			now := p.now()
			first := len(p.pending) == 0
			if first {
				p.pendingSince = now
				p.pendingIdle = p.inFlightBatches == 0
			}
			p.pending = append(p.pending, &appendGroup{records: records, meta: meta, bytes: size, d: d, at: now})
			p.pendingBytes += size
			p.inFlightBytes += size
			p.inFlightBatches++
			full := p.cfg.FlushBytes > 0 && p.pendingBytes >= p.cfg.FlushBytes
			if m := p.cfg.GroupCommitMinBytes; p.cfg.GroupCommit && m > 0 && p.pendingBytes >= m && p.pendingBytes-size < m {
				full = true // worth a segment now: the sealer decides
			}
			p.mu.Unlock()
			if first || full {
				p.signalSealer()
			}
			return d, nil
		}
		if p.space == nil {
			p.space = make(chan struct{})
		}
		space := p.space
		p.mu.Unlock()
		if !blocked {
			blocked = true
			p.met.blockedAppends.Add(context.Background(), 1)
		}
		p.rt.Wait(func() bool { return simrt.IsClosed(space) || ctx.Err() != nil })
		select {
		case <-space:
		case <-simrt.Only(p.rt, ctx.Done(), !simrt.IsClosed(space)):
			return nil, ctx.Err()
		}
	}
}

func (p *Producer) signalSealer() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// wakeWaitersLocked releases every Append blocked on budget.
func (p *Producer) wakeWaitersLocked() {
	if p.space != nil {
		close(p.space)
		p.space = nil
	}
}

// release returns in-flight budget and wakes blocked Appends.
func (p *Producer) release(bytes, batches int) {
	p.mu.Lock()
	p.inFlightBytes -= bytes
	p.inFlightBatches -= batches
	p.wakeWaitersLocked()
	p.mu.Unlock()
}

// halt records the first fatal cause and wakes blocked Appends.
func (p *Producer) halt(cause error) {
	p.mu.Lock()
	first := p.halted == nil
	if first {
		p.halted = cause
	}
	p.wakeWaitersLocked()
	p.mu.Unlock()
	if first && !errors.Is(cause, ErrHalted) {
		p.met.halts.Add(context.Background(), 1)
		p.log.Error("producer halted", "epoch", p.epoch, "err", cause)
	}
}

// Err returns why the producer stopped accepting Appends (a fatal upload or
// commit error, fencing; ErrHalted after Close), or nil while it runs. A
// halted producer never resumes: construct a new one (it claims a new epoch)
// once the cause has cleared, and Close the old one.
func (p *Producer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.halted == nil && p.closing {
		return ErrHalted
	}
	return p.halted
}

func (p *Producer) haltedErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.halted
}

// Close stops accepting Appends, seals and commits everything already
// appended, and stops the producer's goroutines. If ctx ends first, in-flight
// I/O is aborted and the remaining Durabilities resolve with errors (outcome
// unknown). Close returns the cause if the producer had halted on a fatal
// error (for example ErrFenced), ctx's error if it expired, else nil. Later
// Appends return ErrHalted. Close is idempotent.
func (p *Producer) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closing = true
		p.wakeWaitersLocked()
		p.mu.Unlock()
		close(p.closeCh)
	})
	var ctxErr error
	p.rt.Wait(func() bool { return simrt.IsClosed(p.committerDone) || ctx.Err() != nil })
	select {
	case <-p.committerDone:
	case <-simrt.Only(p.rt, ctx.Done(), !simrt.IsClosed(p.committerDone)):
		ctxErr = ctx.Err()
		p.cancel()
		p.rt.Wait(func() bool { return simrt.IsClosed(p.committerDone) })
		<-p.committerDone
	}
	p.rt.Wait(func() bool { return p.workersLeft.Load() == 0 })
	p.workers.Wait()
	p.cancel()
	cause := p.haltedErr()
	p.halt(ErrHalted)
	if cause == ErrHalted {
		cause = nil
	}
	if ctxErr != nil && cause != nil {
		return errors.Join(ctxErr, cause) // the abort itself halts the producer
	}
	if cause != nil {
		return cause
	}
	return ctxErr
}

// sealLoop turns pending Append groups into segments when FlushBytes is
// reached, when the oldest pending group has waited FlushInterval, with
// GroupCommit whenever no upload is in flight (an upload's end kicks it)
// and groupReadyLocked says the pending groups are worth a segment, or on
// Close. It is the only sender on uploadQ and commitQ, and closes both once
// closing has drained everything.
func (p *Producer) sealLoop() {
	// The flush timer on the runtime's clock: fire holds at most one tick.
	fire := make(chan struct{}, 1)
	stop := func() bool { return false }
	var armed time.Time // when the timer fires; zero while none is armed
	for {
		closing := false
		p.rt.Wait(func() bool { return len(p.kick) > 0 || len(fire) > 0 || simrt.IsClosed(p.closeCh) })
		kicked, closed := len(p.kick) > 0, simrt.IsClosed(p.closeCh)
		select {
		case <-p.kick:
		case <-simrt.Only(p.rt, fire, !kicked && !closed):
			armed = time.Time{}
		case <-simrt.Only(p.rt, p.closeCh, !kicked):
			closing = true
		}
		p.mu.Lock()
		closing = closing || p.closing
		var batch []*appendGroup
		if len(p.pending) > 0 {
			now := p.now()
			age := now.Sub(p.pendingSince)
			wait := p.cfg.FlushInterval - age
			group := false
			if p.cfg.GroupCommit && p.uploading == 0 {
				var more time.Duration
				group, more = p.groupReadyLocked(now)
				wait = min(wait, more)
			}
			if closing || group || wait <= 0 || (p.cfg.FlushBytes > 0 && p.pendingBytes >= p.cfg.FlushBytes) {
				batch = p.pending
				p.pending = nil
				p.pendingBytes = 0
				p.lastSeal = now
			} else if at := now.Add(wait); armed.IsZero() || at.Before(armed) {
				// (Re-)arm for the earliest deadline: an upload's end can
				// bring GroupCommitMinWait's ahead of FlushInterval's.
				stop()
				stop = p.rt.AfterFunc(wait, func() {
					select {
					case fire <- struct{}{}:
					default:
					}
				})
				armed = at
			}
		}
		p.mu.Unlock()
		p.sealPasses.Add(1)
		if batch != nil {
			p.seal(batch)
		}
		if closing {
			stop()
			p.queuesClosed.Store(true)
			close(p.uploadQ)
			close(p.commitQ)
			return
		}
	}
}

// groupReadyLocked decides, with GroupCommit and no upload in flight,
// whether the pending groups are sealed now; if not, more is how much
// longer they wait at most (GroupCommitMinWait).
//
// The minimum wait counts from the previous seal, not from the oldest
// pending Append: it bounds how often a busy producer cuts a segment (at
// most one per GroupCommitMinWait, the fsync budget it exists for), and a
// record that arrives after a gap longer than that — a Pulsar producer's
// batch every few milliseconds behind a still-committing previous one — is
// sealed as soon as the upload slot is free instead of waiting the whole
// minimum on its own (session 12 measured the wait from the oldest Append
// as the largest non-flush stage of a publish at 10,000 msg/s: 2.0 ms of
// about 5).
func (p *Producer) groupReadyLocked(now time.Time) (ready bool, more time.Duration) {
	since := now.Sub(p.lastSeal)
	if p.pendingIdle || since >= p.cfg.GroupCommitMinWait ||
		(p.cfg.GroupCommitMinBytes > 0 && p.pendingBytes >= p.cfg.GroupCommitMinBytes) {
		return true, 0
	}
	return false, p.cfg.GroupCommitMinWait - since
}

// seal packs Append groups into segments of at most SegmentMaxBytes (groups
// kept whole; an oversized group alone), names them, and queues them for
// upload and commit. Consecutive groups with equal metadata share one
// RecordMeta range, so the manifest grows per segment, not per Append.
func (p *Producer) seal(batch []*appendGroup) {
	now := p.now()
	nowMs := now.UnixMilli()
	flushID := p.flushSeq
	p.flushSeq++
	var segs []*pipeSegment
	var cur *pipeSegment
	limit := maxFramesLen // a segment's frame block never exceeds it
	if p.cfg.SegmentMaxBytes > 0 {
		limit = min(limit, p.cfg.SegmentMaxBytes)
	}
	for _, g := range batch {
		size := g.bytes + frameHeaderSize*len(g.records)
		if cur == nil || cur.frameBytes+size > limit {
			cur = &pipeSegment{flushID: flushID, uploaded: make(chan struct{}), sealedAt: now}
			segs = append(segs, cur)
		}
		g.startIndex = cur.records
		if n := len(cur.metas); n == 0 || !bytes.Equal(cur.metas[n-1].Payload, g.meta) {
			cur.metas = append(cur.metas, RecordMeta{StartIndex: uint32(cur.records), IngestionTimeMs: nowMs, Payload: g.meta})
		}
		cur.groups = append(cur.groups, g)
		cur.records += len(g.records)
		cur.frameBytes += size
	}
	p.mu.Lock()
	p.uploading += len(segs)
	p.mu.Unlock()
	for i, s := range segs {
		s.ordinal = p.nextOrdinal
		p.nextOrdinal++
		s.location = fmt.Sprintf("%s/%s/%016x", p.cfg.SegmentPrefix, p.runID, s.ordinal)
		s.lastOfFlush = i == len(segs)-1
		// Never blocks: each queued segment holds >= 1 in-flight Append and
		// both queues have capacity MaxInFlightBatches.
		p.commitQ <- s
		p.uploadQ <- s
	}
}

func (p *Producer) uploadLoop() {
	defer p.workers.Done()
	defer p.workersLeft.Add(-1)
	for {
		p.rt.Wait(func() bool { return len(p.uploadQ) > 0 || p.queuesClosed.Load() })
		s, ok := <-p.uploadQ
		if !ok {
			return
		}
		p.upload(s)
		s.uploadedAt = p.now()
		p.mu.Lock()
		p.uploading--
		// With GroupCommit the pipeline has room again: what arrived
		// meanwhile is the next group.
		kick := p.cfg.GroupCommit && p.uploading == 0 && len(p.pending) > 0
		p.mu.Unlock()
		// Only now may the committer commit it: once its Appends resolve
		// the pipeline must look idle, or a Truncate sent right then is
		// held for a batch that never comes (pipelineIdle).
		close(s.uploaded)
		if kick {
			p.signalSealer()
		}
	}
}

// permanentStoreError reports errors a retry cannot fix.
func permanentStoreError(err error) bool {
	return errors.Is(err, objectstore.ErrInvalidArgument) || errors.Is(err, objectstore.ErrClosed) ||
		errors.Is(err, context.Canceled)
}

// upload encodes and PUTs one segment, retrying with backoff. Segment keys
// are unique per (run, ordinal) and a retry rewrites identical bytes, so a
// retry after an ambiguous failure is idempotent.
func (p *Producer) upload(s *pipeSegment) {
	// The caller (uploadLoop) closes s.uploaded.
	if err := p.haltedErr(); err != nil {
		s.uploadErr = err
		return
	}
	groups := make([][][]byte, len(s.groups))
	for i, g := range s.groups {
		groups[i] = g.records
	}
	var buf []byte
	if b, ok := p.bufs.Get().(*[]byte); ok {
		buf = *b
	}
	data, spans, err := encodeSegment(buf, segmentSpec{
		groups: groups, comp: p.cfg.Compression, legacy: p.cfg.LegacySegmentFormat, epoch: p.epoch,
	})
	if err != nil {
		s.uploadErr = err
		return
	}
	defer func() {
		data = data[:0]
		p.bufs.Put(&data)
	}()
	s.spans, s.objBytes = spans, len(data)
	bo := newBackoff(p.cfg.UploadInitialBackoff, p.rt)
	for attempt := 1; ; attempt++ {
		// DeferSync: a segment is reachable only through the manifest
		// commit that follows its upload (a plain Put on the same store),
		// which makes it durable before publishing the reference, so the
		// filesystem store may share the segment's directory fsync with that
		// commit (objectstore.PutOptions.DeferSync). Nothing is acknowledged
		// on the upload alone.
		_, err = p.os.Put(p.ctx, s.location, data, objectstore.PutOptions{Mode: objectstore.PutOverwrite, DeferSync: true})
		if err == nil {
			p.met.segments.Add(context.Background(), 1)
			p.met.segmentBytes.Add(context.Background(), int64(len(data)))
			return
		}
		if permanentStoreError(err) || attempt >= p.cfg.UploadMaxAttempts {
			s.uploadErr = fmt.Errorf("nereus/wal: segment %s upload failed after %d attempts, halting to preserve log order: %w",
				s.location, attempt, err)
			return
		}
		p.met.uploadRetries.Add(context.Background(), 1)
		p.log.Warn("segment upload failed, retrying", "segment", s.location, "attempt", attempt, "err", err)
		if serr := bo.sleep(p.ctx); serr != nil {
			s.uploadErr = fmt.Errorf("nereus/wal: segment %s upload aborted: %w (last error: %v)", s.location, serr, err)
			return
		}
	}
}

// commitLoop commits uploaded segments in strict ordinal order, coalescing
// runs of ready segments into one manifest CAS (group commit: while one CAS
// is in flight, later uploads finish and join the next). Only the contiguous
// successful prefix is ever committed; the first failed upload halts the
// producer, because committing a later segment ahead of it would reorder the
// log (a disk WAL likewise stops on a write error rather than skip ahead).
func (p *Producer) commitLoop() {
	defer close(p.committerDone)
	var look []*pipeSegment
	open := true
	defer p.failTruncs(ErrHalted)
	recv := func(block bool) bool {
		if !open {
			return false
		}
		if block {
			for {
				p.rt.Wait(func() bool { return len(p.commitQ) > 0 || len(p.truncQ) > 0 || p.queuesClosed.Load() })
				select {
				case s, ok := <-p.commitQ:
					if !ok {
						open = false
						return false
					}
					look = append(look, s)
					return true
				case r := <-simrt.Only(p.rt, p.truncQ, len(p.commitQ) == 0 && !p.queuesClosed.Load()):
					p.truncs = append(p.truncs, r)
					if len(look) == 0 && p.pipelineIdle() {
						// Nothing to fold it into: a commit of its own.
						p.commitTruncation()
					}
				}
			}
		}
		select {
		case s, ok := <-p.commitQ:
			if !ok {
				open = false
				return false
			}
			look = append(look, s)
			return true
		default:
			return false
		}
	}
	for {
		if len(look) == 0 && len(p.truncs) > 0 && p.pipelineIdle() {
			p.commitTruncation() // held for a batch that failed instead
		}
		if len(look) == 0 && !recv(true) {
			return
		}
		head := look[0]
		p.rt.Wait(func() bool { return simrt.IsClosed(head.uploaded) })
		<-head.uploaded
		if err := p.haltedErr(); err != nil {
			p.fail(head, notCommitted(err)) // never offered to the manifest
			look[0], look = nil, look[1:]
			continue
		}
		if head.uploadErr != nil {
			p.halt(head.uploadErr)
			p.fail(head, notCommitted(head.uploadErr))
			look[0], look = nil, look[1:]
			continue
		}
		limit := p.cfg.ManifestAppendBatchSize
		if limit == 0 {
			// Make sure the whole of head's flush is in view.
			for !head.lastOfFlush && look[len(look)-1].flushID == head.flushID && !look[len(look)-1].lastOfFlush {
				if !recv(true) {
					break
				}
			}
		}
		for recv(false) {
		}
		n := 1
		for n < len(look) && (limit == 0 || n < limit) {
			s := look[n]
			if limit == 0 && s.flushID == head.flushID {
				p.rt.Wait(func() bool { return simrt.IsClosed(s.uploaded) })
				<-s.uploaded
			} else if !simrt.IsClosed(s.uploaded) {
				break
			}
			if s.uploadErr != nil {
				break
			}
			n++
		}
		batch := slices.Clone(look[:n])
		clear(look[:n]) // drop references so committed records can be freed
		look = look[n:]
		p.drainTruncs()
		p.commitBatch(batch)
	}
}

// commitBatch commits batch in one CAS and resolves its Appends.
func (p *Producer) commitBatch(batch []*pipeSegment) {
	start := p.now()
	seqs, after, unknown, err := p.commitEntries(batch)
	if err != nil {
		p.halt(err)
		p.failTruncs(err)
		if !unknown {
			// Every CAS attempt for this batch definitely did not apply.
			err = notCommitted(err)
		}
		for _, s := range batch {
			p.fail(s, err)
		}
		return
	}
	p.resolveTruncs()
	p.met.commits.Add(context.Background(), 1)
	p.met.commitLatency.Record(context.Background(), p.now().Sub(start).Seconds())
	p.met.commitSegments.Record(context.Background(), float64(len(batch)))
	for i, s := range batch {
		p.resolve(s, seqs[i])
	}
	if after != nil {
		p.halt(after)
	}
}

// resolve resolves every Append of a committed segment with the sequence of
// its own first record and its placement, and releases their budget.
func (p *Producer) resolve(s *pipeSegment, base uint64) {
	var size, records int
	p.met.observeStages(s, p.now())
	for i, g := range s.groups {
		var pl *Placement
		if s.spans != nil {
			pl = &Placement{Location: s.location, FirstIndex: g.startIndex, Offset: s.spans[i].off, Length: s.spans[i].length}
		}
		g.d.resolve(base+uint64(g.startIndex), pl, nil)
		size += g.bytes
		records += len(g.records)
	}
	p.met.records.Add(context.Background(), int64(records))
	p.met.bytes.Add(context.Background(), int64(size))
	p.release(size, len(s.groups))
}

// fail resolves every Append of a segment with err and releases its budget.
func (p *Producer) fail(s *pipeSegment, err error) {
	size := 0
	for _, g := range s.groups {
		g.d.resolve(0, nil, err)
		size += g.bytes
	}
	p.release(size, len(s.groups))
}

// commitEntries CAS-appends one entry per segment of batch in a single
// manifest commit and returns the base sequence of each, aligned to batch.
// after is non-nil when the entries landed but the producer must halt right
// after resolving them (fenced once the outcome was proven).
//
// Outcomes of each CAS attempt, closed:
//   - applied: done;
//   - 412 (precondition): someone else changed the manifest - a newer
//     producer (the reload's epoch check turns that into ErrFenced) or a
//     truncator/snapshotter at our epoch (a free re-plan: our entries are
//     re-applied to the fresh manifest). Bounded by MaxCommitConflicts;
//   - 409 / other not-applied: back off and retry (bounded), or fail if
//     permanent;
//   - unknown (timeout, reset, 5xx): the PUT may have landed. From then on
//     every reload first asks whether it did, via TailLocations (locations
//     are unique per run and ordinal) and the manifest's NextSequence (only
//     this producer appends at its epoch), so entries are never appended
//     twice.
//
// The CAS always targets a version observed at our epoch (written by us or
// loaded and epoch-checked), so a successful CAS proves the epoch is still
// ours; the in-memory epoch is asserted once more right before each write.
func (p *Producer) commitEntries(batch []*pipeSegment) (seqs []uint64, after error, unknown bool, err error) {
	if len(p.truncs) == 0 {
		return p.commitAttempts(batch)
	}
	p.beginTruncs()
	seqs, after, unknown, err = p.commitAttempts(batch)
	p.endTruncs(after == nil && err == nil, unknown)
	return seqs, after, unknown, err
}

// commitAttempts is commitEntries' CAS loop.
func (p *Producer) commitAttempts(batch []*pipeSegment) (seqs []uint64, after error, unknown bool, err error) {
	var total uint64
	for _, s := range batch {
		total += uint64(s.records)
	}
	base := p.m.NextSequence()
	truncFirst := p.m.firstLive()
	reload := false
	conflicts, transient := 0, 0
	bo := newBackoff(p.cfg.ManifestInitialBackoff, p.rt)
	cbo := newBackoff(p.cfg.ManifestInitialBackoff, p.rt)
	retry := func(cause error) error {
		transient++
		p.met.commitRetries.Add(context.Background(), 1)
		if transient >= p.cfg.ManifestMaxAttempts {
			return fmt.Errorf("nereus/wal: manifest commit failed after %d attempts: %w", transient, cause)
		}
		if serr := bo.sleep(p.ctx); serr != nil {
			return fmt.Errorf("nereus/wal: manifest commit aborted: %w (last error: %v)", serr, cause)
		}
		return nil
	}
	for {
		if reload {
			m, ver, ok, lerr := p.store.Load(p.ctx)
			if lerr != nil {
				if errors.Is(lerr, ErrCorrupt) || p.ctx.Err() != nil {
					return nil, nil, unknown, lerr
				}
				p.log.Warn("manifest reload failed, retrying", "err", lerr)
				if rerr := retry(lerr); rerr != nil {
					return nil, nil, unknown, rerr
				}
				continue
			}
			if !ok {
				return nil, nil, unknown, fmt.Errorf("nereus/wal: manifest %s disappeared while the producer held epoch %d", p.cfg.ManifestPath, p.epoch)
			}
			if unknown {
				landed, s, rerr := p.landed(m, batch, base, total, truncFirst)
				if rerr != nil {
					return nil, nil, unknown, rerr
				}
				if landed {
					p.met.commitUnknown.Add(context.Background(), 1)
					p.log.Info("earlier commit attempt with unknown outcome had landed", "segments", len(batch))
					if m.Epoch() != p.epoch {
						p.met.fenced.Add(context.Background(), 1)
						return s, p.fencedErr(m.Epoch()), unknown, nil
					}
					p.m, p.ver = m, *ver
					return s, nil, unknown, nil
				}
			}
			if m.Epoch() != p.epoch {
				if m.Epoch() < p.epoch {
					return nil, nil, unknown, fmt.Errorf("nereus/wal: manifest epoch went backwards: %d < claimed %d", m.Epoch(), p.epoch)
				}
				p.met.fenced.Add(context.Background(), 1)
				return nil, nil, unknown, p.fencedErr(m.Epoch())
			}
			if m.NextSequence() != base {
				return nil, nil, unknown, fmt.Errorf("nereus/wal: manifest next sequence %d at our epoch %d, expected %d: another writer appended", m.NextSequence(), p.epoch, base)
			}
			p.m, p.ver = m, *ver
			reload = false
		}
		work := p.m.clone()
		if err := p.planTruncs(work); err != nil {
			return nil, nil, unknown, err
		}
		truncFirst = work.firstLive()
		if len(batch) == 0 && truncFirst == p.m.firstLive() {
			// A truncation-only commit whose plans drop nothing would
			// rewrite the manifest unchanged: an idle producer writes
			// nothing. (After an unknown attempt p.m is the re-read
			// manifest, so this also ends that attempt's verification.)
			return nil, nil, unknown, nil
		}
		seqs = make([]uint64, len(batch))
		for i, s := range batch {
			seq, aerr := work.Append(s.location, s.metas, s.records)
			if aerr != nil {
				return nil, nil, unknown, aerr // encoding limit: not retryable
			}
			seqs[i] = seq
		}
		if work.Epoch() != p.epoch {
			return nil, nil, unknown, fmt.Errorf("nereus/wal: epoch invariant violated: manifest %d, producer %d", work.Epoch(), p.epoch)
		}
		newVer, perr := p.store.put(p.ctx, work, &p.ver)
		if perr == nil {
			p.m, p.ver = work, newVer
			return seqs, nil, unknown, nil
		}
		reload = true
		switch objectstore.Classify(perr) {
		case objectstore.Conflict:
			conflicts++
			p.met.commitConflicts.Add(context.Background(), 1)
			if conflicts >= p.cfg.MaxCommitConflicts {
				return nil, nil, unknown, fmt.Errorf("nereus/wal: manifest commit lost %d CAS races: %w", conflicts, perr)
			}
			p.log.Info("manifest changed under the producer, re-planning", "conflicts", conflicts)
			if conflicts > 1 {
				if serr := cbo.sleep(p.ctx); serr != nil {
					return nil, nil, unknown, serr
				}
			}
		case objectstore.NotApplied:
			if !errors.Is(perr, objectstore.ErrConflict) {
				return nil, nil, unknown, fmt.Errorf("nereus/wal: manifest commit refused: %w", perr)
			}
			p.log.Warn("manifest commit conflicted (409), retrying", "err", perr)
			if rerr := retry(perr); rerr != nil {
				return nil, nil, unknown, rerr
			}
		default:
			unknown = true
			if p.ctx.Err() != nil {
				return nil, nil, unknown, fmt.Errorf("nereus/wal: manifest commit aborted with unknown outcome: %w", perr)
			}
			p.log.Warn("manifest commit outcome unknown, will verify before retrying", "err", perr)
			if rerr := retry(perr); rerr != nil {
				return nil, nil, unknown, rerr
			}
		}
	}
}

// notCommitted marks err as proof that the records are not in the log.
func notCommitted(err error) error {
	if errors.Is(err, ErrNotCommitted) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNotCommitted, err)
}

func (p *Producer) fencedErr(newEpoch uint64) error {
	p.log.Warn("producer fenced by a newer epoch", "epoch", p.epoch, "manifest_epoch", newEpoch)
	return fmt.Errorf("%w: manifest epoch %d, ours %d", ErrFenced, newEpoch, p.epoch)
}

// landed decides whether an earlier commit attempt of batch, whose outcome was
// unknown, is in the freshly loaded manifest m. One CAS carries the whole
// batch, so it landed all together or not at all. Evidence:
//   - any batch location among the tail entries proves it landed (a
//     truncator may since have removed a prefix of the batch's entries);
//     the found entries give the base sequence;
//   - at our epoch only this producer appends, so NextSequence == base+total
//     proves it landed (entries possibly all truncated away), and
//     NextSequence == base proves it did not.
//
// Anything else is an invariant violation.
// truncFirst is the first remaining sequence the attempt's truncations
// left (p.m's own when it planned none).
func (p *Producer) landed(m *Manifest, batch []*pipeSegment, base, total, truncFirst uint64) (bool, []uint64, error) {
	tail, err := m.TailLocations(4*len(batch) + 64)
	if err != nil {
		return false, nil, err
	}
	offsets := make([]uint64, len(batch))
	var cum uint64
	for i, s := range batch {
		offsets[i] = cum
		cum += uint64(s.records)
	}
	found := -1
	for i, s := range batch {
		if e, ok := tail[s.location]; ok {
			if found < 0 {
				found = i
				base = e.Sequence - offsets[i]
			} else if e.Sequence != base+offsets[i] {
				return false, nil, fmt.Errorf("nereus/wal: entries of one commit group are not contiguous in the manifest")
			}
		}
	}
	if found < 0 && m.Epoch() == p.epoch {
		switch m.NextSequence() {
		case base:
			if total == 0 && truncFirst > p.m.firstLive() && m.firstLive() >= truncFirst {
				// A truncation-only commit has no entries to find; the
				// manifest's first remaining sequence proves it landed: the
				// attempt moved it from p.m's to truncFirst (or a truncator
				// at our epoch went further since — what is reported as
				// dropped is settled against this manifest by endTruncs).
				return true, nil, nil
			}
			return false, nil, nil
		case base + total:
			found = 0
		default:
			return false, nil, fmt.Errorf("nereus/wal: manifest next sequence %d is neither %d nor %d after an unknown commit", m.NextSequence(), base, base+total)
		}
	}
	if found < 0 {
		return false, nil, nil
	}
	seqs := make([]uint64, len(batch))
	for i := range batch {
		seqs[i] = base + offsets[i]
	}
	return true, seqs, nil
}
