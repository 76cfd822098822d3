package stream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/generation"
)

// Views: lossy read views of a stream (compacted topics).
//
// A view of kind K (e.g. "kafka-compact") of stream S is a set of objects in
// package generation's format with KindView in their header, tiling
// [Start, Through) of S's offsets. Offsets are S's offsets: a view entry
// covers exactly the offsets its source entry covered (its payload is the
// protocol adapter's rewrite of it, e.g. a Kafka batch with records
// dropped), and offsets dropped wholly are gap entries (empty payloads).
// A view never stands in for the lossless stream: Read never consults it,
// GC never retires a lossless source because of it, and only ReadView
// serves it, below Through; at and above Through ReadView is Read.
//
// The view index is separate from the lossless one: one record per (S, K),
// s/v/<id>/<kind>, naming the objects of the current view. A new view is
// published by one version-CAS of that record (closed outcome: applied, not
// applied, conflict, or unknown — settled by re-reading the record, which
// names our nonce-unique object keys if it applied). Its sequence number
// (Seq) is in every object key and must be the record's Seq+1, so a view is
// never published twice and an object whose Seq is at most the record's
// and that the record does not name can never be published (the orphan
// rule). The objects of the replaced view stay named in the new record's
// Retired list until they are in the retire journal (gc.go deletes them
// after the grace period), so a crash between the two steps loses nothing
// and leaks nothing.

// viewKeyPrefix is the metadata prefix of view records.
const viewKeyPrefix = "s/v/"

func viewPrefix(id ID) string                  { return viewKeyPrefix + id.String() + "/" }
func viewKey(id ID, kind string) string        { return viewPrefix(id) + kind }
func viewObjectPrefix(id ID) string            { return "view/" + id.String() + "/" }
func viewObjectKind(id ID, kind string) string { return viewObjectPrefix(id) + kind + "/" }

// viewObjectKey names one object of publication seq of view kind of id.
func viewObjectKey(id ID, kind string, seq uint64, start, end int64, nonce uint64) string {
	return fmt.Sprintf("%s%020d-%020d-%020d-%016x", viewObjectKind(id, kind), seq, start, end, nonce)
}

// seqOfViewObjectKey parses the publication number out of a view object key.
func seqOfViewObjectKey(key string) (uint64, bool) {
	i := strings.LastIndexByte(key, '/')
	var seq uint64
	if i < 0 || len(key) < i+21 {
		return 0, false
	}
	if _, err := fmt.Sscanf(key[i+1:i+21], "%d", &seq); err != nil {
		return 0, false
	}
	return seq, true
}

func validViewKind(kind string) error {
	if kind == "" || len(kind) > 64 || strings.ContainsAny(kind, "/\x00") {
		return fmt.Errorf("%w: view kind %q", ErrInvalidArgument, kind)
	}
	return nil
}

// viewRecordV1 is the first layout; V2 appends a flags byte (bit 0:
// Covers), V3 then RecleanMs. Older records decode with those zero.
const (
	viewRecordV1 = 1
	viewRecordV2 = 2
	viewRecordV3 = 3
)

// viewFlagCovers marks a view that covers its stream's reclaimed prefix.
const viewFlagCovers = 1

// viewRecord is the published state of one view.
type viewRecord struct {
	Kind string
	// Seq is the number of the publication that wrote this record.
	Seq uint64
	// Start and Through bound the offsets the view serves: [Start, Through).
	Start, Through int64
	// Objects tile [Start, Through) in order.
	Objects []genTarget
	// Retired are the previous publication's objects, until journaled.
	Retired     []genTarget
	CompactedMs int64
	// KeptBytes is the view's payload size; SourceBytes what its last
	// pass read to build it.
	KeptBytes, SourceBytes int64
	// ThroughBytes is the stream's cumulative committed payload before
	// Through (at the granularity of committed runs): what a policy
	// subtracts from CommittedBytes to estimate the dirty bytes.
	ThroughBytes int64
	// Covers is set once the view replaces the lossless log below Through
	// (the policy asked for it: Kafka's compact-only topics): the lossless
	// stream is then trimmed up to Through, and the view alone serves
	// [Start, Through), whatever the stream's start. Once set it stays set:
	// the offsets below the stream's start exist nowhere else.
	Covers bool
	// RecleanMs (Unix ms, 0: never) is when rewriting this view again,
	// with no new data, would drop something (Compactor's RecleanAtMs:
	// Kafka tombstones and markers past their delete horizon).
	RecleanMs int64
}

func (r viewRecord) encode() []byte {
	w := bin.Writer{}
	w.U8(viewRecordV3)
	w.String(r.Kind)
	w.Uvarint(r.Seq)
	w.Varint(r.Start)
	w.Varint(r.Through)
	w.Uvarint(uint64(len(r.Objects)))
	for _, t := range r.Objects {
		w.Bytes(t.encode())
	}
	w.Uvarint(uint64(len(r.Retired)))
	for _, t := range r.Retired {
		w.Bytes(t.encode())
	}
	w.Varint(r.CompactedMs)
	w.Varint(r.KeptBytes)
	w.Varint(r.SourceBytes)
	w.Varint(r.ThroughBytes)
	var flags uint8
	if r.Covers {
		flags |= viewFlagCovers
	}
	w.U8(flags)
	w.Varint(r.RecleanMs)
	return w.Seal()
}

func decodeViewRecord(b []byte) (*viewRecord, error) {
	body, err := bin.Open(b)
	if err != nil {
		return nil, fmt.Errorf("%w: view record: %w", ErrCorrupt, err)
	}
	r := bin.Reader{B: body}
	version := r.U8()
	if version < viewRecordV1 || version > viewRecordV3 {
		return nil, fmt.Errorf("%w: view record version %d", ErrCorrupt, version)
	}
	out := &viewRecord{Kind: r.String(), Seq: r.Uvarint(), Start: r.Varint(), Through: r.Varint()}
	bad := false
	targets := func() []genTarget {
		n := r.Len(1 << 20)
		var ts []genTarget
		for i := 0; i < n && r.Err() == nil; i++ {
			t, err := decodeGenTarget(r.Bytes())
			if err != nil {
				bad = true
				return nil
			}
			ts = append(ts, t)
		}
		return ts
	}
	out.Objects = targets()
	out.Retired = targets()
	out.CompactedMs, out.KeptBytes, out.SourceBytes, out.ThroughBytes = r.Varint(), r.Varint(), r.Varint(), r.Varint()
	if version >= viewRecordV2 {
		out.Covers = r.U8()&viewFlagCovers != 0
	}
	if version >= viewRecordV3 {
		out.RecleanMs = r.Varint()
	}
	if err := r.Done(); err != nil || bad {
		return nil, fmt.Errorf("%w: view record", ErrCorrupt)
	}
	next := out.Start
	for _, t := range out.Objects {
		if t.Start != next {
			return nil, fmt.Errorf("%w: view record objects do not tile [%d, %d)", ErrCorrupt, out.Start, out.Through)
		}
		next = t.End
	}
	if next != out.Through || out.Through < out.Start {
		return nil, fmt.Errorf("%w: view record objects do not tile [%d, %d)", ErrCorrupt, out.Start, out.Through)
	}
	return out, nil
}

// ViewInfo describes the published view of one kind of a stream.
type ViewInfo struct {
	Kind string
	// Exists is false when no view was ever published.
	Exists bool
	// Seq counts publications.
	Seq uint64
	// Start and Through bound the offsets ReadView serves from the view
	// (the "cleaned point" is Through).
	Start, Through int64
	Objects        int
	// Bytes is the view's payload bytes (gaps are free).
	Bytes int64
	// ThroughBytes is the stream's committed payload before Through
	// (approximate: whole committed runs); CommittedBytes - ThroughBytes
	// estimates what is not compacted yet.
	ThroughBytes int64
	CompactedAt  time.Time
	// Covers is true once the view replaces the lossless log below
	// Through: the stream's lossless start may then be above Start, and
	// readers of the view see [Start, end).
	Covers bool
	// RecleanAt (zero: never) is when a pass over the view alone, with no
	// new data, would drop something: a policy runs one then.
	RecleanAt time.Time
}

func (r *viewRecord) info() ViewInfo {
	if r == nil {
		return ViewInfo{}
	}
	vi := ViewInfo{Kind: r.Kind, Exists: true, Seq: r.Seq, Start: r.Start, Through: r.Through,
		Objects: len(r.Objects), Bytes: r.KeptBytes, ThroughBytes: r.ThroughBytes, Covers: r.Covers}
	if r.CompactedMs > 0 {
		vi.CompactedAt = time.UnixMilli(r.CompactedMs)
	}
	if r.RecleanMs > 0 {
		vi.RecleanAt = time.UnixMilli(r.RecleanMs)
	}
	return vi
}

// viewCacheTTL bounds how stale a reader's copy of a view record may be. A
// stale copy is still correct (the objects it names outlive their
// replacement by the GC grace period, and a read that finds one gone
// re-reads the record); it only serves an older cleaned point.
const viewCacheTTL = time.Second

type viewCacheKey struct {
	id   ID
	kind string
}

type viewCached struct {
	rec *viewRecord // nil: no view
	at  time.Time
	// start is a stream start read before the record was: the copy is
	// known current for any start <= it (a stream is trimmed past a view's
	// start only after a covering record is published), or
	// math.MinInt64 when no start was read first.
	start int64
}

type viewState struct {
	mu       sync.Mutex
	cache    map[viewCacheKey]viewCached
	policies []viewPolicyEntry
	running  map[viewCacheKey]bool
}

func (v *viewState) put(k viewCacheKey, rec *viewRecord, at time.Time, start int64) {
	v.mu.Lock()
	if v.cache == nil {
		v.cache = map[viewCacheKey]viewCached{}
	}
	if len(v.cache) > 1<<16 {
		clear(v.cache) // bounded: a reader of very many views just re-reads
	}
	v.cache[k] = viewCached{rec: rec, at: at, start: start}
	v.mu.Unlock()
}

// loadView reads the view record (version NotExists when there is none).
// start is a stream start read before (math.MinInt64 if none).
func (c *Core) loadView(ctx context.Context, id ID, kind string, start int64) (*viewRecord, metadata.Version, error) {
	rec, err := c.meta.Get(ctx, viewKey(id, kind))
	if errors.Is(err, metadata.ErrKeyNotFound) {
		c.views.put(viewCacheKey{id, kind}, nil, c.rt.now(), start)
		return nil, metadata.NotExists, nil
	}
	if err != nil {
		return nil, 0, err
	}
	v, err := decodeViewRecord(rec.Value)
	if err != nil {
		return nil, 0, err
	}
	c.views.put(viewCacheKey{id, kind}, v, c.rt.now(), start)
	return v, rec.Version, nil
}

// cachedView returns the view record for a reader that saw the stream
// start at start, from the cache when fresh enough: younger than the TTL
// and either covering (its start never moves) or loaded after a start at
// least this one (so no reclaiming trim can have passed it unseen).
func (c *Core) cachedView(ctx context.Context, id ID, kind string, start int64, fresh bool) (*viewRecord, error) {
	k := viewCacheKey{id, kind}
	if !fresh {
		c.views.mu.Lock()
		e, ok := c.views.cache[k]
		c.views.mu.Unlock()
		if ok && c.rt.now().Sub(e.at) < viewCacheTTL && (e.rec != nil && e.rec.Covers || start <= e.start) {
			return e.rec, nil
		}
	}
	v, _, err := c.loadView(ctx, id, kind, start)
	return v, err
}

// floorOf is the lowest offset a view reader sees: the stream's start, or
// the view's own start once the view covers the reclaimed prefix.
func floorOf(v *viewRecord, start int64) int64 {
	if v != nil && v.Covers {
		return min(v.Start, start)
	}
	return start
}

// ViewBounds returns the offsets a ReadView reader of kind sees: [start,
// end), where start is the view's start once the view covers the
// stream's reclaimed prefix, else the stream's start.
func (c *Core) ViewBounds(ctx context.Context, id ID, kind string) (start, end int64, err error) {
	if err := validViewKind(kind); err != nil {
		return 0, 0, err
	}
	h, _, err := c.readHeadView(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	v, err := c.cachedView(ctx, id, kind, h.Start, false)
	if err != nil {
		return 0, 0, err
	}
	return floorOf(v, h.Start), h.End, nil
}

// DescribeView returns the published view of kind of stream id.
func (c *Core) DescribeView(ctx context.Context, id ID, kind string) (ViewInfo, error) {
	if err := validViewKind(kind); err != nil {
		return ViewInfo{}, err
	}
	v, _, err := c.loadView(ctx, id, kind, math.MinInt64)
	if err != nil {
		return ViewInfo{}, err
	}
	vi := v.info()
	vi.Kind = kind
	return vi, nil
}

// ReadView reads stream id through its view of kind: below the view's
// Through from the view (dropped offsets are skipped: an entry's Offset may
// be past from, and entries are never returned below the reader's floor),
// at and above it exactly as Read. Without a published view it is Read.
// The result's bounds are the stream's, except that a covering view's
// start is the result's StartOffset (the lossless prefix below the
// stream's start was reclaimed; the view is what remains of it).
func (c *Core) ReadView(ctx context.Context, id ID, kind string, from int64, opts ReadOptions) (ReadResult, error) {
	if err := validViewKind(kind); err != nil {
		return ReadResult{}, err
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = defaultReadBytes
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = defaultReadEntries
	}
	for attempt := 0; ; attempt++ {
		h, _, err := c.readHeadView(ctx, id)
		if err != nil {
			return ReadResult{}, err
		}
		v, err := c.cachedView(ctx, id, kind, h.Start, attempt > 0)
		if err != nil {
			return ReadResult{}, err
		}
		floor := floorOf(v, h.Start)
		if v != nil && v.Covers && from >= v.Through && from < h.Start && attempt < maxSourceMoves {
			continue // a newer view covers more than our copy: re-read it
		}
		if v == nil || from >= v.Through || from < floor || c.gens == nil {
			res, err := c.Read(ctx, id, from, opts)
			if errors.Is(err, ErrOffsetOutOfRange) && from < res.StartOffset && from >= floor && attempt < maxSourceMoves {
				// Trimmed since our head read: by a covering view we have
				// not seen yet, maybe.
				continue
			}
			res.StartOffset = min(res.StartOffset, floor)
			return res, err
		}
		res, err := c.readViewOnce(ctx, v, h, floor, from, opts)
		if errors.Is(err, errSourceMoved) && attempt < maxSourceMoves {
			c.metrics.readRetries.Add(1)
			continue
		}
		if errors.Is(err, errSourceMoved) {
			err = c.sourceMovedTooOften(id, from, err)
		}
		if err != nil || len(res.Entries) > 0 {
			return res, err
		}
		// Nothing left in the view from `from`: the rest is lossless.
		at := max(res.Next, h.Start)
		res, err = c.Read(ctx, id, at, opts)
		if errors.Is(err, ErrOffsetOutOfRange) && at < res.StartOffset && attempt < maxSourceMoves {
			continue // trimmed meanwhile past our copy's cleaned point
		}
		res.StartOffset = min(res.StartOffset, floor)
		return res, err
	}
}

// readViewOnce serves [from, v.Through) from view v of the stream whose
// head is h; floor is the lowest offset the reader may see.
func (c *Core) readViewOnce(ctx context.Context, v *viewRecord, h *head, floor, from int64, opts ReadOptions) (ReadResult, error) {
	res := ReadResult{StartOffset: floor, EndOffset: h.End, Next: from}
	if from < floor || from > h.End {
		return res, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, from, floor, h.End)
	}
	next, size := from, 0
	for _, o := range v.Objects {
		if o.End <= next {
			continue
		}
		for next < o.End {
			es, err := c.gens.r.Read(ctx, o.Key, o.Info, max(next, o.Start), max(opts.MaxBytes-size, 1))
			switch {
			case errors.Is(err, generation.ErrNotFound):
				return res, fmt.Errorf("%w: view object %s: %w", errSourceMoved, o.Key, err)
			case errors.Is(err, generation.ErrCorrupt):
				return res, fmt.Errorf("%w: view object %s: %w", ErrCorrupt, o.Key, err)
			case err != nil:
				return res, err
			}
			if len(es) == 0 {
				return res, fmt.Errorf("nereus/stream: no progress reading view object %s at %d", o.Key, next)
			}
			for _, e := range es {
				end := e.Offset + int64(e.RecordCount)
				if end <= next {
					continue
				}
				if len(e.Payload) > 0 && end > floor {
					if len(res.Entries) > 0 && (size+len(e.Payload) > opts.MaxBytes || len(res.Entries) >= opts.MaxEntries) {
						return res, nil
					}
					res.Entries = append(res.Entries, ReadEntry{Offset: e.Offset, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: e.Payload})
					size += len(e.Payload)
				}
				next = end
				res.Next = end
			}
			if len(res.Entries) >= opts.MaxEntries || size >= opts.MaxBytes {
				return res, nil
			}
		}
	}
	c.metrics.reads.Add(1)
	return res, nil
}

// retireViewObjects journals the Retired objects of record rec (version
// ver) and then drops them from the record by CAS. A failure leaves them in
// the record for the next pass.
func (c *Core) retireViewObjects(ctx context.Context, id ID, rec *viewRecord, ver metadata.Version, reason string) error {
	if rec == nil || len(rec.Retired) == 0 {
		return nil
	}
	for _, t := range rec.Retired {
		if err := c.journalViewObject(ctx, id, t, reason); err != nil {
			return err
		}
	}
	if c.cfg.Lifecycle.GCDryRun {
		return nil
	}
	next := *rec
	next.Retired = nil
	_, err := c.meta.Put(ctx, viewKey(id, rec.Kind), next.encode(), ver)
	if err != nil && metadata.Classify(err) != metadata.Conflict {
		return err // unknown or failed: journaling again is harmless
	}
	return nil
}

// journalViewObject writes t's retire-journal entry; drainJournal deletes
// the object after the grace period. Views are not offset protections'
// business (End is the lowest offset): a read that finds a retired object
// gone re-reads the view record.
func (c *Core) journalViewObject(ctx context.Context, id ID, t genTarget, reason string) error {
	if c.cfg.Lifecycle.GCDryRun {
		c.audit("view", t.Key, t.Size, reason)
		return nil
	}
	rr := retireRecord{ObjectKey: t.Key, End: math.MinInt64, Bytes: t.Size, SinceMs: c.nowMs()}
	c.gcTouchJournal(id)
	_, err := c.meta.Put(ctx, retireKey(id, t.Key), rr.encode(), metadata.NotExists)
	c.gcTouchJournal(id)
	if err != nil && metadata.Classify(err) != metadata.Conflict {
		return err
	}
	return nil
}

// retireViews journals every object of every view of a deleted stream (and
// any object under its view prefix: orphans of crashed passes), then
// deletes the view records. Called by the deleted-stream collector.
func (c *Core) retireViews(ctx context.Context, id ID, reason string) error {
	if c.cfg.ObjectStore == nil {
		return nil
	}
	for info, err := range c.cfg.ObjectStore.List(ctx, viewObjectPrefix(id)) {
		if err != nil {
			return err
		}
		if err := c.journalViewObject(ctx, id, genTarget{Key: info.Key, Info: generation.Info{Size: info.Size}}, reason); err != nil {
			return err
		}
	}
	_, err := c.deleteIndexRange(ctx, viewPrefix(id), viewPrefix(id)+"\xff", reason)
	return err
}

// Views is what a Storage offers when it keeps lossy read views (the Core
// does). Protocol adapters type-assert their Storage for it.
type Views interface {
	ReadView(ctx context.Context, id ID, kind string, from int64, opts ReadOptions) (ReadResult, error)
	DescribeView(ctx context.Context, id ID, kind string) (ViewInfo, error)
	ViewBounds(ctx context.Context, id ID, kind string) (start, end int64, err error)
	Compact(ctx context.Context, id ID, kind string, upTo int64, cmp Compactor) (CompactionStats, error)
	RegisterCompactionPolicy(kind string, match func(Info) bool, p CompactionPolicy)
}

var _ Views = (*Core)(nil)
