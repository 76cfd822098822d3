package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/stream/generation"
)

// Merging lossless generations.
//
// A slow stream's generations are as small as GenerationMaxAge makes them:
// many tiny objects, one GET each for a catch-up read. A merge rewrites a
// window of adjacent small indexed generations [a, b) into one generation
// with the same exact entries at the same offsets, and switches reads to it
// without changing any offset:
//
//  1. the window is chosen from the generation index (planMerge: each
//     source smaller than GenerationBytes/2, contiguous, at most
//     GenerationBytes together; merged once half a generation's worth, or
//     mergeFanIn sources, or closed off by a larger one);
//  2. the task takes a slot, then the stream's merge claim (merge_claim.go:
//     one merge of a stream at a time across processes; a stale claim is
//     taken over only after its holder's publication was fenced or
//     finished), and checks under the claim that its sources are unchanged
//     (a plan made before another merge published is refused). It takes a
//     durable lease from a (the sources may be read while another broker's
//     GC looks at them), and reserves a generation number of its own by
//     head CAS (NextGen = n+1 for the n it read; a lost outcome wastes a
//     number). A number below NextGen is what lets the orphan sweep collect
//     the object of a merge that never published;
//  3. it reads the sources, builds and PUTs the object create-only (as
//     materialization does: an unknown PUT is proven by content);
//  4. it journals the last source (once its record is replaced nothing
//     names it), then publishes by a version-conditional write of the last
//     source's record (key b) to the merged descriptor — the switch point.
//     Applied or not is proven by re-reading that record: it names the
//     merged object (published) or another version (not, and never will:
//     the condition can no longer hold). While the record still holds the
//     source's version after a lost response, the outcome stays unknown:
//     the claim is kept (whoever takes it over fences the write) and the
//     object is kept for the orphan sweep to judge — which it does only
//     once the claim is released or, stale, fenced (standingMergeClaim);
//  5. the other sources are journaled and their records deleted, and the
//     claim is released. GC retires journaled objects after the grace
//     period once no protection needs them, and never while a record names
//     them (a merge that journaled its last source and did not publish
//     leaves it named: the journal entry is dropped).
//
// A crash after 4 leaves records that a later record covers and the claim:
// whoever takes the claim over retires them, and so does every GC pass
// (retireSuperseded, also for merges of versions without claims). A crash
// before 4 leaves an unnamed object numbered below NextGen: the orphan
// sweep's. Nothing is published twice: the switch is one conditional write
// on one key, and the claim keeps a second merge from planning around an
// unfinished one.

// mergeFanIn is how many small generations are merged at most (and at
// least, for a window the index has not closed off yet).
const mergeFanIn = 8

// mergeSource is one indexed generation record of a merge window.
type mergeSource struct {
	key     string
	version metadata.Version
	d       descriptor
}

// planMerge picks the first window of recs (generation records in key
// order, none below start) worth merging, as [i, j). complete says recs
// reach the end of the index (so a window at the tail may still grow).
func planMerge(recs []descriptor, start int64, cfg LifecycleConfig, complete bool) (i, j int, ok bool) {
	small := func(d descriptor) bool {
		return d.Generation > 0 && len(d.Parts) == 1 && d.Start >= start && d.Bytes < cfg.GenerationBytes/2
	}
	for i = 0; i < len(recs); i++ {
		if !small(recs[i]) {
			continue
		}
		total := recs[i].Bytes
		j = i + 1
		for j < len(recs) && j-i < mergeFanIn && small(recs[j]) && recs[j].Start == recs[j-1].End &&
			total+recs[j].Bytes <= cfg.GenerationBytes {
			total += recs[j].Bytes
			j++
		}
		closed := j < len(recs) || !complete
		if j-i >= 2 && (total >= cfg.GenerationBytes/2 || j-i >= mergeFanIn || closed) {
			return i, j, true
		}
		i = j - 1
	}
	return 0, 0, false
}

// mergeInputsOf is what considerMerges' decision for h depends on besides
// the generation records (gc_memo.go).
func (c *Core) mergeInputsOf(h *head) mergeInputs {
	in := mergeInputs{start: h.Start, genIndexed: h.GenIndexedThrough}
	if m := c.mat; m != nil {
		m.mu.Lock()
		in.cursor = m.mergeCursor[h.ID]
		m.mu.Unlock()
	}
	return in
}

// considerMerges retires superseded generation records of h (a merge that
// published but did not finish; the claim's next holder retires them too)
// and starts a merge task when a window is due. Called by the GC pass for
// every live stream this process owns. quiet reports that it scanned
// everything above the merge cursor and found nothing to do (and left the
// cursor where it was), so later passes may skip it while its inputs stay
// the same (gc_memo.go).
func (c *Core) considerMerges(ctx context.Context, h *head) (quiet bool, err error) {
	if c.gens == nil || c.mat == nil || h.State != StateActive && h.State != StateSealed || h.GenIndexedThrough <= h.Start {
		return true, nil
	}
	m := c.mat
	m.mu.Lock()
	cursor := max(m.mergeCursor[h.ID], h.Start)
	m.mu.Unlock()
	const limit = 256
	recs, err := c.meta.RangeScan(ctx, genKey(h.ID, cursor+1), genKey(h.ID, h.GenIndexedThrough+1), limit)
	if err != nil || len(recs) == 0 {
		return err == nil, err
	}
	srcs := make([]mergeSource, 0, len(recs))
	for _, r := range recs {
		d, err := decodeIndexRecord(r.Value)
		if err != nil {
			return false, fmt.Errorf("generation record %s: %w", r.Key, err)
		}
		srcs = append(srcs, mergeSource{key: r.Key, version: r.Version, d: d})
	}
	// Superseded: a later record (higher end) that starts at or before a
	// record's start serves all of it.
	live := srcs[:0:0]
	minStart := int64(1<<63 - 1)
	superseded := make([]bool, len(srcs))
	for k := len(srcs) - 1; k >= 0; k-- {
		superseded[k] = minStart <= srcs[k].d.Start
		minStart = min(minStart, srcs[k].d.Start)
	}
	retired := false
	for k, s := range srcs {
		if !superseded[k] {
			live = append(live, s)
		}
	}
	// Highest first, as mergeGenerations retires its sources.
	for k := len(srcs) - 1; k >= 0; k-- {
		if !superseded[k] {
			continue
		}
		if err := c.retireGenRecord(ctx, h.ID, srcs[k], "superseded by a merged generation"); err != nil {
			return false, err
		}
		retired = true
	}
	quiet = !retired && len(recs) < limit
	// A dry run deletes nothing, so it would never retire the sources of a
	// merge: no merges then.
	if c.cfg.Lifecycle.DisableMerge || c.cfg.Lifecycle.GCDryRun || len(live) < 2 {
		return quiet, nil
	}
	ds := make([]descriptor, len(live))
	for k, s := range live {
		ds[k] = s.d
	}
	i, j, ok := planMerge(ds, h.Start, c.cfg.Lifecycle, len(recs) < limit)
	if !ok {
		// Everything before the last large record is settled: windows
		// form only after it.
		next := cursor
		for _, d := range ds {
			if d.Bytes >= c.cfg.Lifecycle.GenerationBytes/2 {
				next = d.End
			}
		}
		if len(recs) == limit {
			next = max(next, ds[len(ds)-1].End)
		}
		m.mu.Lock()
		moved := m.mergeCursor[h.ID] != next
		m.mergeCursor[h.ID] = next
		m.mu.Unlock()
		return quiet && !moved, nil
	}
	m.startMerge(h, append([]mergeSource(nil), live[i:j]...))
	return false, nil
}

// retireGenRecord journals s's object and then deletes its record.
func (c *Core) retireGenRecord(ctx context.Context, id ID, s mergeSource, reason string) error {
	if err := c.journalGeneration(ctx, id, s.d, reason); err != nil {
		return err
	}
	if c.cfg.Lifecycle.GCDryRun {
		return nil
	}
	if err := c.meta.Delete(ctx, s.key, s.version); err != nil && !errors.Is(err, metadata.ErrKeyNotFound) &&
		metadata.Classify(err) != metadata.Conflict {
		return err
	}
	c.lc.gcRecords.Add(1)
	return nil
}

// startMerge runs a merge of srcs in the background, unless a
// materialization or merge task of the stream is running.
func (m *materializer) startMerge(h *head, srcs []mergeSource) {
	m.mu.Lock()
	if m.running[h.ID] {
		m.mu.Unlock()
		return
	}
	m.running[h.ID] = true
	m.mu.Unlock()
	if !m.c.goBackground(func() {
		ctx := m.c.ctx
		// A closing core's ctx ends first: with the pool free too, a
		// select would pick at random, which a simulated run cannot
		// replay (a fixed choice is one the select could make).
		if ctx.Err() != nil {
			m.done(h.ID)
			return
		}
		select {
		case m.sem <- struct{}{}:
		case <-ctx.Done():
			m.done(h.ID)
			return
		}
		tctx, cancel := m.c.rt.withTimeout(ctx, taskTimeout(m.c.cfg.Lifecycle))
		err := m.c.mergeGenerations(tctx, h.ID, srcs)
		cancel()
		<-m.sem
		m.c.gcMergeTaskEnded(h.ID)
		m.done(h.ID)
		if err != nil && ctx.Err() == nil && !errors.Is(err, ErrStreamNotFound) {
			m.c.lc.mergeFailures.Add(1)
			m.c.log.Warn("generation merge failed", "stream", h.ID, "name", h.Name, "err", err)
		}
	}) {
		m.mu.Lock()
		delete(m.running, h.ID)
		m.mu.Unlock()
	}
}

// mergeGenerations merges the contiguous generations srcs into one (see the
// comment at the top of this file).
func (c *Core) mergeGenerations(ctx context.Context, id ID, srcs []mergeSource) error {
	began := c.rt.now()
	a, b := srcs[0].d.Start, srcs[len(srcs)-1].d.End
	last := srcs[len(srcs)-1]
	sl := c.slots.acquire(id, a)
	defer c.slots.release(sl)
	h, _, err := c.readHeadView(ctx, id)
	if err != nil {
		return err
	}
	if a < h.Start || b > h.GenIndexedThrough {
		return nil // trimmed or not indexed any more: plan again
	}
	// One merge of a stream at a time, across processes (merge_claim.go).
	hc, err := c.claimMerge(ctx, id, srcs)
	if err != nil || hc == nil {
		return err
	}
	// The claim is released once the outcome is settled; an unknown
	// publication or an unfinished retirement keeps it for whoever takes
	// it over to settle.
	release := true
	defer func() {
		if release {
			rctx, cancel := c.rt.withTimeout(context.WithoutCancel(ctx), unknownBackoff*50)
			c.releaseMergeClaim(rctx, id, hc)
			cancel()
		}
	}()
	if ok, err := c.mergeSourcesUnchanged(ctx, id, srcs); err != nil || !ok {
		if err == nil {
			c.log.Debug("merge plan went stale before its claim", "stream", id, "start", a, "end", b)
		}
		return err
	}
	// The task reads generations only: WAL runs below GenThrough are not
	// its to keep.
	c.slots.setGen(sl, h.GenThrough)
	lease, err := c.leases.ensure(ctx, id, "merge", a, h.GenThrough)
	if err != nil {
		return err
	}
	c.leases.hold(lease)
	defer c.leases.unhold(lease)
	// Each attempt reserves a number of its own (an attempt whose outcome
	// was lost wastes one), so no other task ever builds the same number.
	var gen uint64
	if _, err := c.mutate(ctx, id, func(h *head) (bool, error) {
		if h.State != StateActive && h.State != StateSealed {
			return false, fmt.Errorf("%w: %v", ErrStreamNotFound, id)
		}
		gen = max(h.NextGen, 1)
		h.NextGen = gen + 1
		return true, nil
	}); err != nil {
		return err
	}

	var sum int64
	for _, s := range srcs {
		sum += s.d.Bytes
	}
	var lin []lineage
	bld := generation.NewBuilder(uint64(id), gen, a, generation.BuilderOptions{Capacity: presizeFor(sum)})
	for _, s := range srcs {
		lin = appendLineage(lin, s.d)
		for next := s.d.Start; next < s.d.End; {
			entries, err := c.gens.Read(ctx, s.d.Parts[0].Target, s.d.Start, next, 8<<20)
			if err != nil {
				return fmt.Errorf("reading generation [%d, %d): %w", s.d.Start, s.d.End, err)
			}
			progressed := false
			for _, e := range entries {
				if e.Offset+int64(e.RecordCount) <= next {
					continue
				}
				if e.Offset != next {
					return fmt.Errorf("%w: entry at %d of %v, expected %d", ErrCorrupt, e.Offset, id, next)
				}
				if err := bld.Add(generation.Entry{Offset: e.Offset, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: e.Payload}); err != nil {
					return err
				}
				next, progressed = e.Offset+int64(e.RecordCount), true
			}
			if !progressed {
				return fmt.Errorf("nereus/stream: no progress merging offset %d of %v", next, id)
			}
		}
	}
	obj, info, err := bld.Finish()
	if err != nil {
		return err
	}
	if info.End != b || info.Bytes != sum {
		return fmt.Errorf("%w: merged generation [%d, %d) of %v holds %d bytes to %d, the sources %d to %d", ErrCorrupt, a, b, id, info.Bytes, info.End, sum, b)
	}
	key := genObjectKey(id, gen, a, b, c.rt.random())
	if err := c.putGeneration(ctx, key, obj, info); err != nil {
		c.markOrphanSweep(id)
		return err
	}
	md := genDescriptor(genTarget{Key: key, Info: info}, last.d.CumBytes, lin)
	// Journal the last source before its record is replaced.
	if err := c.journalGeneration(ctx, id, last.d, "superseded by a merged generation"); err != nil {
		c.markOrphanSweep(id)
		return err
	}
	published, err := c.publishMerge(ctx, last, md)
	if !published {
		if err != nil {
			// Unknown: keep the claim (whoever takes it over fences the
			// publication or finishes it), the object (the orphan sweep
			// judges it from the record later) and the journal entry
			// (dropped by GC while the record still names the source).
			release = false
			c.markOrphanSweep(id)
			return err
		}
		// Definitely not published: the object is garbage. The last
		// source's journal entry stays: GC drops it while the record still
		// names the source, and deletes the source if retention retired
		// it meanwhile (the same journal key).
		if derr := c.cfg.ObjectStore.Delete(context.WithoutCancel(ctx), key, nil); derr != nil && !errors.Is(derr, objectstore.ErrNotFound) {
			c.markOrphanSweep(id)
		}
		c.log.Debug("merge went stale before publication", "stream", id, "start", a, "end", b)
		return nil
	}
	c.lc.merges.Add(1)
	c.lc.mergedSources.Add(int64(len(srcs)))
	c.lc.mergedBytes.Add(sum)
	// Highest first: what is left at any moment is a prefix of the window
	// that tiles it from a, followed by the merged record, so a read (which
	// walks the records in key order, i.e. by end offset) never meets a
	// record that starts past its offset before the one covering it. In
	// ascending order a read at a met the remaining [x, y) first and
	// failed "index gap" (TestGCNeverDeletesNeededBytes, before claims too).
	for k := len(srcs) - 2; k >= 0; k-- {
		s := srcs[k]
		if err := c.retireMergedSource(ctx, id, s); err != nil {
			// Unfinished: the claim stays, so no other merge plans around
			// the rest; whoever takes it over retires them.
			release = false
			return err
		}
	}
	c.lc.mergeNanos.Add(int64(c.rt.now().Sub(began)))
	c.log.Debug("generations merged", "stream", id, "generation", gen, "start", a, "end", b, "sources", len(srcs), "bytes", info.Size)
	return nil
}

// publishMerge replaces the last source's record by the merged descriptor
// if it still holds the version the merge was planned from. It reports
// whether the merged record is published; err != nil with false means the
// outcome is unknown.
func (c *Core) publishMerge(ctx context.Context, last mergeSource, md descriptor) (bool, error) {
	val := md.encodeIndexRecord()
	_, err := c.meta.Put(ctx, last.key, val, last.version)
	switch metadata.Classify(err) {
	case metadata.Applied:
		return true, nil
	case metadata.NotApplied:
		return false, nil
	}
	for attempt := 0; attempt < 5; attempt++ {
		rec, gerr := c.meta.Get(ctx, last.key)
		switch {
		case gerr == nil && bytes.Equal(rec.Value, val):
			return true, nil // ours (a lost response, or the conflict was our own earlier write)
		case gerr == nil && rec.Version != last.version, errors.Is(gerr, metadata.ErrKeyNotFound):
			// The record moved on: the condition can never hold again.
			return false, nil
		case gerr == nil:
			// Still the source's version after a lost response: the write
			// may yet apply. Unknown.
			return false, fmt.Errorf("%w: merge publication at %s", ErrCommitUnknown, last.key)
		}
		if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
			break
		}
	}
	return false, fmt.Errorf("%w: merge publication at %s: %w", ErrCommitUnknown, last.key, err)
}
