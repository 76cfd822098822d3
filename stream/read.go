package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/generation"
	"github.com/nereusstream/nereus-go/stream/provider"
)

const (
	defaultReadBytes   = 1 << 20
	defaultReadEntries = 1000
)

// Read implements Storage. Only committed entries are ever returned: the
// bounds come from a committed head (the owner's, or the store's), and
// every run read is located through that head's Pending lists or the
// offset and generation indexes, which only ever name committed ranges.
//
// The read holds a protection slot (protect.go) from before it reads the
// head until its bytes are in memory, so GC never deletes a source it may
// use. If a source it resolved was retired meanwhile (a newer head serves
// the range from a generation, or trimmed it), the read resolves again
// from a fresh head.
func (c *Core) Read(ctx context.Context, id ID, from int64, opts ReadOptions) (ReadResult, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = defaultReadBytes
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = defaultReadEntries
	}
	var deadline <-chan time.Time
	if opts.Wait > 0 {
		t := time.NewTimer(opts.Wait)
		defer t.Stop()
		deadline = t.C
	}
	moved := 0
	for {
		// Take the change channel before the head so a commit between the
		// two cannot be missed.
		_, changed, err := c.Notify(ctx, id)
		if err != nil {
			return ReadResult{}, err
		}
		sl := c.slots.acquire(id, from)
		res, err := c.readOnce(ctx, id, from, opts, sl, moved > 0)
		c.slots.release(sl)
		if errors.Is(err, errSourceMoved) && moved < maxSourceMoves {
			moved++
			c.metrics.readRetries.Add(1)
			continue
		}
		if errors.Is(err, errSourceMoved) {
			err = c.sourceMovedTooOften(id, from, err)
		}
		if err != nil || len(res.Entries) > 0 || from < res.EndOffset || deadline == nil {
			return res, err
		}
		select {
		case <-changed:
		case <-deadline:
			return res, nil
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}

// errSourceMoved: a physical source the read resolved is gone or no longer
// covers the offset (GC retired it after a newer head moved the range to a
// generation, or trimmed it). Resolving again from a fresh head fixes it.
var errSourceMoved = errors.New("physical source moved")

// sourceMovedTooOften is the error of a read whose sources kept moving
// past maxSourceMoves re-resolutions: retriable for clients
// (ErrStorageUnavailable: a later read resolves a fresher head, and the
// next GC pass heals a half-retired layout), and logged, since it means a
// layout the read path cannot get past right now.
func (c *Core) sourceMovedTooOften(id ID, from int64, err error) error {
	c.log.Warn("read gave up re-resolving moved sources", "stream", id, "offset", from, "err", err)
	return fmt.Errorf("nereus/stream: %v offset %d: %w: %w", id, from, ErrStorageUnavailable, err)
}

// maxSourceMoves bounds re-resolutions of one read; each needs GC to retire
// a source between the read's head read and its I/O, so more than a few in
// a row means something is broken.
const maxSourceMoves = 4

func (c *Core) readOnce(ctx context.Context, id ID, from int64, opts ReadOptions, sl *slot, fresh bool) (ReadResult, error) {
	h, _, err := c.readHeadView(ctx, id)
	if fresh && err == nil && c.owner(id) == nil {
		h, _, err = c.readHead(ctx, id) // bypass any cached view
		if err == nil && h.State == StateDeleted {
			err = fmt.Errorf("%w: %v", ErrStreamNotFound, id)
		}
	}
	if fresh && err == nil && c.owner(id) != nil {
		// An owner learns of a trim or a publication by another process
		// only at its next commit round; until then its view may route the
		// read to a source that process's GC has since retired (below the
		// new start, or below the new generation frontier). A read that
		// found its source moved therefore resolves through the stored
		// head, which is never behind the owner's committed view — bounded
		// by the owner's end, so a reader never sees the end go back
		// (the stored head may hold a commit whose response the owner
		// has not seen yet).
		if sh, _, serr := c.readHead(ctx, id); serr == nil && sh.End >= h.End &&
			(sh.Start > h.Start || sh.GenThrough > h.GenThrough) {
			sh.End = h.End
			sh.Start = min(sh.Start, sh.End)
			h = sh
		}
	}
	if err != nil {
		return ReadResult{}, err
	}
	c.slots.setGen(sl, h.GenThrough)
	res := ReadResult{StartOffset: h.Start, EndOffset: h.End, Next: from}
	if from < h.Start || from > h.End {
		return res, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, from, h.Start, h.End)
	}
	if from == h.End {
		return res, nil
	}
	if err := c.protectRemoteRead(ctx, h, from); err != nil {
		return res, err
	}
	var rb *readBuffers
	if opts.Recycle {
		rb = &readBuffers{}
	}
	entries, err := c.readEntries(ctx, h, from, opts, rb)
	if err != nil {
		rb.release()
		return res, err
	}
	res.Entries = entries
	if rb != nil && (len(rb.bufs) > 0 || cap(entries) > 0) {
		rb.out = entries
		res.recycled = rb
	}
	if n := len(entries); n > 0 {
		res.Next = entries[n-1].Offset + int64(entries[n-1].RecordCount)
	}
	c.metrics.reads.Add(1)
	return res, nil
}

func toReadEntries(in []provider.ReadEntry) []ReadEntry {
	out := make([]ReadEntry, len(in))
	for i, e := range in {
		out[i] = ReadEntry{Offset: e.Offset, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: e.Payload}
	}
	return out
}

// readEntries gathers committed entries from `from` (< h.End) within the
// read limits: from the tail cache when it covers `from`, otherwise from the
// generations and WAL runs that the head and indexes locate.
//
// With read-ahead on (LifecycleConfig.GenerationReadAheadBytes), a read
// that stops inside the generations starts fetching what the same
// reader's next read will want (generations.go, readAhead).
//
// With rb non-nil, generation spans are read into recycled buffers, which
// are added to rb (the caller releases rb when the entries are done with,
// also when readEntries fails).
func (c *Core) readEntries(ctx context.Context, h *head, from int64, opts ReadOptions, rb *readBuffers) (_ []ReadEntry, rerr error) {
	if got := c.tail.read(h.ID, from, h.End, opts.MaxBytes, opts.MaxEntries); len(got) > 0 {
		c.metrics.tailHits.Add(1)
		return toReadEntries(got), nil
	}
	var out []ReadEntry
	size := 0
	next := from
	var runs []descriptor
	if c.gens != nil && c.cfg.Lifecycle.GenerationReadAheadBytes > 0 && from < h.GenThrough {
		defer func() {
			if rerr == nil && next < h.End {
				c.gens.readAhead(ctx, runs, next, opts.MaxBytes)
			}
		}()
	}
	for next < h.End && len(out) < opts.MaxEntries && size < opts.MaxBytes {
		var err error
		runs, err = c.runsFrom(ctx, h, next, 8)
		if err != nil {
			return nil, err
		}
		if len(runs) == 0 || runs[0].Start > next {
			// The head we resolved through is older than the index (a
			// generation replaced the runs, or the range was trimmed).
			return nil, fmt.Errorf("%w: no source covers offset %d of %v", errSourceMoved, next, h.ID)
		}
		for ri, d := range runs {
			if ri+1 < len(runs) {
				c.footerAhead(ctx, runs[ri+1])
			}
			if d.Start > next {
				return nil, fmt.Errorf("%w: index gap at %d of %v (next source starts at %d)", errSourceMoved, next, h.ID, d.Start)
			}
			p, err := c.readerByName(d.Provider)
			if err != nil {
				return nil, err
			}
			for i, pt := range d.Parts {
				if d.partEnd(i) <= next {
					continue
				}
				var entries []provider.ReadEntry
				var gens []generation.Entry // a recycled generation read's, used as is (no conversion slice)
				// A generation read is told how many entries the read still
				// takes, so it fetches (and verifies) only the blocks those
				// need: with small entries the entry bound, not the byte
				// budget, ends most reads.
				g, isGen := p.(*genReader)
				switch {
				case isGen && rb != nil:
					gens, err = g.readPooled(ctx, pt.Target, next, opts.MaxBytes-size, opts.MaxEntries-len(out), opts.MaxBytes, rb)
				case isGen:
					entries, err = g.readLimit(ctx, pt.Target, next, opts.MaxBytes-size, opts.MaxEntries-len(out), opts.MaxBytes)
				default:
					entries, err = p.Read(ctx, pt.Target, pt.Start, next, opts.MaxBytes-size)
				}
				if err != nil {
					switch {
					case errors.Is(err, provider.ErrCorrupt):
						return nil, fmt.Errorf("%w: %v offset %d: %w", ErrCorrupt, h.ID, next, err)
					case errors.Is(err, provider.ErrNotFound):
						return nil, fmt.Errorf("%w: %v offset %d: %w", errSourceMoved, h.ID, next, err)
					}
					return nil, err
				}
				if d.Generation > 0 {
					c.metrics.genReads.Add(1)
				} else {
					c.metrics.walReads.Add(1)
				}
				if out == nil {
					n := outCap(len(entries)+len(gens), payloadBytes(entries, gens), opts)
					if rb != nil {
						out = rb.entries(n)
					} else {
						out = make([]ReadEntry, 0, n)
					}
				}
				if gens != nil {
					// A recycled generation read's entries, in offset order:
					// copied without the per-entry conversion below.
					var full bool
					out, size, next, full = appendGenEntries(out, gens, size, next, h.End, opts)
					if full {
						return out, nil
					}
				}
				for k := range len(entries) {
					e := entries[k]
					if e.Offset+int64(e.RecordCount) <= next || e.Offset >= h.End {
						continue
					}
					if len(out) > 0 && (size+len(e.Payload) > opts.MaxBytes || len(out) >= opts.MaxEntries) {
						return out, nil
					}
					out = append(out, ReadEntry{Offset: e.Offset, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: e.Payload})
					size += len(e.Payload)
					next = e.Offset + int64(e.RecordCount)
				}
				if next < d.partEnd(i) {
					return out, nil // the provider stopped at the byte limit
				}
				if len(out) >= opts.MaxEntries || size >= opts.MaxBytes {
					return out, nil
				}
			}
		}
	}
	return out, nil
}

// footerAhead starts loading the footer of d, the source after the one a
// read is about to use, when d is a generation object whose footer is not
// cached (generation.Reader.FooterAhead): a catch-up that crosses into it
// then finds the footer in hand instead of waiting for a small read from
// the device at the object's first read. A no-op for other sources, and
// under the deterministic simulator (the load runs in a goroutine of its
// own, as read-ahead's GETs do: only on the real runtime).
func (c *Core) footerAhead(ctx context.Context, d descriptor) {
	if c.gens == nil || d.Provider != generationProvider || len(d.Parts) != 1 {
		return
	}
	if _, real := c.cfg.runtime.(realRuntime); !real {
		return
	}
	if t, err := decodeGenTarget(d.Parts[0].Target); err == nil {
		c.gens.r.FooterAhead(ctx, t.Key, t.Info)
	}
}

// appendGenEntries appends the entries of gens (in offset order) that
// end after next and start below end to out, within the read's limits; full
// reports that a limit stopped it (the read is complete).
func appendGenEntries(out []ReadEntry, gens []generation.Entry, size int, next, end int64, opts ReadOptions) (_ []ReadEntry, _ int, _ int64, full bool) {
	k := 0
	for k < len(gens) && gens[k].Offset+int64(gens[k].RecordCount) <= next {
		k++
	}
	for ; k < len(gens); k++ {
		e := &gens[k]
		if e.Offset >= end {
			break
		}
		if len(out) > 0 && (size+len(e.Payload) > opts.MaxBytes || len(out) >= opts.MaxEntries) {
			return out, size, next, true
		}
		out = append(out, ReadEntry(*e))
		size += len(e.Payload)
		next = e.Offset + int64(e.RecordCount)
	}
	return out, size, next, false
}

// outCap sizes a read's result from its first part's entries: as many
// entries as the read's byte budget holds at their average size (within
// MaxEntries), so a catch-up read of many small entries fills one slice
// instead of growing it by doubling.
func outCap(n, size int, opts ReadOptions) int {
	if n == 0 || size == 0 {
		return min(n, opts.MaxEntries)
	}
	want := int(min(int64(opts.MaxBytes)*int64(n)/int64(size)+1, int64(opts.MaxEntries)))
	return max(min(want, opts.MaxEntries), min(n, opts.MaxEntries))
}

// payloadBytes is the payload total of a part's entries (one of the two
// is empty).
func payloadBytes(entries []provider.ReadEntry, gens []generation.Entry) int {
	size := 0
	for _, e := range entries {
		size += len(e.Payload)
	}
	for _, e := range gens {
		size += len(e.Payload)
	}
	return size
}

// runsFrom returns up to limit committed sources in offset order, the first
// being the one that contains offset `from`: published generations below
// h.GenThrough (in the generation index up to h.GenIndexedThrough, then in
// h.GenPending), then WAL runs (in the offset index up to
// h.IndexedThrough, then in h.Pending). The WAL part starts at the run
// containing max(from, GenThrough): WAL index entries wholly below
// GenThrough may already be retired.
func (c *Core) runsFrom(ctx context.Context, h *head, from int64, limit int) ([]descriptor, error) {
	var out []descriptor
	genEnd := h.GenThrough
	if from < genEnd {
		var err error
		out, err = c.scanIndex(ctx, genKey(h.ID, from+1), genKey(h.ID, h.GenIndexedThrough+1), from < h.GenIndexedThrough, limit)
		if err != nil {
			return nil, err
		}
		for _, d := range h.GenPending {
			if len(out) >= limit {
				break
			}
			if d.End > from && d.End > h.GenIndexedThrough {
				out = append(out, d)
			}
		}
		if len(out) == 0 || len(out) >= limit || out[len(out)-1].End < genEnd {
			// Nothing found means the head is older than the index: the
			// caller resolves again (errSourceMoved).
			return out, nil
		}
		from = max(from, out[len(out)-1].End)
	}
	wal, err := c.scanIndex(ctx, indexKey(h.ID, from+1), indexKey(h.ID, h.IndexedThrough+1), from < h.IndexedThrough, limit-len(out))
	if err != nil {
		return nil, err
	}
	out = append(out, wal...)
	for _, d := range h.Pending {
		if len(out) >= limit {
			break
		}
		if d.End > from && d.End > h.IndexedThrough {
			out = append(out, d)
		}
	}
	return out, nil
}

// scanIndex reads up to limit index records in [min, max) when want.
func (c *Core) scanIndex(ctx context.Context, min, max string, want bool, limit int) ([]descriptor, error) {
	if !want || limit <= 0 {
		return nil, nil
	}
	recs, err := c.meta.RangeScan(ctx, min, max, limit)
	if err != nil {
		return nil, err
	}
	return decodeIndexRecords(recs)
}

// decodeIndexRecords decodes index records (offset or generation index).
func decodeIndexRecords(recs []metadata.Record) ([]descriptor, error) {
	out := make([]descriptor, 0, len(recs))
	for _, r := range recs {
		d, err := decodeIndexRecord(r.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// runContaining returns the committed run containing offset o (< h.End).
func (c *Core) runContaining(ctx context.Context, h *head, o int64) (descriptor, error) {
	runs, err := c.runsFrom(ctx, h, o, 1)
	if err != nil {
		return descriptor{}, err
	}
	if len(runs) == 0 || runs[0].Start > o {
		return descriptor{}, fmt.Errorf("nereus/stream: no committed run covers offset %d of %v", o, h.ID)
	}
	return runs[0], nil
}

// bytesBefore is the cumulative payload size before the run containing to.
func (c *Core) bytesBefore(ctx context.Context, h *head, to int64) (int64, error) {
	if to >= h.End {
		return h.CommittedBytes, nil
	}
	d, err := c.runContaining(ctx, h, to)
	if err != nil {
		return 0, err
	}
	return d.CumBytes - d.Bytes, nil
}

// Notify implements Storage.
func (c *Core) Notify(ctx context.Context, id ID) (int64, <-chan struct{}, error) {
	if o := c.owner(id); o != nil {
		end, ch := o.notifyState()
		return end, ch, nil
	}
	ch, err := c.watch.channel(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	h, _, err := c.readHeadView(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	return h.End, ch, nil
}

// OffsetForTimestamp implements Storage: it walks committed runs from the
// start offset to the first whose maximum timestamp reaches ts, then finds
// the first such entry inside it.
func (c *Core) OffsetForTimestamp(ctx context.Context, id ID, ts int64) (int64, error) {
	h, _, err := c.readHeadView(ctx, id)
	if err != nil {
		return 0, err
	}
	next := h.Start
	for next < h.End {
		runs, err := c.runsFrom(ctx, h, next, 256)
		if err != nil {
			return 0, err
		}
		if len(runs) == 0 {
			break
		}
		for _, d := range runs {
			if d.MaxTS >= ts {
				entries, err := c.readEntries(ctx, h, max(d.Start, next), ReadOptions{MaxBytes: 1 << 30, MaxEntries: int(d.Entries) + 1}, nil)
				if err != nil {
					return 0, err
				}
				for _, e := range entries {
					if e.Timestamp >= ts {
						return max(e.Offset, h.Start), nil
					}
				}
			}
			next = d.End
		}
	}
	return h.End, nil
}
