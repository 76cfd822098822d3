package stream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/stream/generation"
)

// Compaction builds and publishes views (view.go). The core does not know
// what a key or a tombstone is: a protocol adapter supplies a Compactor,
// which sees entries and rewrites their payloads; the core reads, tiles,
// stores, publishes and retires.
//
// One pass of view K of stream S, where S is owned (like retention):
//
//  1. dirty range [D, U): D = max(S.Start, view.Through), U = what the
//     adapter's policy allows (e.g. older than min.compaction.lag.ms);
//  2. pass 1: every lossless entry of [D, U) goes to Compactor.Scan (the
//     adapter builds its key -> latest offset map); Scan may stop early
//     (its map is full: the bound on memory), and SafeEnd may cut the range
//     shorter (e.g. before an open transaction): the cleaned point becomes
//     that cut C;
//  3. pass 2: the old view's entries in [S.Start, view.Through), then the
//     lossless entries of [D, C), go through Compactor.Rewrite; what it
//     keeps is written, with gap entries between, into view objects of at
//     most LifecycleConfig.GenerationBytes each (PUT create-only under keys
//     carrying Seq+1; an unknown PUT is proven by reading back);
//  4. the view record is replaced by CAS (view.go), the old objects move to
//     Retired, then to the retire journal.
//
// Memory: one object being built (<= GenerationBytes plus one entry), the
// read buffers (8 MiB), and whatever the Compactor keeps (its own bound).

// Compactor is one pass's rewrite, supplied by a protocol adapter. Entries
// arrive in offset order. Payloads must not be modified in place.
type Compactor interface {
	// Scan sees each lossless entry of the dirty range (pass 1). It returns
	// false to stop before e (e is then not in the range): used when its
	// key map is full.
	Scan(e ReadEntry) (bool, error)
	// SafeEnd is called after pass 1 with the end of the last entry Scan
	// accepted; it returns the end of the range this pass may compact
	// (<= that end, at an entry boundary).
	SafeEnd(scanned int64) int64
	// Rewrite returns the payload that stays in the view for e (pass 2),
	// covering e's offsets, or nil to drop e wholly. dirty is false for the
	// old view's entries and true for the dirty range's.
	Rewrite(e ReadEntry, dirty bool) ([]byte, error)
}

// LosslessReplacer is what a Compactor also implements when its view is
// to replace the lossless log below the cleaned point (Kafka's
// compact-only topics: the cleaned log is all there is). After such a view
// is published (the CAS proven applied), the pass trims the stream up to
// the cleaned point; GC then reclaims the lossless sources there as for
// any trim, and ReadView serves the view from its own start. A view that
// covered once covers for good (viewRecord.Covers).
type LosslessReplacer interface {
	ReplacesLossless() bool
}

// Recleaner is what a Compactor also implements when what its rewrite
// keeps changes with time alone (Kafka: a tombstone or an empty
// transaction's marker goes delete.retention.ms after its batch was first
// cleaned). After pass 2, RecleanAtMs is the earliest time (Unix ms; 0:
// never) at which rewriting the published view again would drop
// something; the view record keeps it (ViewInfo.RecleanAt). From then on a
// pass is run even with nothing new to compact: it rewrites the view
// alone (same cleaned point).
type Recleaner interface {
	RecleanAtMs() int64
}

// recleanDue reports whether view rec asked for a pass over itself alone
// by now (and has something to rewrite).
func (c *Core) recleanDue(rec *viewRecord, start int64) bool {
	return rec != nil && rec.RecleanMs > 0 && c.nowMs() >= rec.RecleanMs && rec.Through > floorOf(rec, start) && rec.Through >= start
}

// CompactionPolicy decides, per owned stream and pass, whether a view kind
// is wanted and up to which offset. It is asked from the retention pass.
type CompactionPolicy interface {
	// PlanCompaction returns the dirty end (exclusive) this pass may
	// compact up to and a fresh Compactor; upTo <= v.Through (or a nil
	// Compactor) means nothing to do now.
	PlanCompaction(ctx context.Context, in Info, v ViewInfo) (upTo int64, c Compactor, err error)
}

type viewPolicyEntry struct {
	kind  string
	match func(Info) bool
	p     CompactionPolicy
}

// RegisterCompactionPolicy makes the retention pass maintain view kind of
// every owned stream match accepts, as p decides.
func (c *Core) RegisterCompactionPolicy(kind string, match func(Info) bool, p CompactionPolicy) {
	c.views.mu.Lock()
	defer c.views.mu.Unlock()
	e := viewPolicyEntry{kind: kind, match: match, p: p}
	for i := range c.views.policies {
		if c.views.policies[i].kind == kind {
			c.views.policies[i] = e // the latest registration wins (a restarted front end)
			return
		}
	}
	c.views.policies = append(c.views.policies, e)
}

// CompactionStats are the outcome of one pass.
type CompactionStats struct {
	View ViewInfo
	// Published is true when the pass published a new view.
	Published bool
	// ScannedBytes is the dirty payload read by pass 1; SourceBytes all
	// payload bytes pass 2 read (old view + dirty); KeptBytes what the
	// new view holds.
	ScannedBytes, SourceBytes, KeptBytes int64
	// Why says why nothing was published, when it was not.
	Why string
}

var errViewStale = errors.New("nereus/stream: view publication lost to another one")

// Compact runs one compaction pass of view kind of stream id up to upTo
// with cmp (see the file comment). It runs where it is called: callers use
// it where the stream is owned (the retention pass does), but a pass
// elsewhere is still safe (the CAS decides).
func (c *Core) Compact(ctx context.Context, id ID, kind string, upTo int64, cmp Compactor) (CompactionStats, error) {
	if err := validViewKind(kind); err != nil {
		return CompactionStats{}, err
	}
	if c.gens == nil {
		return CompactionStats{}, fmt.Errorf("%w: views need an object store", ErrInvalidArgument)
	}
	k := viewCacheKey{id, kind}
	c.views.mu.Lock()
	if c.views.running == nil {
		c.views.running = map[viewCacheKey]bool{}
	}
	if c.views.running[k] {
		c.views.mu.Unlock()
		return CompactionStats{Why: "a pass is already running"}, nil
	}
	c.views.running[k] = true
	c.views.mu.Unlock()
	defer func() {
		c.views.mu.Lock()
		delete(c.views.running, k)
		c.views.mu.Unlock()
	}()

	rec, ver, err := c.loadView(ctx, id, kind, math.MinInt64)
	if err != nil {
		return CompactionStats{}, err
	}
	if err := c.retireViewObjects(ctx, id, rec, ver, "replaced by a newer view"); err != nil {
		return CompactionStats{}, err
	}
	if rec != nil && len(rec.Retired) > 0 {
		if rec, ver, err = c.loadView(ctx, id, kind, math.MinInt64); err != nil {
			return CompactionStats{}, err
		}
	}
	if err := c.sweepOrphanViews(ctx, id, kind, rec); err != nil {
		c.log.Debug("view orphan sweep failed", "stream", id, "err", err)
	}
	h, _, err := c.readHeadView(ctx, id)
	if err != nil {
		return CompactionStats{}, err
	}
	st := CompactionStats{View: rec.info()}
	replaces := rec != nil && rec.Covers
	if r, ok := cmp.(LosslessReplacer); ok && r.ReplacesLossless() {
		replaces = true
	}
	// lo is where the new view starts: the stream's start, or a covering
	// view's own start (the offsets below the stream's start are the
	// view's alone and are carried over).
	lo := floorOf(rec, h.Start)
	dirty := h.Start
	if rec != nil {
		dirty = max(dirty, rec.Through)
	}
	upTo = min(upTo, h.End)
	// A reclean pass rewrites the view alone: nothing new to compact, but
	// the view asked to be rewritten by now.
	reclean := upTo <= dirty && c.recleanDue(rec, h.Start)
	if upTo <= dirty && !reclean {
		st.Why = "nothing new to compact"
		return st, nil
	}

	// Pass 1.
	scanned, cut := dirty, dirty
	if !reclean {
		err = c.forEntries(ctx, id, dirty, upTo, func(e ReadEntry) (bool, error) {
			ok, err := cmp.Scan(e)
			if ok && err == nil {
				scanned = e.Offset + int64(e.RecordCount)
				st.ScannedBytes += int64(len(e.Payload))
			}
			return ok, err
		})
		if err != nil {
			return st, err
		}
		cut = min(cmp.SafeEnd(scanned), scanned)
		if cut <= dirty && !c.recleanDue(rec, h.Start) {
			c.log.Debug("compaction pass: nothing to compact yet", "stream", id, "kind", kind, "dirty", dirty, "up_to", upTo, "scanned_to", scanned)
			st.Why = "the compactor allows nothing yet"
			return st, nil
		}
		cut = max(cut, dirty)
	}

	// Pass 2.
	seq := uint64(1)
	if rec != nil {
		seq = rec.Seq + 1
	}
	w := &viewWriter{c: c, ctx: ctx, id: id, kind: kind, seq: seq, limit: c.cfg.Lifecycle.GenerationBytes, origin: lo}
	defer w.abandon()
	if rec != nil && rec.Through > lo {
		for _, o := range rec.Objects {
			if o.End <= lo {
				continue
			}
			if err := c.forViewObject(ctx, o, lo, func(e generation.Entry) error {
				if len(e.Payload) == 0 {
					return nil
				}
				st.SourceBytes += int64(len(e.Payload))
				re := ReadEntry{Offset: e.Offset, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: e.Payload}
				p, err := cmp.Rewrite(re, false)
				if err != nil || len(p) == 0 {
					return err
				}
				return w.add(re, p)
			}); err != nil {
				return st, err
			}
		}
	}
	if err := c.forEntries(ctx, id, dirty, cut, func(e ReadEntry) (bool, error) {
		st.SourceBytes += int64(len(e.Payload))
		p, err := cmp.Rewrite(e, true)
		if err != nil || len(p) == 0 {
			return err == nil, err
		}
		return true, w.add(e, p)
	}); err != nil {
		return st, err
	}
	objs, err := w.finish(cut)
	if err != nil {
		return st, err
	}
	st.KeptBytes = w.kept

	// Publication.
	throughBytes, err := c.bytesBefore(ctx, h, cut)
	if err != nil {
		throughBytes = 0 // only an estimate for policies; never fail the pass for it
	}
	next := &viewRecord{ThroughBytes: throughBytes, Kind: kind, Seq: seq, Start: objs[0].Start, Through: cut, Objects: objs,
		CompactedMs: c.nowMs(), KeptBytes: w.kept, SourceBytes: st.SourceBytes, Covers: replaces}
	if r, ok := cmp.(Recleaner); ok {
		next.RecleanMs = max(r.RecleanAtMs(), 0)
	}
	if rec != nil {
		next.Retired = rec.Objects
	}
	nver, err := c.publishView(ctx, id, next, ver)
	if err != nil {
		if errors.Is(err, errViewStale) {
			w.deleteAll() // definitely not published
			st.Why = "another pass published first"
			return st, nil
		}
		if errors.Is(err, ErrCommitUnknown) {
			w.keep = true // maybe published: the orphan sweep decides later
		}
		return st, err
	}
	w.keep = true
	c.views.put(k, next, c.rt.now(), h.Start)
	c.lc.compactions.Add(1)
	c.lc.compactedBytes.Add(st.SourceBytes)
	st.Published, st.View = true, next.info()
	c.log.Debug("view published", "stream", id, "kind", kind, "seq", seq, "start", next.Start, "through", cut,
		"scanned_to", scanned, "objects", len(objs), "kept_bytes", w.kept, "source_bytes", st.SourceBytes)
	if err := c.retireViewObjects(ctx, id, next, nver, "replaced by a newer view"); err != nil {
		c.log.Debug("retiring replaced view objects failed; the next pass retries", "stream", id, "err", err)
	}
	if next.Covers {
		// The view is published (proven above) and durable (its objects
		// were proven stored): the lossless log below the cleaned point
		// may go. The trim is the head CAS; a failure is retried by the
		// next pass (compactPass).
		if err := c.Trim(ctx, id, cut); err != nil {
			c.log.Debug("trimming below a covering view failed; the next pass retries", "stream", id, "err", err)
		} else {
			c.lc.viewTrims.Add(1)
		}
	}
	return st, nil
}

// publishView replaces the view record at version ver by next. Outcomes:
// nil = applied; errViewStale = definitely not (someone else's record is
// there); ErrCommitUnknown = could not be settled.
func (c *Core) publishView(ctx context.Context, id ID, next *viewRecord, ver metadata.Version) (metadata.Version, error) {
	for attempt := 0; ; attempt++ {
		v, err := c.meta.Put(ctx, viewKey(id, next.Kind), next.encode(), ver)
		switch metadata.Classify(err) {
		case metadata.Applied:
			return v, nil
		case metadata.NotApplied:
			return 0, err
		}
		// Conflict or unknown: settle by reading the record back.
		cur, err2 := c.meta.Get(ctx, viewKey(id, next.Kind))
		switch {
		case err2 == nil:
			r, derr := decodeViewRecord(cur.Value)
			if derr != nil {
				return 0, derr
			}
			if r.Seq == next.Seq && len(r.Objects) > 0 && r.Objects[0].Key == next.Objects[0].Key {
				return cur.Version, nil // ours applied (its answer was lost)
			}
			if r.Seq >= next.Seq || metadata.Classify(err) == metadata.Conflict {
				return 0, errViewStale
			}
			// Unknown outcome and the record is still the old one: ours
			// did not apply (the Put would be visible); try again.
		case errors.Is(err2, metadata.ErrKeyNotFound) && ver == metadata.NotExists:
		default:
			if attempt >= 5 {
				return 0, fmt.Errorf("%w: view publication: %w (proof: %w)", ErrCommitUnknown, err, err2)
			}
		}
		if attempt >= 5 {
			return 0, fmt.Errorf("%w: view publication: %w", ErrCommitUnknown, err)
		}
		if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
			return 0, fmt.Errorf("%w: view publication: %w", ErrCommitUnknown, err)
		}
	}
}

// forEntries calls fn for the lossless entries of id from `from` up to end
// (entries starting at or after end are not passed) until fn says stop.
func (c *Core) forEntries(ctx context.Context, id ID, from, end int64, fn func(ReadEntry) (bool, error)) error {
	next := from
	for next < end {
		res, err := c.Read(ctx, id, next, ReadOptions{MaxBytes: 8 << 20, MaxEntries: 10000})
		if err != nil {
			return err
		}
		if len(res.Entries) == 0 {
			return nil
		}
		for _, e := range res.Entries {
			if e.Offset >= end {
				return nil
			}
			ok, err := fn(e)
			if err != nil || !ok {
				return err
			}
		}
		next = res.Next
	}
	return nil
}

// forViewObject calls fn for the entries of view object o ending after from.
func (c *Core) forViewObject(ctx context.Context, o genTarget, from int64, fn func(generation.Entry) error) error {
	next := max(from, o.Start)
	for next < o.End {
		es, err := c.gens.r.Read(ctx, o.Key, o.Info, next, 8<<20)
		if err != nil {
			return fmt.Errorf("reading view object %s: %w", o.Key, err)
		}
		if len(es) == 0 {
			return fmt.Errorf("nereus/stream: no progress reading view object %s at %d", o.Key, next)
		}
		for _, e := range es {
			if e.End() <= next {
				continue
			}
			if err := fn(e); err != nil {
				return err
			}
			next = e.End()
		}
	}
	return nil
}

// viewWriter tiles kept entries and gaps into view objects and stores them.
type viewWriter struct {
	c       *Core
	ctx     context.Context
	id      ID
	kind    string
	seq     uint64
	limit   int64
	origin  int64 // the stream's start: the view begins there (a gap if nothing is kept)
	b       *generation.Builder
	next    int64 // the offset the next entry must start at (after init)
	started bool
	objs    []genTarget
	kept    int64
	keep    bool // published, or maybe: abandon must not delete the objects
}

// maxGap bounds one gap entry's record count (a u32 in the format).
const maxGap = math.MaxUint32

func (w *viewWriter) begin(at int64) {
	if w.b == nil {
		w.b = generation.NewBuilder(uint64(w.id), w.seq, at, generation.BuilderOptions{Kind: generation.KindView})
	} else {
		w.b.Reset(uint64(w.id), w.seq, at)
	}
	w.started = true
}

// gapTo fills [w.next, to) with gap entries.
func (w *viewWriter) gapTo(to int64, ts int64) error {
	for w.next < to {
		n := min(to-w.next, maxGap)
		if err := w.b.Add(generation.Entry{Offset: w.next, RecordCount: uint32(n), Timestamp: ts}); err != nil {
			return err
		}
		w.next += n
	}
	return nil
}

func (w *viewWriter) add(e ReadEntry, payload []byte) error {
	if !w.started {
		at := min(w.origin, e.Offset) // an entry may straddle the start
		w.begin(at)
		w.next = at
	}
	if e.Offset < w.next {
		return fmt.Errorf("%w: view entry at %d overlaps the previous one (next %d)", ErrCorrupt, e.Offset, w.next)
	}
	if err := w.gapTo(e.Offset, e.Timestamp); err != nil {
		return err
	}
	if err := w.b.Add(generation.Entry{Offset: e.Offset, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: payload}); err != nil {
		return err
	}
	w.next = e.Offset + int64(e.RecordCount)
	w.kept += int64(len(payload))
	if int64(w.b.Len()) >= w.limit {
		return w.flush()
	}
	return nil
}

// flush stores the object being built; the next one starts at w.next.
func (w *viewWriter) flush() error {
	if !w.started || w.b.Entries() == 0 {
		return nil
	}
	obj, info, err := w.b.Finish()
	if err != nil {
		return err
	}
	key := viewObjectKey(w.id, w.kind, w.seq, info.Start, info.End, w.c.random())
	if err := w.c.putGeneration(w.ctx, key, obj, info); err != nil {
		return err
	}
	w.objs = append(w.objs, genTarget{Key: key, Info: info})
	w.b.Reset(uint64(w.id), w.seq, w.next)
	return nil
}

// finish closes the view at end (gaps to it) and returns its objects.
func (w *viewWriter) finish(end int64) ([]genTarget, error) {
	if !w.started {
		w.begin(w.origin)
		w.next = w.origin
	}
	if err := w.gapTo(end, 0); err != nil {
		return nil, err
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	return w.objs, nil
}

// deleteAll removes the objects of a publication that did not apply.
func (w *viewWriter) deleteAll() {
	for _, o := range w.objs {
		if err := w.c.cfg.ObjectStore.Delete(context.WithoutCancel(w.ctx), o.Key, nil); err != nil && !errors.Is(err, objectstore.ErrNotFound) {
			w.c.log.Debug("deleting an unpublished view object failed; the orphan sweep removes it", "key", o.Key, "err", err)
		}
	}
	w.objs = nil
}

// abandon deletes the stored objects of a pass that definitely did not
// publish; objects of a maybe-published one are left to the orphan sweep.
func (w *viewWriter) abandon() {
	if !w.keep && w.objs != nil {
		w.deleteAll()
	}
}

// sweepOrphanViews deletes objects of view kind of id that no publication
// can name any more: Seq at most the record's, not named by it (Objects or
// Retired), older than the grace period.
func (c *Core) sweepOrphanViews(ctx context.Context, id ID, kind string, rec *viewRecord) error {
	if rec == nil || c.cfg.Lifecycle.GCDryRun {
		return nil
	}
	named := map[string]bool{}
	for _, t := range rec.Objects {
		named[t.Key] = true
	}
	for _, t := range rec.Retired {
		named[t.Key] = true
	}
	cutoff := c.rt.now().Add(-c.cfg.Lifecycle.GCGrace)
	for info, err := range c.cfg.ObjectStore.List(ctx, viewObjectKind(id, kind)) {
		if err != nil {
			return err
		}
		seq, ok := seqOfViewObjectKey(info.Key)
		if !ok || seq > rec.Seq || named[info.Key] || info.ModTime.After(cutoff) || !strings.HasPrefix(info.Key, viewObjectKind(id, kind)) {
			continue
		}
		if err := c.journalViewObject(ctx, id, genTarget{Key: info.Key, Info: generation.Info{Size: info.Size}}, "orphan view object"); err != nil {
			return err
		}
	}
	return nil
}

// compactPass runs the registered compaction policies on owned stream in
// (from the retention pass).
func (c *Core) compactPass(ctx context.Context, in Info) error {
	c.views.mu.Lock()
	ps := append([]viewPolicyEntry(nil), c.views.policies...)
	c.views.mu.Unlock()
	if len(ps) == 0 || c.gens == nil {
		return nil
	}
	for _, p := range ps {
		if !p.match(in) {
			continue
		}
		vi, err := c.DescribeView(ctx, in.ID, p.kind)
		if err != nil {
			return err
		}
		if vi.Covers && in.StartOffset < vi.Through {
			// A pass published a covering view but did not get to trim
			// (crash, lost CAS answer): finish it.
			if err := c.Trim(ctx, in.ID, vi.Through); err != nil {
				return err
			}
			c.lc.viewTrims.Add(1)
			in.StartOffset = vi.Through
		}
		upTo, cmp, err := p.p.PlanCompaction(ctx, in, vi)
		if err != nil {
			return err
		}
		due := !vi.RecleanAt.IsZero() && !c.rt.now().Before(vi.RecleanAt)
		if cmp == nil || upTo <= max(vi.Through, in.StartOffset) && !due {
			continue
		}
		if _, err := c.Compact(ctx, in.ID, p.kind, upTo, cmp); err != nil {
			c.lc.compactFailures.Add(1)
			return err
		}
	}
	return nil
}
