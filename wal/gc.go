package wal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"go.opentelemetry.io/otel/metric"
)

// TruncatePolicy selects what a GC may remove from the manifest itself.
type TruncatePolicy uint8

const (
	// TruncateNone: the collector never edits the manifest; it only deletes
	// segments that others truncated and segments never committed.
	TruncateNone TruncatePolicy = iota
	// TruncateToSnapshot: the collector truncates entries covered by the
	// manifest's snapshot pointer (through Snapshot().ThroughSeq), but never
	// past a live replica's published cursor.
	TruncateToSnapshot
	// TruncateApplied: the collector truncates entries every live replica has
	// applied (through min(published cursor)-1). Requires at least one live
	// published cursor. A replica that joins later must bootstrap from a
	// snapshot.
	TruncateApplied
)

// GC defaults.
const (
	DefaultGCGracePeriod = 10 * time.Minute
	gcMaxConflicts       = 16
)

// GCConfig configures a Collector.
type GCConfig struct {
	// ManifestPath is the manifest object key. Required.
	ManifestPath string
	// SegmentPrefix must match the producers' (default ManifestPath+".segments").
	// Only keys shaped "<SegmentPrefix>/<runID>/<ordinal:016x>" are ever
	// considered for deletion.
	SegmentPrefix string
	// GracePeriod (default 10m) must pass twice before a segment is deleted:
	// since the object was written (an upload not yet committed is younger),
	// and since this collector first saw it unreferenced (a reader holding an
	// older manifest may still fetch it). It must exceed the longest time a
	// reader holds a manifest before fetching its segments.
	GracePeriod time.Duration
	// CursorTTL ignores published cursors not rewritten for this long (their
	// replica is presumed gone). Zero (default): cursors never expire, so a
	// dead replica holds truncation back until its cursor object is deleted.
	CursorTTL time.Duration
	// Truncate selects whether and how far the collector truncates the
	// manifest (default TruncateNone).
	Truncate TruncatePolicy
	// Logger defaults to a Warn-level text logger on stderr (silent when
	// healthy).
	Logger *slog.Logger
	// Meter defaults to the global OpenTelemetry meter (no-op unless wired).
	Meter metric.Meter
}

// GCStats reports one collection pass.
type GCStats struct {
	// TruncatedEntries were removed from the manifest by this pass.
	TruncatedEntries int
	// DeletedSegments were deleted from the store by this pass.
	DeletedSegments int
	// KeptUnreferenced are unreferenced segment objects kept because a grace
	// period has not passed or they are not provably dead.
	KeptUnreferenced int
	// LiveCursors is the number of live published replica cursors and
	// MinCursor the smallest of them (valid when LiveCursors > 0).
	LiveCursors int
	MinCursor   uint64
	// ManifestBytes is the size of the manifest after the pass.
	ManifestBytes int
}

// Collector is the retention driver: it optionally truncates the manifest
// (see TruncatePolicy) and deletes segment objects no one can ever read.
//
// A segment object is deleted only when all of these hold:
//  1. the current manifest does not reference it (nor is it the snapshot);
//  2. it was written at least GracePeriod ago, and this collector has seen it
//     unreferenced for at least GracePeriod;
//  3. it can never become referenced again, proven by one of:
//     - this collector saw it referenced earlier and now it is not (it was
//     truncated; truncated locations are never re-appended);
//     - the manifest references a later ordinal of the same run (a run
//     commits strictly in ordinal order, so this one was committed and
//     truncated, or abandoned);
//     - its v2 footer carries an epoch below the manifest's (its producer is
//     fenced and can commit nothing more).
//
// Anything else - notably the live producer's uploads awaiting their commit -
// is kept. Truncation by the collector never passes min(live published
// cursor)-1, so it never removes what a live replica still needs. Run one
// Collector per manifest at a time.
type Collector struct {
	os    objectstore.ObjectStore
	store *Store
	cfg   GCConfig
	log   *slog.Logger
	met   *gcMetrics
	now   func() time.Time

	mu         sync.Mutex
	lastRefs   map[string]bool      // locations referenced at the previous pass
	truncated  map[string]time.Time // seen referenced, then not: when first seen gone
	unrefSince map[string]time.Time // unreferenced segment keys: when first seen
}

// NewCollector validates cfg and returns a Collector.
func NewCollector(os objectstore.ObjectStore, cfg GCConfig) (*Collector, error) {
	if cfg.ManifestPath == "" {
		return nil, errors.New("nereus/wal: GCConfig.ManifestPath is required")
	}
	if cfg.GracePeriod < 0 || cfg.CursorTTL < 0 || cfg.Truncate > TruncateApplied {
		return nil, errors.New("nereus/wal: invalid GCConfig")
	}
	if cfg.SegmentPrefix == "" {
		cfg.SegmentPrefix = cfg.ManifestPath + ".segments"
	}
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = DefaultGCGracePeriod
	}
	if cfg.Logger == nil {
		cfg.Logger = defaultLogger()
	}
	return &Collector{
		os:         os,
		store:      NewStore(os, cfg.ManifestPath),
		cfg:        cfg,
		log:        cfg.Logger.With("component", "wal.gc", "manifest", cfg.ManifestPath),
		met:        newGCMetrics(cfg.Meter),
		now:        time.Now,
		lastRefs:   map[string]bool{},
		truncated:  map[string]time.Time{},
		unrefSince: map[string]time.Time{},
	}, nil
}

// Run collects every interval until ctx ends, logging failed passes, and
// returns ctx.Err().
func (g *Collector) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := g.Collect(ctx); err != nil && ctx.Err() == nil {
			g.log.Warn("collection pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// segmentKey splits "<prefix>/<runID>/<ordinal:016x>".
func (g *Collector) segmentKey(key string) (run string, ordinal uint64, ok bool) {
	rest, found := strings.CutPrefix(key, g.cfg.SegmentPrefix+"/")
	if !found {
		return "", 0, false
	}
	run, ord, found := strings.Cut(rest, "/")
	if !found || run == "" || len(ord) != 16 {
		return "", 0, false
	}
	o, err := strconv.ParseUint(ord, 16, 64)
	if err != nil {
		return "", 0, false
	}
	return run, o, true
}

// Collect runs one pass: read published cursors, truncate per policy, delete
// dead segments. It is safe to call while a producer and replicas run.
func (g *Collector) Collect(ctx context.Context) (GCStats, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var st GCStats
	now := g.now()

	cursors, err := readPublishedCursors(ctx, g.os, g.cfg.ManifestPath)
	if err != nil {
		return st, err
	}
	for _, c := range cursors {
		if g.cfg.CursorTTL > 0 && now.Sub(c.modTime) > g.cfg.CursorTTL {
			continue
		}
		next := c.next
		if c.err != nil {
			g.log.Error("unreadable published cursor, holding truncation at 0", "replica", c.replicaID, "err", c.err)
			next = 0
		}
		if st.LiveCursors == 0 || next < st.MinCursor {
			st.MinCursor = next
		}
		st.LiveCursors++
	}

	m, ver, ok, err := g.store.Load(ctx)
	if err != nil || !ok {
		return st, err // no manifest: nothing is provably dead yet
	}
	seen := m.locations() // referenced before this pass's own truncation
	if m, err = g.truncate(ctx, m, ver, st, &st.TruncatedEntries); err != nil {
		return st, err
	}
	if b, err := m.Bytes(); err == nil {
		st.ManifestBytes = len(b)
	}

	refs := map[string]bool{}
	maxOrd := map[string]uint64{}
	for _, loc := range m.locations() {
		refs[loc] = true
		if run, ord, ok := g.segmentKey(loc); ok {
			if cur, seen := maxOrd[run]; !seen || ord > cur {
				maxOrd[run] = ord
			}
		}
	}
	for _, loc := range seen {
		g.lastRefs[loc] = true
	}
	for loc := range g.lastRefs {
		if !refs[loc] {
			if _, seen := g.truncated[loc]; !seen {
				g.truncated[loc] = now
			}
		}
	}
	g.lastRefs = refs

	listed := map[string]bool{}
	for info, err := range g.os.List(ctx, g.cfg.SegmentPrefix+"/") {
		if err != nil {
			return st, fmt.Errorf("nereus/wal: list segments: %w", err)
		}
		run, ord, ok := g.segmentKey(info.Key)
		if !ok || refs[info.Key] || info.Key == m.Snapshot().Location {
			continue
		}
		listed[info.Key] = true
		since, seen := g.unrefSince[info.Key]
		if !seen {
			since = now
			g.unrefSince[info.Key] = now
		}
		if now.Sub(info.ModTime) < g.cfg.GracePeriod || now.Sub(since) < g.cfg.GracePeriod {
			st.KeptUnreferenced++
			continue
		}
		dead, why := g.dead(ctx, info, run, ord, maxOrd, m.Epoch())
		if !dead {
			st.KeptUnreferenced++
			continue
		}
		if err := g.delete(ctx, info); err != nil {
			g.log.Warn("deleting segment failed", "segment", info.Key, "err", err)
			st.KeptUnreferenced++
			continue
		}
		g.log.Debug("deleted segment", "segment", info.Key, "reason", why)
		delete(g.unrefSince, info.Key)
		delete(g.truncated, info.Key)
		st.DeletedSegments++
	}
	// Forget keys that no longer exist.
	for k := range g.unrefSince {
		if !listed[k] {
			delete(g.unrefSince, k)
		}
	}
	for k, t := range g.truncated {
		if !listed[k] && now.Sub(t) > g.cfg.GracePeriod {
			delete(g.truncated, k)
		}
	}
	g.met.deleted.Add(context.Background(), int64(st.DeletedSegments))
	g.met.kept.Add(context.Background(), int64(st.KeptUnreferenced))
	return st, nil
}

// dead reports whether an unreferenced segment can never be referenced again.
func (g *Collector) dead(ctx context.Context, info objectstore.ObjectInfo, run string, ord uint64, maxOrd map[string]uint64, epoch uint64) (bool, string) {
	if _, ok := g.truncated[info.Key]; ok {
		return true, "truncated"
	}
	if m, ok := maxOrd[run]; ok && m > ord {
		return true, "later ordinal of its run is committed"
	}
	data, _, err := g.os.Get(ctx, info.Key)
	if err != nil {
		return false, ""
	}
	f, err := verifySegment(data)
	if err != nil {
		g.log.Warn("unreferenced segment fails verification, keeping it", "segment", info.Key, "err", err)
		return false, ""
	}
	if f.format == formatNereus2 && f.epoch < epoch {
		return true, "written by a fenced producer"
	}
	return false, ""
}

func (g *Collector) delete(ctx context.Context, info objectstore.ObjectInfo) error {
	v := info.Version
	err := g.os.Delete(ctx, info.Key, &v)
	if errors.Is(err, objectstore.ErrInvalidArgument) {
		err = g.os.Delete(ctx, info.Key, nil) // backend cannot condition deletes
	}
	if errors.Is(err, objectstore.ErrNotFound) {
		return nil
	}
	return err
}

// truncate applies the truncation policy with a bounded CAS loop. It keeps
// the loaded epoch and never appends, so a live producer re-plans over it.
func (g *Collector) truncate(ctx context.Context, m *Manifest, ver *objectstore.UpdateVersion, st GCStats, removed *int) (*Manifest, error) {
	for attempt := 0; attempt < gcMaxConflicts; attempt++ {
		through, ok := g.truncationPoint(m, st)
		if !ok || m.Count() == 0 || m.refs[0].end()-1 > through {
			return m, nil
		}
		work := m.clone()
		n, _ := work.TruncateThrough(through)
		_, err := g.store.put(ctx, work, ver)
		if err == nil {
			*removed += n
			g.met.truncated.Add(context.Background(), int64(n))
			g.log.Info("truncated manifest", "through", through, "entries", n)
			return work, nil
		}
		switch objectstore.Classify(err) {
		case objectstore.Conflict, objectstore.Unknown:
			// Lost a race with the producer, or unknown: reload and
			// recompute. Truncation is idempotent, so a landed unknown
			// attempt simply leaves nothing more to do.
		default:
			if !errors.Is(err, objectstore.ErrConflict) {
				return m, fmt.Errorf("nereus/wal: truncate manifest: %w", err)
			}
		}
		nm, nver, loaded, lerr := g.store.Load(ctx)
		if lerr != nil {
			return m, lerr
		}
		if !loaded {
			return m, fmt.Errorf("nereus/wal: manifest %s disappeared", g.cfg.ManifestPath)
		}
		m, ver = nm, nver
	}
	return m, fmt.Errorf("nereus/wal: truncation lost %d CAS races", gcMaxConflicts)
}

func (g *Collector) truncationPoint(m *Manifest, st GCStats) (uint64, bool) {
	var through uint64
	switch g.cfg.Truncate {
	case TruncateToSnapshot:
		snap := m.Snapshot()
		if snap.IsZero() {
			return 0, false
		}
		through = snap.ThroughSeq
	case TruncateApplied:
		if st.LiveCursors == 0 {
			return 0, false
		}
		through = st.MinCursor - 1
	default:
		return 0, false
	}
	if st.LiveCursors > 0 {
		if st.MinCursor == 0 {
			return 0, false
		}
		through = min(through, st.MinCursor-1)
	}
	return through, true
}
