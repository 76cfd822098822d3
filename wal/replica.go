package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/internal/simrt"
	"github.com/nereusstream/nereus-go/objectstore"
	"go.opentelemetry.io/otel/metric"
)

// Replica defaults.
const (
	DefaultPollInterval          = 50 * time.Millisecond
	DefaultCursorPublishInterval = time.Second
	// replicaReadAhead is how many segments a poll fetches and verifies ahead
	// of the one being applied.
	replicaReadAhead = 4
)

// ReplicaConfig configures the read replica's tail loop.
type ReplicaConfig struct {
	// ManifestPath is the manifest object key (must match the producer).
	ManifestPath string
	// PollInterval is how often Run polls the manifest for new entries
	// (default 50ms).
	PollInterval time.Duration
	// StartAt is the initial cursor: the next sequence to apply. The replica
	// applies records with sequence >= StartAt; if StartAt falls inside a
	// segment, the segment's leading records are skipped. Without snapshots
	// it defaults to 0 (replay from the beginning); bootstrapping from a
	// snapshot sets it to the snapshot's ThroughSeq + 1.
	StartAt uint64
	// Cursor, if set, persists the next-to-apply cursor so a restart resumes
	// instead of replaying from StartAt. A persisted value overrides StartAt.
	Cursor CursorStore
	// CursorSaveInterval batches cursor saves: the cursor is persisted at most
	// once per this many applied segments, plus once at the end of each poll
	// pass that applied anything. 0 or 1 saves after every segment (safest;
	// default). Larger values trade a few extra re-applied segments after a
	// crash (idempotent) for fewer fsyncs.
	CursorSaveInterval int
	// MaxRecordsPerPoll bounds how many records a single Poll applies: once a
	// poll has applied at least this many, it stops at the next segment
	// boundary (cursor saved there) and returns, leaving the rest for the
	// following Poll. 0 means unbounded (drain everything available).
	// Granularity is a whole segment, so the effective cap is "the first
	// segment boundary at or past this count". Run polls again at once after
	// a capped pass.
	MaxRecordsPerPoll int
	// ReplicaID, if set, publishes this replica's next-to-apply cursor to the
	// object store at "<ManifestPath>.cursors/<ReplicaID>" (before the first
	// apply, then at most once per CursorPublishInterval), so a GC never
	// truncates or deletes records this replica still needs. Only cursors
	// already persisted by Cursor are published; without a Cursor the
	// in-memory cursor is, so such a replica must re-bootstrap after a
	// restart. Must not contain '/'. Empty: the replica is invisible to GC.
	ReplicaID string
	// CursorPublishInterval bounds how often the published cursor is
	// rewritten (default 1s). A stale published cursor is safe: it only makes
	// GC keep more.
	CursorPublishInterval time.Duration
	// Logger receives structured lifecycle events: poll/apply errors. Defaults
	// to a text logger on stderr filtered to Warn, so a healthy replica is
	// silent; pass your own *slog.Logger to change verbosity or destination.
	Logger *slog.Logger
	// Meter records applied-record and poll-duration metrics. Defaults to
	// otel.GetMeterProvider()'s meter, a no-op until the process calls
	// otel.SetMeterProvider.
	Meter metric.Meter
}

func (c ReplicaConfig) withDefaults() (ReplicaConfig, error) {
	var err error
	switch {
	case c.ManifestPath == "":
		err = errors.New("nereus/wal: ReplicaConfig.ManifestPath is required")
	case c.PollInterval < 0 || c.CursorSaveInterval < 0 || c.MaxRecordsPerPoll < 0 || c.CursorPublishInterval < 0:
		err = errors.New("nereus/wal: ReplicaConfig fields must not be negative")
	case c.ReplicaID != "":
		err = validReplicaID(c.ReplicaID)
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.CursorSaveInterval == 0 {
		c.CursorSaveInterval = 1
	}
	if c.CursorPublishInterval == 0 {
		c.CursorPublishInterval = DefaultCursorPublishInterval
	}
	if c.Logger == nil {
		c.Logger = defaultLogger()
	}
	if c.Meter == nil {
		c.Meter = defaultMeter()
	}
	return c, err
}

// errReplicaConfig marks configuration errors, which Run does not retry.
var errReplicaConfig = errors.New("nereus/wal: invalid replica configuration")

// Replica tails the WAL and applies records to a local state machine via an
// Applier. Many replicas may tail the same manifest concurrently; readers are
// not epoch-fenced. A Replica is not safe for concurrent use: call Poll (or
// Run) from one goroutine.
type Replica struct {
	os     objectstore.ObjectStore
	store  *Store
	apply  Applier
	cfg    ReplicaConfig
	cfgErr error
	log    *slog.Logger
	met    *replicaMetrics

	next         atomic.Uint64 // written only by the polling goroutine; Next may read it anytime
	restored     bool
	published    bool
	publishedAt  time.Time
	publishedVal uint64
	durable      uint64 // highest cursor known persisted (next itself without a CursorStore)
}

// NewReplica constructs a replica positioned at cfg.StartAt (or at its
// persisted cursor, see ReplicaConfig.Cursor). A configuration error is
// reported by the first Poll or Run.
func NewReplica(os objectstore.ObjectStore, apply Applier, cfg ReplicaConfig) *Replica {
	cfg, err := cfg.withDefaults()
	r := &Replica{
		os:    os,
		store: NewStore(os, cfg.ManifestPath),
		apply: apply,
		cfg:   cfg,
		log:   cfg.Logger.With("component", "wal.replica", "manifest", cfg.ManifestPath),
		met:   newReplicaMetrics(cfg.Meter),
	}
	r.next.Store(cfg.StartAt)
	if err != nil {
		r.cfgErr = fmt.Errorf("%w: %w", errReplicaConfig, err)
	}
	return r
}

// Next returns the next sequence the replica expects to apply (one past the
// highest applied record). It is safe to call while Poll or Run is running.
func (r *Replica) Next() uint64 { return r.next.Load() }

// Poll runs one tail pass: it loads the manifest, fetches and applies every
// record with sequence >= cursor in order, and advances the cursor (per
// segment). It returns the number of records applied. The cursor advances past
// a segment only after all of its records have been applied, so a mid-segment
// failure re-applies the whole segment next time (hence the idempotency
// requirement).
//
// Errors: ErrCorrupt (a manifest or segment failed its integrity check) and
// ErrTruncated (the records needed next were truncated) are permanent; Run
// stops on them. Anything else (a transport error, an Apply error) is worth
// another pass.
func (r *Replica) Poll(ctx context.Context) (int, error) {
	n, _, err := r.poll(ctx)
	return n, err
}

// Run polls until ctx is cancelled, returning ctx.Err() on exit. Transient
// errors (fetch, apply) are logged and retried with backoff; permanent ones
// (ErrCorrupt, ErrTruncated, configuration) stop Run and are returned, so a
// corrupt object stops replication instead of spinning on it.
func (r *Replica) Run(ctx context.Context) error {
	bo := newBackoff(r.cfg.PollInterval, simrt.New(nil))
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		_, more, err := r.poll(ctx)
		wait := r.cfg.PollInterval
		switch {
		case err == nil:
			bo = newBackoff(r.cfg.PollInterval, simrt.New(nil))
			if more {
				wait = 0
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTruncated) || errors.Is(err, errReplicaConfig):
			r.log.Error("replication stopped", "next", r.next.Load(), "err", err)
			return err
		default:
			r.log.Warn("poll failed, retrying", "next", r.next.Load(), "err", err)
			if serr := bo.sleep(ctx); serr != nil {
				return serr
			}
		}
		timer.Reset(wait)
	}
}

type fetchedSegment struct {
	entry Entry
	recs  [][]byte
	err   error
}

// fetch GETs and verifies one segment. A record count that disagrees with the
// manifest entry is corruption too.
func (r *Replica) fetch(ctx context.Context, e Entry) ([][]byte, error) {
	data, _, err := r.os.Get(ctx, e.Location)
	if err != nil {
		return nil, fmt.Errorf("nereus/wal: replica get %s: %w", e.Location, err)
	}
	recs, _, err := decodeSegment(data)
	if err != nil {
		return nil, fmt.Errorf("nereus/wal: segment %s: %w", e.Location, err)
	}
	if e.Count != 0 && len(recs) != int(e.Count) {
		return nil, fmt.Errorf("nereus/wal: segment %s: %w: holds %d records, manifest entry says %d", e.Location, ErrCorrupt, len(recs), e.Count)
	}
	return recs, nil
}

// poll is Poll also reporting whether MaxRecordsPerPoll cut the pass short.
func (r *Replica) poll(ctx context.Context) (applied int, more bool, err error) {
	if r.cfgErr != nil {
		return 0, false, r.cfgErr
	}
	start := time.Now()
	defer func() {
		r.met.poll.Record(context.Background(), time.Since(start).Seconds())
		if err != nil {
			r.met.errors.Add(context.Background(), 1)
		}
	}()
	if !r.restored {
		if r.cfg.Cursor != nil {
			next, ok, err := r.cfg.Cursor.Load(ctx)
			if err != nil {
				return 0, false, fmt.Errorf("nereus/wal: load cursor: %w", err)
			}
			if ok {
				r.next.Store(next)
			}
		}
		r.restored = true
		r.durable = r.next.Load()
	}
	if !r.published {
		// Register before reading anything, so a collector that runs from
		// now on keeps what this replica needs.
		if err := r.publish(ctx); err != nil {
			return 0, false, err
		}
	}
	defer func() {
		if r.cfg.Cursor == nil {
			r.durable = r.next.Load()
		}
		if r.durable != r.publishedVal && time.Since(r.publishedAt) >= r.cfg.CursorPublishInterval && ctx.Err() == nil {
			if perr := r.publish(ctx); perr != nil {
				r.log.Warn("publishing cursor failed", "next", r.next.Load(), "err", perr)
			}
		}
	}()
	m, _, ok, err := r.store.Load(ctx)
	if err != nil || !ok {
		return 0, false, err
	}
	if first := m.firstLive(); first > r.next.Load() {
		return 0, false, fmt.Errorf("%w: replica needs sequence %d, first live sequence is %d (snapshot %q through %d)",
			ErrTruncated, r.next.Load(), first, m.Snapshot().Location, m.Snapshot().ThroughSeq)
	}
	entries, _ := m.EntriesContaining(r.next.Load())
	if len(entries) == 0 {
		return 0, false, nil
	}

	fctx, cancel := context.WithCancel(ctx)
	order := make(chan chan fetchedSegment, replicaReadAhead)
	slots := make(chan struct{}, replicaReadAhead)
	go func() {
		defer close(order)
		for _, e := range entries {
			select {
			case slots <- struct{}{}:
			case <-fctx.Done():
				return
			}
			rc := make(chan fetchedSegment, 1)
			go func() {
				recs, err := r.fetch(fctx, e)
				rc <- fetchedSegment{entry: e, recs: recs, err: err}
			}()
			select {
			case order <- rc:
			case <-fctx.Done():
				return
			}
		}
	}()
	defer func() {
		cancel()
		for rc := range order {
			<-rc
		}
	}()

	sinceSave := 0
	save := func() error {
		if r.cfg.Cursor == nil || sinceSave == 0 {
			return nil
		}
		if err := r.cfg.Cursor.Save(ctx, r.next.Load()); err != nil {
			return fmt.Errorf("nereus/wal: persist cursor at next %d: %w", r.next.Load(), err)
		}
		sinceSave = 0
		r.durable = r.next.Load()
		return nil
	}
	defer func() {
		if serr := save(); err == nil {
			err = serr
		}
	}()
	for rc := range order {
		f := <-rc
		<-slots
		if f.err != nil {
			return applied, false, f.err
		}
		e := f.entry
		var skip uint64
		if e.Count != 0 && r.next.Load() > e.Sequence {
			skip = r.next.Load() - e.Sequence // StartAt (or a resumed cursor) mid-segment
		}
		mi := 0
		for i, data := range f.recs {
			for mi+1 < len(e.Metadata) && int(e.Metadata[mi+1].StartIndex) <= i {
				mi++
			}
			if uint64(i) < skip {
				continue
			}
			rec := Record{Sequence: e.Sequence, Data: data}
			if e.Count != 0 {
				rec.Sequence += uint64(i)
			}
			if mi < len(e.Metadata) && int(e.Metadata[mi].StartIndex) <= i {
				rec.GroupMeta = e.Metadata[mi].Payload
			}
			if err := r.apply.Apply(ctx, rec); err != nil {
				return applied, false, fmt.Errorf("nereus/wal: apply seq %d: %w", rec.Sequence, err)
			}
			applied++
		}
		r.met.records.Add(context.Background(), int64(len(f.recs))-int64(skip))
		r.met.segments.Add(context.Background(), 1)
		r.next.Store(e.End())
		sinceSave++
		if sinceSave >= r.cfg.CursorSaveInterval {
			if err := save(); err != nil {
				return applied, false, err
			}
		}
		if r.cfg.MaxRecordsPerPoll > 0 && applied >= r.cfg.MaxRecordsPerPoll {
			return applied, true, nil
		}
	}
	return applied, false, nil
}

// publish writes the replica's cursor for collectors. It publishes the last
// cursor known to be persisted, never one ahead of it: a replica restarting
// from its persisted cursor must still find those records. Failures after
// the first successful publish are harmless (a stale cursor keeps more).
func (r *Replica) publish(ctx context.Context) error {
	if r.cfg.ReplicaID == "" {
		r.published = true
		return nil
	}
	if r.published && r.publishedVal == r.durable {
		r.publishedAt = time.Now()
		return nil
	}
	key := cursorPrefix(r.cfg.ManifestPath) + r.cfg.ReplicaID
	if _, err := r.os.Put(ctx, key, encodePublishedCursor(r.durable), objectstore.PutOptions{Mode: objectstore.PutOverwrite}); err != nil {
		return fmt.Errorf("nereus/wal: publish cursor %s: %w", key, err)
	}
	if r.published {
		r.publishedAt = time.Now()
	}
	// The registration publish does not start the rate limit: the first pass
	// that applies anything publishes its progress at once.
	r.published, r.publishedVal = true, r.durable
	return nil
}
