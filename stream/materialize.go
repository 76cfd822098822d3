package stream

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/stream/generation"
)

// Materialization builds generations from committed WAL ranges and
// publishes them (see generations.go for the model).
//
// A task for stream S, run only where S is owned and one at a time per
// stream:
//
//  1. takes a durable protection on S from the range's start (the WAL
//     runs it reads may live in another broker's log);
//  2. reads the committed range [from, end) from the WAL, from = max(Start,
//     GenThrough), cutting at an entry boundary near GenerationBytes;
//  3. builds the object and PUTs it create-only under a fresh key; an
//     unknown PUT outcome is settled by reading the object back and
//     checking its digest;
//  4. publishes by head CAS (GenPending += descriptor, GenThrough = end,
//     NextGen = gen+1) — an idempotent mutation, so an unknown outcome is
//     settled by the commit pipeline's re-read;
//  5. writes the generation-index record and drops the descriptor from
//     GenPending by a second CAS.
//
// Crash or failure at any step: before 4 applied, the object is garbage —
// deleted by the task if it knows 4 did not apply, otherwise found by the
// orphan sweep (gc.go) once older than the grace period, when no record or
// head names it; after 4, the generation is published and 5 is redone by
// the next pass from GenPending. Nothing is published twice (the CAS
// requires the range to start at or before the stream's current frontier
// and advances it past the range), and the WAL source is retired only after
// publication (gc.go). Offsets never change.

type materializer struct {
	c   *Core
	sem chan struct{}

	mu         sync.Mutex
	running    map[ID]bool
	urgent     map[ID]bool      // streams with appends waiting for a generation
	firstSeen  map[ID]time.Time // when unmaterialized data at the current frontier was first seen
	frontierAt map[ID]int64     // the frontier firstSeen refers to
	// mergeCursor: below this offset no merge window can form any more
	// (merge.go); a hint, rebuilt from the start offset after a restart.
	mergeCursor map[ID]int64
}

func newMaterializer(c *Core) *materializer {
	return &materializer{c: c, sem: make(chan struct{}, c.cfg.Lifecycle.MaterializeConcurrency),
		running: map[ID]bool{}, urgent: map[ID]bool{}, firstSeen: map[ID]time.Time{}, frontierAt: map[ID]int64{},
		mergeCursor: map[ID]int64{}}
}

// materializes reports whether profile p's streams are ever materialized.
func (c *Core) materializes(p Profile) bool {
	return c.gens != nil && p != BookKeeperWALOnly
}

// syncObject reports whether an append of profile p is acknowledged only
// once a generation covering it is published.
func syncObject(p Profile) bool { return p == BookKeeperWALSyncObject }

// urge schedules stream id's materialization now (appends wait for it).
func (m *materializer) urge(id ID) {
	m.mu.Lock()
	m.urgent[id] = true
	m.mu.Unlock()
	// Refused once Close waits for background work; appends waiting for
	// the generation then fail with their owner.
	m.c.goBackground(func() {
		h, _, err := m.c.readHeadView(m.c.ctx, id)
		if err == nil {
			m.consider(h)
		}
	})
}

// genPlan is the pure scheduling decision for one stream.
type genPlan struct {
	From       int64
	Unmat      int64 // committed payload bytes not in a generation
	Go         bool
	Why        string
	IndexOnly  bool // only GenPending needs publishing to the index
	FirstSeen  time.Time
	FrontierAt int64
}

// planGeneration decides whether to materialize h now. seen/seenAt are the
// remembered first sighting of unmaterialized data at frontier seenAt.
func planGeneration(h *head, cfg LifecycleConfig, now time.Time, urgent bool, seen time.Time, seenAt int64) genPlan {
	from := max(h.Start, h.GenThrough)
	p := genPlan{From: from, FirstSeen: seen, FrontierAt: seenAt}
	if seenAt != from || seen.IsZero() {
		p.FirstSeen, p.FrontierAt = now, from
	}
	if from >= h.End || h.State != StateActive && h.State != StateSealed {
		p.FirstSeen = time.Time{}
		p.IndexOnly = len(h.GenPending) > 0
		return p
	}
	p.Unmat = h.CommittedBytes - max(h.GenCumBytes, h.StartBytes)
	switch {
	case urgent || syncObject(h.Profile):
		p.Go, p.Why = true, "appends wait for it"
	case cfg.DisableMaterialization:
		p.Why = "materialization disabled"
	case h.Retention.Time > 0 && h.Retention.Time <= 2*cfg.GenerationMaxAge:
		// Retention frees the WAL runs sooner than a generation would.
		p.Why = "short time retention"
	case p.Unmat >= cfg.GenerationBytes:
		p.Go, p.Why = true, "size"
	case now.Sub(p.FirstSeen) >= cfg.GenerationMaxAge:
		p.Go, p.Why = true, "age"
	default:
		p.Why = "waiting for size or age"
	}
	p.IndexOnly = !p.Go && len(h.GenPending) > 0
	return p
}

// consider plans stream h and starts a task if one is due (at most one per
// stream; the pool bounds the total).
func (m *materializer) consider(h *head) genPlan {
	if !m.c.materializes(h.Profile) {
		return genPlan{}
	}
	m.mu.Lock()
	urgent := m.urgent[h.ID]
	plan := planGeneration(h, m.c.cfg.Lifecycle, m.c.rt.now(), urgent, m.firstSeen[h.ID], m.frontierAt[h.ID])
	if plan.FirstSeen.IsZero() {
		delete(m.firstSeen, h.ID)
		delete(m.frontierAt, h.ID)
	} else {
		m.firstSeen[h.ID], m.frontierAt[h.ID] = plan.FirstSeen, plan.FrontierAt
	}
	if (!plan.Go && !plan.IndexOnly) || m.running[h.ID] {
		m.mu.Unlock()
		return plan
	}
	m.running[h.ID] = true
	delete(m.urgent, h.ID)
	m.mu.Unlock()
	if !m.c.goBackground(func() {
		ctx := m.c.ctx // the task outlives the pass that planned it
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
		err := m.run(ctx, h.ID, plan.IndexOnly)
		<-m.sem
		m.done(h.ID)
		if err != nil && ctx.Err() == nil && !errors.Is(err, ErrStreamNotFound) {
			m.c.lc.materializeFailures.Add(1)
			m.c.log.Warn("materialization failed", "stream", h.ID, "name", h.Name, "err", err)
		}
	}) {
		m.mu.Lock() // Close waits for background work: the task never ran
		delete(m.running, h.ID)
		m.mu.Unlock()
	}
	return plan
}

func (m *materializer) done(id ID) {
	m.mu.Lock()
	delete(m.running, id)
	again := m.urgent[id]
	m.mu.Unlock()
	if again {
		m.urge(id)
	}
}

// run is one task: build and publish one generation (unless indexOnly),
// then move published descriptors from GenPending to the index.
func (m *materializer) run(ctx context.Context, id ID, indexOnly bool) error {
	c := m.c
	tctx, cancel := c.rt.withTimeout(ctx, taskTimeout(c.cfg.Lifecycle))
	defer cancel()
	if !indexOnly {
		if err := m.build(tctx, id); err != nil {
			return err
		}
	}
	return c.publishGenIndex(tctx, id)
}

// materializeBackpressure refuses an append to o's stream while its
// unmaterialized payload exceeds MaxMaterializeLag (see LifecycleConfig).
// It reads only the owner's in-memory head.
func (c *Core) materializeBackpressure(o *owner) error {
	bound := c.cfg.Lifecycle.MaxMaterializeLag
	if bound < 0 || c.gens == nil {
		return nil
	}
	h, _ := o.committed()
	if !c.materializes(h.Profile) || syncObject(h.Profile) || c.cfg.Lifecycle.DisableMaterialization ||
		h.Retention.Time > 0 && h.Retention.Time <= 2*c.cfg.Lifecycle.GenerationMaxAge {
		return nil
	}
	lag := h.unmaterializedBytes()
	if lag <= bound {
		return nil
	}
	c.lc.backpressured.Add(1)
	c.mat.mu.Lock()
	pending := c.mat.urgent[h.ID] || c.mat.running[h.ID]
	c.mat.mu.Unlock()
	if !pending {
		c.mat.urge(h.ID) // materialize now, whatever size or age says
	}
	return fmt.Errorf("%w: stream %v has %d bytes not yet materialized (bound %d): retry later", ErrStorageUnavailable, h.ID, lag, bound)
}

// taskTimeout bounds a task so its PUT-to-publication window stays inside
// the grace period the orphan sweep waits for.
func taskTimeout(cfg LifecycleConfig) time.Duration { return max(cfg.OrphanGrace*2/3, time.Second) }

// maxBuilderPresize bounds the buffer a materialization allocates up front
// (a larger object still grows past it).
const maxBuilderPresize = 256 << 20

// unmaterializedBytes is the committed payload not yet in a generation
// (nor trimmed).
func (h *head) unmaterializedBytes() int64 {
	return h.CommittedBytes - max(h.GenCumBytes, h.StartBytes)
}

// builderCapacity sizes a generation builder's buffer for the object about
// to be built from h: the payload it will take (the unmaterialized bytes,
// at most limit; presizeFor).
func builderCapacity(h *head, limit int64) int {
	return presizeFor(min(limit, max(h.unmaterializedBytes(), 0)))
}

// presizeFor is a generation builder's initial capacity for an object of
// payload bytes: plus 1/16 for entry headers and the block index and one
// large entry past the cut, at most maxBuilderPresize. Grown by append
// from nothing instead, a 16 MiB generation allocated ~5× its size in
// 1.25× growth steps: 40 % of all the server allocated under a 10,000
// msg/s Pulsar load, and most of its Go GC cycles
// (docs/notes/issue-15-ops.md, session 19). Entries under ~320 bytes
// outgrow the 1/16 and regrow the buffer once.
func presizeFor(payload int64) int {
	return int(min(payload+payload/16+1<<20, maxBuilderPresize))
}

// build materializes the next range of stream id and publishes it.
func (m *materializer) build(ctx context.Context, id ID) error {
	c := m.c
	start := c.rt.now()
	h, _, err := c.readHeadView(ctx, id)
	if err != nil {
		return err
	}
	from := max(h.Start, h.GenThrough)
	if from >= h.End {
		return nil
	}
	lease, err := c.leases.ensure(ctx, id, "materialize", from, from)
	if err != nil {
		return err
	}
	c.leases.hold(lease)
	defer c.leases.unhold(lease)
	sl := c.slots.acquire(id, from)
	defer c.slots.release(sl)

	limit := c.cfg.Lifecycle.GenerationBytes
	if syncObject(h.Profile) {
		limit = 1 << 62 // everything committed: appends wait for it
	}
	gen := max(h.NextGen, 1)
	b := generation.NewBuilder(uint64(id), gen, from, generation.BuilderOptions{Capacity: builderCapacity(h, limit)})
	lineageOf, cum, err := c.readForGeneration(ctx, h, from, limit, b)
	if err != nil {
		return err
	}
	if b.Entries() == 0 {
		return nil
	}
	obj, info, err := b.Finish()
	if err != nil {
		return err
	}
	key := genObjectKey(id, gen, info.Start, info.End, c.rt.random())
	if plantedBug == bugPublishBeforeDurable {
		c.rt.goFunc(func() { _ = c.putGeneration(context.WithoutCancel(ctx), key, obj, info) })
	} else if err := c.putGeneration(ctx, key, obj, info); err != nil {
		c.markOrphanSweep(id)
		return err
	}
	t := genTarget{Key: key, Info: info}
	d := genDescriptor(t, cum, lineageOf)
	// tries and refused let the failure path below tell "definitely not
	// published" (the only attempt was refused by the mutation itself)
	// from "maybe published".
	tries := 0
	var refused error
	_, err = c.mutate(ctx, id, func(h *head) (bool, error) {
		tries++
		for _, p := range h.GenPending {
			if bytes.Equal(p.Parts[0].Target, d.Parts[0].Target) {
				return false, nil // our own publication applied already
			}
		}
		if h.State != StateActive && h.State != StateSealed {
			refused = fmt.Errorf("%w: %v", ErrStreamNotFound, id)
			return false, refused
		}
		frontier := max(h.GenThrough, h.Start)
		if d.Start > frontier || d.End <= frontier || d.End > h.End || gen < h.NextGen {
			refused = fmt.Errorf("%w: generation [%d, %d) no longer extends the frontier %d", errGenerationStale, d.Start, d.End, frontier)
			return false, refused
		}
		h.GenPending = append(h.GenPending, d)
		h.GenThrough, h.GenCumBytes, h.NextGen = d.End, d.CumBytes, gen+1
		return true, nil
	})
	switch {
	case err == nil:
	case errors.Is(err, ErrCommitUnknown):
		// Maybe published: keep the object; the orphan sweep decides
		// from the head later.
		c.markOrphanSweep(id)
		return err
	case tries != 1 || refused == nil || !errors.Is(err, refused):
		// Maybe published. An attempt's CAS may have applied although its
		// caller was told otherwise: an owner that loses the stream while
		// a mutation-only CAS is unsettled reports errOwnerGone whatever
		// the outcome, and c.mutate then retries directly; an unknown
		// outcome is retried the same way. The descriptor may since have
		// left GenPending (indexed, or retired), so neither a later
		// attempt's head nor a failed read proves the object
		// unpublished. The orphan sweep decides from the head, the index
		// and the journal, after the grace period.
		c.markOrphanSweep(id)
		if errors.Is(err, errGenerationStale) {
			return nil
		}
		return err
	default:
		// Definitely not published: the object is garbage.
		if derr := c.cfg.ObjectStore.Delete(context.WithoutCancel(ctx), key, nil); derr != nil && !errors.Is(derr, objectstore.ErrNotFound) {
			c.markOrphanSweep(id)
		}
		if errors.Is(err, errGenerationStale) {
			c.log.Debug("generation went stale before publication", "stream", id, "err", err)
			return nil // a trim or another broker moved on; plan again
		}
		return err
	}
	c.lc.materialized.Add(1)
	c.lc.materializedBytes.Add(d.Bytes)
	c.lc.materializeNanos.Add(int64(c.rt.now().Sub(start)))
	c.log.Debug("generation published", "stream", id, "generation", gen, "start", d.Start, "end", d.End, "bytes", info.Size)
	return nil
}

var errGenerationStale = errors.New("nereus/stream: generation is stale")

// readForGeneration reads committed entries of h from `from` into b, whole
// source descriptors at a time, until about limit payload bytes, and
// returns the lineage of the commits they came from and the cumulative
// payload size at the end. Cutting only at descriptor ends keeps that size
// exact (it is the last descriptor's CumBytes).
func (c *Core) readForGeneration(ctx context.Context, h *head, from, limit int64, b *generation.Builder) ([]lineage, int64, error) {
	var lin []lineage
	var cum, size int64
	next := from
	for next < h.End && size < limit {
		runs, err := c.runsFrom(ctx, h, next, 8)
		if err != nil {
			return nil, 0, err
		}
		if len(runs) == 0 || runs[0].Start > next {
			return nil, 0, fmt.Errorf("%w: no source covers offset %d of %v", errSourceMoved, next, h.ID)
		}
		for _, d := range runs {
			if size >= limit || next >= h.End {
				break
			}
			if d.Start > next {
				return nil, 0, fmt.Errorf("%w: index gap at %d of %v", errSourceMoved, next, h.ID)
			}
			// Recent commits are usually still in the tail cache: take
			// them from memory instead of one ranged GET per run.
			for next < d.End {
				cached := c.tail.read(h.ID, next, d.End, 8<<20, 1<<16)
				if len(cached) == 0 || cached[0].Offset != next && cached[0].Offset+int64(cached[0].RecordCount) <= next {
					break
				}
				progressed := false
				for _, e := range cached {
					if e.Offset+int64(e.RecordCount) <= next {
						continue
					}
					if e.Offset < next && b.Entries() == 0 {
						// The stream starts inside this entry (a mid-entry
						// trim): the generation holds it whole.
						if err := b.Rebase(e.Offset); err != nil {
							return nil, 0, err
						}
						next = e.Offset
					}
					if e.Offset != next {
						break
					}
					if err := b.Add(generation.Entry{Offset: e.Offset, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: e.Payload}); err != nil {
						return nil, 0, err
					}
					next = e.Offset + int64(e.RecordCount)
					size += int64(len(e.Payload))
					progressed = true
				}
				if !progressed {
					break
				}
			}
			rd, err := c.readerByName(d.Provider)
			if err != nil {
				return nil, 0, err
			}
			for i, pt := range d.Parts {
				if d.partEnd(i) <= next {
					continue
				}
				for next < d.partEnd(i) {
					entries, err := rd.Read(ctx, pt.Target, pt.Start, next, 8<<20)
					if err != nil {
						return nil, 0, err
					}
					progressed := false
					for _, e := range entries {
						if e.Offset+int64(e.RecordCount) <= next {
							continue
						}
						if e.Offset < next && b.Entries() == 0 && e.Offset >= d.Start {
							// A mid-entry trim: start the generation at the
							// entry that holds the stream's first offset.
							if err := b.Rebase(e.Offset); err != nil {
								return nil, 0, err
							}
							next = e.Offset
						}
						if e.Offset != next {
							return nil, 0, fmt.Errorf("%w: entry at %d of %v, expected %d", ErrCorrupt, e.Offset, h.ID, next)
						}
						if err := b.Add(generation.Entry{Offset: e.Offset, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: e.Payload}); err != nil {
							return nil, 0, err
						}
						next = e.Offset + int64(e.RecordCount)
						size += int64(len(e.Payload))
						progressed = true
					}
					if !progressed {
						return nil, 0, fmt.Errorf("nereus/stream: no progress reading offset %d of %v", next, h.ID)
					}
				}
			}
			if next != d.End {
				return nil, 0, fmt.Errorf("%w: source [%d, %d) of %v ended at %d", ErrCorrupt, d.Start, d.End, h.ID, next)
			}
			lin = appendLineage(lin, d)
			cum = d.CumBytes
		}
	}
	return lin, cum, nil
}

// appendLineage adds the commits of source descriptor d.
func appendLineage(lin []lineage, d descriptor) []lineage {
	if d.Generation > 0 {
		for _, l := range d.Lineage {
			if l == lineageLost {
				if !(descriptor{Generation: 1, Lineage: lin}).lineageLost() {
					lin = append(lin, lineageLost)
				}
				continue
			}
			lin = appendLineage(lin, descriptor{Epoch: l.Epoch, Token: l.Token, FirstCommit: l.FirstCommit, Commit: l.Commit})
		}
		return lin
	}
	if n := len(lin); n > 0 {
		last := &lin[n-1]
		if last.Epoch == d.Epoch && last.Token == d.Token && last.Commit+1 >= d.FirstCommit {
			last.Commit = max(last.Commit, d.Commit)
			last.FirstCommit = min(last.FirstCommit, d.FirstCommit)
			return lin
		}
	}
	return append(lin, lineage{Epoch: d.Epoch, Token: d.Token, FirstCommit: d.FirstCommit, Commit: d.Commit})
}

// putGeneration stores obj create-only under key. An unknown outcome is
// settled by reading the object back: present with the expected digest is
// success, absent is retried, anything else is an error.
func (c *Core) putGeneration(ctx context.Context, key string, obj []byte, info generation.Info) error {
	for attempt := 0; ; attempt++ {
		_, err := c.cfg.ObjectStore.Put(ctx, key, obj, objectstore.PutOptions{Mode: objectstore.PutCreate})
		switch objectstore.Classify(err) {
		case objectstore.Applied:
			return nil
		case objectstore.NotApplied:
			if errors.Is(err, objectstore.ErrConflict) && attempt < 5 {
				if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("storing generation %s: %w", key, err)
		}
		// Conflict (it exists: an earlier attempt of ours landed) or
		// unknown: prove it by content.
		got, _, gerr := c.cfg.ObjectStore.Get(ctx, key)
		switch {
		case gerr == nil:
			vi, verr := generation.Verify(got)
			if verr == nil && vi.Digest == info.Digest && vi.Size == info.Size {
				return nil
			}
			return fmt.Errorf("%w: generation object %s does not match what was written", ErrCorrupt, key)
		case errors.Is(gerr, objectstore.ErrNotFound) && attempt < 5:
			if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("storing generation %s: outcome unknown: %w (proof: %w)", key, err, gerr)
		}
	}
}

// publishGenIndex writes the generation-index records of stream id's
// GenPending descriptors and drops them from the head.
func (c *Core) publishGenIndex(ctx context.Context, id ID) error {
	h, _, err := c.readHeadView(ctx, id)
	if err != nil || len(h.GenPending) == 0 {
		return err
	}
	through := h.GenIndexedThrough
	ops := make([]metadata.Op, 0, len(h.GenPending))
	for _, d := range h.GenPending {
		// Create-only: a record already there is an earlier attempt's or
		// covers the range already (a merge replaced it); a stale task
		// must never overwrite a newer record.
		ops = append(ops, metadata.Op{Kind: metadata.OpPut, Key: genKey(id, d.End), Value: d.encodeIndexRecord(), Expected: metadata.NotExists})
	}
	res, err := c.meta.Batch(ctx, ops)
	if err != nil {
		return err
	}
	for i, r := range res {
		if r.Err != nil && metadata.Classify(r.Err) != metadata.Conflict {
			break // later ones wait for the next pass: the prefix stays contiguous
		}
		through = h.GenPending[i].End
	}
	if through <= h.GenIndexedThrough {
		return nil
	}
	_, err = c.mutate(ctx, id, func(h *head) (bool, error) {
		if through <= h.GenIndexedThrough {
			return false, nil
		}
		kept := h.GenPending[:0]
		for _, d := range h.GenPending {
			if d.End > through {
				kept = append(kept, d)
			}
		}
		h.GenPending = kept
		h.GenIndexedThrough = through
		return true, nil
	})
	return err
}

// scheduleMaterialization plans every stream this process holds a session
// for (active streams); idle owned streams are planned by the retention
// pass, which lists them anyway.
func (c *Core) scheduleMaterialization(ctx context.Context) {
	c.mu.Lock()
	owners := make([]*owner, 0, len(c.owners))
	for _, o := range c.owners {
		owners = append(owners, o)
	}
	c.mu.Unlock()
	// In stream order, so a simulated run plans (and starts tasks) in the
	// same order every time.
	slices.SortFunc(owners, func(a, b *owner) int { return cmp.Compare(a.id, b.id) })
	var lag, oldest int64
	now := c.rt.now()
	for _, o := range owners {
		h, _ := o.committed()
		p := c.mat.consider(h)
		lag += p.Unmat
		if !p.FirstSeen.IsZero() {
			oldest = max(oldest, int64(now.Sub(p.FirstSeen)/time.Second))
		}
	}
	c.lc.lagBytes.Store(lag)
	c.lc.lagSeconds.Store(oldest)
}
