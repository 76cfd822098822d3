package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// Physical GC: what it deletes, in which order, and the proof it needs.
//
// Nothing is deleted because it was listed or because a write finished;
// every deletion follows from the committed head (Start, GenThrough, State)
// plus the protections of protect.go, and always in the order metadata
// first, then protections, then bytes:
//
//   - WAL index entries ending at or below max(Start, GenThrough) are
//     unpublished (deleted): reads below Start are refused and reads below
//     GenThrough use generations. Their runs' bytes belong to the WAL
//     providers, which ask judgeRuns about every run a segment or ledger
//     holds and delete the unit once every run is retired, no protection
//     needs it, and it has been so for the grace period (Reclaimer).
//   - A generation wholly below Start is first written to the retire
//     journal (s/r/), then its generation-index record is deleted; the
//     object is deleted from the journal once the grace period has passed
//     and no protection needs it, and the journal entry last. A crash at
//     any step leaves either a published record (still readable) or a
//     journal entry (deleted on a later pass): never a dangling reference.
//   - A deleted stream (head DELETED, queued under s/d/ by Delete) loses
//     its index records, generation records (journaled), leases and
//     objects, then its head — but only after its name record, if it still
//     names it, is gone, so the stream can never be resurrected.
//
// Every deletion is logged (the audit trail) and counted; GCDryRun reports
// instead of deleting.

// judgeRuns implements provider.Judge over the committed heads.
func (c *Core) judgeRuns(ctx context.Context, runs []provider.RunRef) ([]provider.Verdict, error) {
	type view struct {
		h          *head
		gone       bool
		prots      []protection
		protLoaded bool
	}
	views := map[ID]*view{}
	var fetch []ID
	for _, r := range runs {
		id := ID(r.Stream)
		if _, ok := views[id]; ok {
			continue
		}
		v := &view{}
		views[id] = v
		if o := c.owner(id); o != nil {
			v.h, _ = o.committed()
		} else {
			fetch = append(fetch, id)
		}
	}
	for start := 0; start < len(fetch); start += 512 {
		batch := fetch[start:min(start+512, len(fetch))]
		ops := make([]metadata.Op, len(batch))
		for i, id := range batch {
			ops[i] = metadata.Op{Kind: metadata.OpGet, Key: headKey(id)}
		}
		res, err := c.meta.Batch(ctx, ops)
		if err != nil {
			return nil, err
		}
		for i, r := range res {
			v := views[batch[i]]
			switch {
			case errors.Is(r.Err, metadata.ErrKeyNotFound):
				// A run exists only after its stream's head did; a missing
				// head is a stream whose GC finished.
				v.gone = true
			case r.Err != nil:
				return nil, r.Err
			default:
				h, err := decodeHead(r.Record.Value)
				if err != nil {
					return nil, err // never guess past a corrupt head
				}
				v.h = h
			}
		}
	}
	out := make([]provider.Verdict, len(runs))
	for i, r := range runs {
		v := views[ID(r.Stream)]
		if v.gone || v.h.State == StateDeleted {
			out[i] = provider.RunRetired
			continue
		}
		h := v.h
		frontier := max(h.Start, h.GenThrough)
		if plantedBug == bugGCRetiresUnmaterialized && c.materializes(h.Profile) && r.Committed {
			frontier = max(frontier, r.End)
		}
		if r.End <= frontier {
			if !v.protLoaded {
				p, err := c.protectionsOf(ctx, h.ID)
				if err != nil {
					return nil, err
				}
				v.prots, v.protLoaded = p, true
			}
			out[i] = provider.RunRetired
			for _, p := range v.prots {
				if p.needsWAL(r.End) {
					out[i] = provider.RunNeeded
					break
				}
			}
			continue
		}
		if r.Committed {
			out[i] = provider.RunNeeded
			continue
		}
		committed, err := c.committedIn(ctx, h, runID{Epoch: r.Epoch, Token: r.Token, Commit: r.Commit}, r.End)
		if err != nil {
			return nil, err
		}
		if committed {
			out[i] = provider.RunNeeded
		} else {
			out[i] = provider.RunRetired // settled and never committed
		}
	}
	return out, nil
}

// --- the retire journal (generation objects on their way out) ---

const retireRecordV1 = 1

// orphanEnd is the End of a journaled orphan (its range is not read from
// the object): every protection covers it.
const orphanEnd = 1<<63 - 1

type retireRecord struct {
	ObjectKey string
	End       int64 // the generation's end offset (protections judge by it)
	Bytes     int64
	SinceMs   int64
}

func (r retireRecord) encode() []byte {
	w := bin.Writer{}
	w.U8(retireRecordV1)
	w.String(r.ObjectKey)
	w.Varint(r.End)
	w.Varint(r.Bytes)
	w.Varint(r.SinceMs)
	return w.Seal()
}

func decodeRetire(b []byte) (retireRecord, error) {
	body, err := bin.Open(b)
	if err != nil {
		return retireRecord{}, fmt.Errorf("%w: retire record: %w", ErrCorrupt, err)
	}
	r := bin.Reader{B: body}
	if v := r.U8(); v != retireRecordV1 {
		return retireRecord{}, fmt.Errorf("%w: retire record version %d", ErrCorrupt, v)
	}
	out := retireRecord{ObjectKey: r.String(), End: r.Varint(), Bytes: r.Varint(), SinceMs: r.Varint()}
	if err := r.Done(); err != nil {
		return retireRecord{}, fmt.Errorf("%w: retire record", ErrCorrupt)
	}
	return out, nil
}

func retireKey(id ID, objectKey string) string {
	sum := sha256.Sum256([]byte(objectKey))
	return retirePrefix(id) + hex.EncodeToString(sum[:12])
}

// --- GC status (nereus gc status) ---

// GCStatus describes the last GC pass and what is still pending.
type GCStatus struct {
	DryRun   bool
	Disabled bool
	LastPass time.Time
	Duration time.Duration
	// Pending lists (a bounded sample of) what is kept and why.
	Pending      []GCPending
	PendingCount int
	PendingBytes int64
	// GraceBytes is the part of PendingBytes in WAL units kept only until
	// their grace period ends (every run retired, no protection needs them).
	GraceBytes int64
	// Recent is the audit trail: the last deletions, newest last.
	Recent []GCEvent
	Stats  LifecycleStats
	// Adopting lists the dead writers whose sources this process has
	// adopted ("<provider>/<writer>", as of the last pass; adopt.go).
	Adopting []string
}

// GCPending is one thing GC keeps for now.
type GCPending struct {
	Kind   string // "segment", "ledger", "generation", "stream"
	Unit   string
	Bytes  int64
	Reason string
}

// GCEvent is one deletion (or, in a dry run, one that would have happened).
type GCEvent struct {
	Time   time.Time
	Kind   string // "segment", "ledger", "generation", "index-records", "stream"
	Unit   string
	Bytes  int64
	Reason string
	DryRun bool
}

const (
	maxGCPendingShown = 200
	maxGCAudit        = 500
)

type gcState struct {
	mu     sync.Mutex
	status GCStatus
	audit  auditTrail
	passN  int
	// swept: when each stream's generation objects were last listed for
	// orphans (this process); sweepPass / sweepsInPass bound the listings
	// per GC pass.
	swept        map[ID]time.Time
	sweepPass    int
	sweepsInPass int
	// memo: what the last passes found per owned stream (gc_memo.go).
	memo map[ID]*gcMemo
}

// auditTrail keeps the last maxGCAudit GC events. It is cut back only
// once it holds twice that, in place: cut back on every event once full,
// it copied 500 events per event, and a burst of ~500 segment deletes
// after each generation made that 10 % of all the server allocated under
// a 10,000 msg/s Pulsar load (docs/notes/issue-15-ops.md, session 19).
type auditTrail struct{ events []GCEvent }

func (a *auditTrail) add(ev GCEvent) {
	a.events = append(a.events, ev)
	if len(a.events) >= 2*maxGCAudit {
		n := copy(a.events, a.events[len(a.events)-maxGCAudit:])
		clear(a.events[n:])
		a.events = a.events[:n]
	}
}

// recent returns a copy of the last maxGCAudit events, oldest first.
func (a *auditTrail) recent() []GCEvent {
	return append([]GCEvent(nil), a.events[max(0, len(a.events)-maxGCAudit):]...)
}

func (c *Core) audit(kind, unit string, bytes int64, reason string) {
	ev := GCEvent{Time: c.rt.now(), Kind: kind, Unit: unit, Bytes: bytes, Reason: reason, DryRun: c.cfg.Lifecycle.GCDryRun}
	verb := "gc deleted"
	if ev.DryRun {
		verb = "gc would delete (dry run)"
	}
	c.log.Info(verb, "kind", kind, "unit", unit, "bytes", bytes, "reason", reason)
	c.gc.mu.Lock()
	c.gc.audit.add(ev)
	c.gc.mu.Unlock()
}

// GCStatus returns the last pass's report and the audit trail.
func (c *Core) GCStatus() GCStatus {
	c.gc.mu.Lock()
	defer c.gc.mu.Unlock()
	s := c.gc.status
	s.Pending = append([]GCPending(nil), s.Pending...)
	s.Recent = c.gc.audit.recent()
	s.Adopting = append([]string(nil), s.Adopting...)
	s.DryRun, s.Disabled = c.cfg.Lifecycle.GCDryRun, c.cfg.Lifecycle.GCDisabled
	s.Stats = c.LifecycleStats()
	return s
}

// CollectGarbage runs one GC pass: logical GC of every stream this process
// owns, then of deleted streams, then each WAL provider's physical GC. It
// runs every GCInterval; tests and admin tools may call it directly.
func (c *Core) CollectGarbage(ctx context.Context) (GCStatus, error) {
	start := c.rt.now()
	var pend gcPending
	var errs []error
	c.lc.gcPasses.Add(1)
	c.gc.mu.Lock()
	c.gc.passN++
	passN := c.gc.passN
	c.gc.mu.Unlock()
	if err := c.forOwnedHeads(ctx, func(in Info, h *head) error { return c.collectStream(ctx, h, &pend, passN) }); err != nil {
		errs = append(errs, err)
	} else {
		c.gcPrune(passN)
	}
	if err := c.collectDeleted(ctx, &pend, passN); err != nil {
		errs = append(errs, fmt.Errorf("deleted streams: %w", err))
	}
	opts := provider.ReclaimOptions{Grace: c.cfg.Lifecycle.GCGrace, DryRun: c.cfg.Lifecycle.GCDryRun, Now: c.rt.now(), Clock: c.rt.now}
	for _, p := range c.providers() {
		r, ok := p.(provider.Reclaimer)
		if !ok {
			continue
		}
		rep, err := r.Reclaim(ctx, c.judgeRuns, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
		}
		c.accountReclaim(p.Name(), rep, &pend)
		c.gcNoteDue(rep.NextDue) // a due pass then, not at the next interval (gc_schedule.go)
	}
	if err := c.adoptionPass(ctx, opts, &pend, passN); err != nil {
		errs = append(errs, fmt.Errorf("adoption: %w", err))
	}
	err := errors.Join(errs...)
	if err != nil {
		c.lc.gcErrors.Add(1)
	}
	c.lc.pendingUnits.Store(int64(pend.count))
	c.lc.pendingBytes.Store(pend.bytes)
	c.gc.mu.Lock()
	c.gc.status.LastPass, c.gc.status.Duration = start, c.rt.now().Sub(start)
	c.gc.status.Pending, c.gc.status.PendingCount, c.gc.status.PendingBytes = pend.shown, pend.count, pend.bytes
	c.gc.status.GraceBytes = pend.graceBytes
	c.gc.mu.Unlock()
	return c.GCStatus(), err
}

// accountReclaim adds one provider pass's report to the pass's pending
// list, the audit trail and the counters.
func (c *Core) accountReclaim(providerName string, rep provider.ReclaimReport, pend *gcPending) {
	kind := "segment"
	if providerName != "objectwal" {
		kind = "ledger"
	}
	for _, u := range rep.Pending {
		pend.add(GCPending{Kind: kind, Unit: u.Unit, Bytes: u.Bytes, Reason: u.Reason})
	}
	pend.count += rep.PendingCount - len(rep.Pending)
	pend.bytes += rep.PendingBytes
	pend.graceBytes += rep.GraceBytes
	for _, u := range rep.Pending {
		pend.bytes -= u.Bytes // counted by add
	}
	for _, u := range rep.DeletedUnits {
		c.audit(kind, u.Unit, u.Bytes, u.Reason)
	}
	if kind == "segment" {
		c.lc.gcSegments.Add(int64(rep.Deleted))
	} else {
		c.lc.gcLedgers.Add(int64(rep.Deleted))
	}
	c.lc.gcBytes.Add(rep.DeletedBytes)
}

type gcPending struct {
	shown      []GCPending
	count      int
	bytes      int64
	graceBytes int64 // of bytes: WAL units kept only by the grace period
}

func (p *gcPending) add(u GCPending) {
	p.count++
	p.bytes += u.Bytes
	if len(p.shown) < maxGCPendingShown {
		p.shown = append(p.shown, u)
	}
}

// collectStream is the logical GC of one live stream this process owns;
// h is the head the listing read (the owner's committed head if owned
// here). Scans whose inputs did not change since a pass that found nothing
// left are skipped (gc_memo.go): that only delays deletions.
func (c *Core) collectStream(ctx context.Context, h *head, pend *gcPending, passN int) error {
	full := c.gcFullFor(h.ID, passN)
	// WAL index entries no read can use any more.
	if frontier := min(h.IndexedThrough, max(h.Start, h.GenThrough)); frontier > 0 && (full || !c.gcIndexSwept(h.ID, frontier)) {
		clean, err := c.deleteIndexRange(ctx, indexPrefix(h.ID), indexKey(h.ID, frontier+1),
			fmt.Sprintf("WAL index entries of %s at or below offset %d (start %d, generations through %d)", h.Name, frontier, h.Start, h.GenThrough))
		if err != nil {
			return err
		}
		if clean {
			c.gcNoteIndexSwept(h.ID, frontier)
		}
	}
	// Generations wholly below the start offset: journal, then unpublish.
	if bound := min(h.Start, h.GenIndexedThrough); h.Start > 0 && (full || !c.gcGensRetired(h.ID, bound)) {
		clean, err := c.retireGenerations(ctx, h, genKey(h.ID, bound+1), "trimmed below offset "+fmt.Sprint(h.Start))
		if err != nil {
			return err
		}
		if clean {
			c.gcNoteGensRetired(h.ID, bound)
		}
	}
	// Superseded generations of a merge, and the next merge if one is due;
	// skipped while nothing it depends on changed since it found nothing.
	if in := c.mergeInputsOf(h); full || !c.gcMergesQuiet(h.ID, in) {
		quiet, err := c.considerMerges(ctx, h)
		if err != nil {
			return err
		}
		if quiet {
			c.gcNoteMergesQuiet(h.ID, in)
		}
	}
	if empty, touch := c.gcJournalEmpty(h.ID); full || !empty {
		empty, err := c.drainJournal(ctx, h, pend)
		if err != nil {
			return err
		}
		c.gcNoteJournal(h.ID, touch, empty)
	}
	if full || gcDue(h.ID, passN, c.everyPasses(gcLeaseEvery)) {
		if err := c.dropExpiredLeases(ctx, h.ID); err != nil {
			return err
		}
	}
	if c.gens != nil && c.needsOrphanSweep(h.ID, passN) {
		if err := c.sweepOrphanGenerations(ctx, h, pend); err != nil {
			return err
		}
	}
	return nil
}

// deleteIndexRange deletes the index records in [prefix, max). clean
// reports that every record it found is gone (none changed under it, no
// delete failed).
func (c *Core) deleteIndexRange(ctx context.Context, prefix, max, reason string) (clean bool, err error) {
	clean = true
	for {
		recs, err := c.meta.RangeScan(ctx, prefix, max, 512)
		if err != nil || len(recs) == 0 {
			return clean, err
		}
		if c.cfg.Lifecycle.GCDryRun {
			c.audit("index-records", fmt.Sprintf("%s..%s", recs[0].Key, recs[len(recs)-1].Key), 0, reason)
			return false, nil
		}
		ops := make([]metadata.Op, len(recs))
		for i, r := range recs {
			ops[i] = metadata.Op{Kind: metadata.OpDelete, Key: r.Key, Expected: r.Version}
		}
		res, err := c.meta.Batch(ctx, ops)
		if err != nil {
			return false, err
		}
		n := 0
		for _, r := range res {
			if r.Err == nil || errors.Is(r.Err, metadata.ErrKeyNotFound) || metadata.Classify(r.Err) == metadata.Conflict {
				n++
			}
			if r.Err != nil && !errors.Is(r.Err, metadata.ErrKeyNotFound) {
				clean = false
			}
		}
		c.lc.gcRecords.Add(int64(n))
		c.audit("index-records", fmt.Sprintf("%d records %s..%s", n, recs[0].Key, recs[len(recs)-1].Key), 0, reason)
		if len(recs) < 512 {
			return clean, nil
		}
	}
}

// retireGenerations journals and unpublishes the generation records in
// [genPrefix(h.ID), max). clean reports that every record it found is gone.
func (c *Core) retireGenerations(ctx context.Context, h *head, max, reason string) (clean bool, err error) {
	clean = true
	for {
		recs, err := c.meta.RangeScan(ctx, genPrefix(h.ID), max, 256)
		if err != nil || len(recs) == 0 {
			return clean, err
		}
		for _, r := range recs {
			d, err := decodeIndexRecord(r.Value)
			if err != nil {
				return false, err
			}
			if err := c.journalGeneration(ctx, h.ID, d, reason); err != nil {
				return false, err
			}
			if c.cfg.Lifecycle.GCDryRun {
				continue
			}
			if err := c.meta.Delete(ctx, r.Key, r.Version); err != nil && !errors.Is(err, metadata.ErrKeyNotFound) {
				if metadata.Classify(err) != metadata.Conflict {
					return false, err
				}
				clean = false // changed under us: look again next pass
			}
			c.lc.gcRecords.Add(1)
		}
		if c.cfg.Lifecycle.GCDryRun {
			return false, nil
		}
		if len(recs) < 256 {
			return clean, nil
		}
	}
}

// journalGeneration writes the retire-journal entry of generation d (before
// anything that could make its object unreachable).
func (c *Core) journalGeneration(ctx context.Context, id ID, d descriptor, reason string) error {
	for _, pt := range d.Parts {
		gt, err := decodeGenTarget(pt.Target)
		if err != nil {
			return err
		}
		if c.cfg.Lifecycle.GCDryRun {
			c.audit("generation", gt.Key, gt.Size, reason)
			continue
		}
		rec := retireRecord{ObjectKey: gt.Key, End: d.End, Bytes: gt.Size, SinceMs: c.nowMs()}
		c.gcTouchJournal(id)
		_, err = c.meta.Put(ctx, retireKey(id, gt.Key), rec.encode(), metadata.NotExists)
		c.gcTouchJournal(id)
		if err != nil && metadata.Classify(err) != metadata.Conflict {
			return err // unknown: the next pass writes it again (or finds it)
		}
	}
	return nil
}

// drainJournal deletes the journaled objects of stream h whose grace has
// passed and that no protection needs, then their journal entries. empty
// reports that the journal had no entry to begin with.
func (c *Core) drainJournal(ctx context.Context, h *head, pend *gcPending) (empty bool, err error) {
	recs, err := c.meta.RangeScan(ctx, retirePrefix(h.ID), retirePrefix(h.ID)+"\xff", 1024)
	if err != nil || len(recs) == 0 {
		return err == nil, err
	}
	return false, c.drainJournalRecords(ctx, h, recs, pend)
}

func (c *Core) drainJournalRecords(ctx context.Context, h *head, recs []metadata.Record, pend *gcPending) error {
	var prots []protection
	var err error
	if h.State != StateDeleted {
		if prots, err = c.protectionsOf(ctx, h.ID); err != nil {
			return err
		}
	}
	now := c.nowMs()
	grace := c.cfg.Lifecycle.GCGrace.Milliseconds()
	var claim *claimWindow // read once, when the first orphan needs it
	claimRead := false
	for _, r := range recs {
		rr, err := decodeRetire(r.Value)
		if err != nil {
			return err
		}
		if wait := rr.SinceMs + grace - now; wait > 0 {
			pend.add(GCPending{Kind: "generation", Unit: rr.ObjectKey, Bytes: rr.Bytes,
				Reason: fmt.Sprintf("unpublished; grace period ends in %s", time.Duration(wait)*time.Millisecond)})
			continue
		}
		protected := false
		for _, p := range prots {
			if p.needsGen(rr.End) {
				protected = true
				break
			}
		}
		if protected {
			pend.add(GCPending{Kind: "generation", Unit: rr.ObjectKey, Bytes: rr.Bytes, Reason: "a reader protection still covers it"})
			continue
		}
		if c.cfg.Lifecycle.GCDryRun {
			c.audit("generation", rr.ObjectKey, rr.Bytes, "journaled, grace passed, unprotected")
			continue
		}
		// The last proof: no generation record names the object. One does
		// when an unpublish step is still to come (its record delete failed:
		// the next pass journals it again), when a merge that journaled its
		// source before publishing did not publish, or when rebuild-index
		// restored a record for an object the orphan sweep had nominated.
		// The journal entry is dropped, the object kept.
		// A journaled orphan may be the object of a merge whose claim still
		// stands (journaled by an older binary, or while the claim was
		// unreadable): its publication may still apply. The claim is read
		// before the record below, so a claim found gone was settled.
		if rr.End == orphanEnd {
			if !claimRead {
				if claim, err = c.standingMergeClaim(ctx, h); err != nil {
					return err
				}
				claimRead = true
			}
			if claim.covers(h.ID, rr.ObjectKey) {
				pend.add(GCPending{Kind: "generation", Unit: rr.ObjectKey, Bytes: rr.Bytes,
					Reason: "journaled orphan, but " + claim.reason()})
				c.markOrphanSweep(h.ID) // keep the claim looked at until it settles
				continue
			}
		}
		if named, err := c.genRecordNames(ctx, h.ID, rr); err != nil {
			return err
		} else if named {
			c.log.Info("gc keeps a journaled generation object: a generation record names it", "stream", h.ID, "key", rr.ObjectKey)
			if err := c.meta.Delete(ctx, r.Key, r.Version); err != nil && !errors.Is(err, metadata.ErrKeyNotFound) &&
				metadata.Classify(err) != metadata.Conflict {
				return err
			}
			continue
		}
		if err := c.cfg.ObjectStore.Delete(ctx, rr.ObjectKey, nil); err != nil && !errors.Is(err, objectstore.ErrNotFound) {
			return fmt.Errorf("deleting generation object %s: %w", rr.ObjectKey, err)
		}
		if c.gens != nil {
			c.gens.forget(rr.ObjectKey)
		}
		c.lc.gcObjects.Add(1)
		c.lc.gcBytes.Add(rr.Bytes)
		c.audit("generation", rr.ObjectKey, rr.Bytes, "journaled, grace passed, unprotected")
		if err := c.meta.Delete(ctx, r.Key, r.Version); err != nil && !errors.Is(err, metadata.ErrKeyNotFound) &&
			metadata.Classify(err) != metadata.Conflict {
			return err
		}
	}
	return nil
}

// genRecordNames reports whether the generation record at the journaled
// object's end offset names it.
func (c *Core) genRecordNames(ctx context.Context, id ID, rr retireRecord) (bool, error) {
	end := rr.End
	if end == orphanEnd {
		_, _, e, ok := parseGenObjectKey(id, rr.ObjectKey)
		if !ok {
			return false, nil
		}
		end = e
	}
	rec, err := c.meta.Get(ctx, genKey(id, end))
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	d, err := decodeIndexRecord(rec.Value)
	if err != nil {
		return false, err // never delete past a corrupt record
	}
	for _, k := range genKeysOf(d) {
		if k == rr.ObjectKey {
			return true, nil
		}
	}
	return false, nil
}

// dropExpiredLeases removes lease records long past their expiry (their
// holders died without releasing them).
func (c *Core) dropExpiredLeases(ctx context.Context, id ID) error {
	recs, err := c.meta.RangeScan(ctx, protectPrefix(id), protectPrefix(id)+"\xff", 0)
	if err != nil {
		return err
	}
	limit := c.nowMs() - 2*c.cfg.Lifecycle.LeaseSkew.Milliseconds()
	for _, r := range recs {
		l, err := decodeLease(r.Value)
		if err != nil || l.ExpiresMs >= limit || c.cfg.Lifecycle.GCDryRun {
			continue
		}
		if err := c.meta.Delete(ctx, r.Key, r.Version); err == nil {
			c.lc.gcRecords.Add(1)
		}
	}
	return nil
}

// --- deleted streams ---

const deletedRecordV1 = 1

func encodeDeleted(name string, atMs int64) []byte {
	w := bin.Writer{}
	w.U8(deletedRecordV1)
	w.String(name)
	w.Varint(atMs)
	return w.Seal()
}

func decodeDeleted(b []byte) (name string, atMs int64, err error) {
	body, err := bin.Open(b)
	if err != nil {
		return "", 0, fmt.Errorf("%w: deleted record: %w", ErrCorrupt, err)
	}
	r := bin.Reader{B: body}
	if v := r.U8(); v != deletedRecordV1 {
		return "", 0, fmt.Errorf("%w: deleted record version %d", ErrCorrupt, v)
	}
	name, atMs = r.String(), r.Varint()
	if err := r.Done(); err != nil {
		return "", 0, fmt.Errorf("%w: deleted record", ErrCorrupt)
	}
	return name, atMs, nil
}

// abandonedDeleteAfter is how long a queued deletion whose head never
// became DELETED (Delete failed or crashed before its CAS) stays queued.
const abandonedDeleteAfter = time.Hour

// collectDeleted finishes the GC of deleted streams this process owns.
func (c *Core) collectDeleted(ctx context.Context, pend *gcPending, passN int) error {
	if passN%60 == 1 {
		// Heads deleted before the queue existed (or whose queue entry was
		// lost) are found by a slow scan of every head.
		if err := c.enqueueDeletedHeads(ctx); err != nil {
			return err
		}
	}
	recs, err := c.meta.RangeScan(ctx, deletedKeyPrefix, deletedKeyPrefix+"\xff", 1024)
	if err != nil {
		return err
	}
	for _, r := range recs {
		id, ok := parseDeletedKey(r.Key)
		if !ok {
			continue
		}
		name, atMs, err := decodeDeleted(r.Value)
		if err != nil {
			return err
		}
		h, hv, err := c.readHead(ctx, id)
		switch {
		case errors.Is(err, ErrStreamNotFound):
			if !c.cfg.Lifecycle.GCDryRun {
				_ = c.meta.Delete(ctx, r.Key, r.Version)
			}
			continue
		case err != nil:
			return err
		case h.State != StateDeleted:
			if c.nowMs()-atMs > abandonedDeleteAfter.Milliseconds() && !c.cfg.Lifecycle.GCDryRun {
				_ = c.meta.Delete(ctx, r.Key, r.Version)
			}
			continue
		}
		if c.cfg.Ownership != nil && !c.cfg.Ownership.OwnsStream(name) {
			continue
		}
		if err := c.collectDeletedStream(ctx, h, hv, r, pend); err != nil {
			c.log.Warn("gc of a deleted stream failed", "stream", id, "name", name, "err", err)
		}
	}
	return nil
}

func parseDeletedKey(key string) (ID, bool) {
	return parseHeadKey(headKeyPrefix + key[min(len(key), len(deletedKeyPrefix)):])
}

// enqueueDeletedHeads queues every DELETED head that has no queue entry.
func (c *Core) enqueueDeletedHeads(ctx context.Context) error {
	min := headKeyPrefix
	for {
		recs, err := c.meta.RangeScan(ctx, min, headKeyPrefix+"\xff", 512)
		if err != nil || len(recs) == 0 {
			return err
		}
		for _, r := range recs {
			h, err := decodeHead(r.Value)
			if err != nil || h.State != StateDeleted {
				continue
			}
			_, _ = c.meta.Put(ctx, deletedKey(h.ID), encodeDeleted(h.Name, c.nowMs()), metadata.NotExists)
		}
		min = recs[len(recs)-1].Key + "\x00"
	}
}

// collectDeletedStream removes one deleted stream's records and objects;
// the head goes last.
func (c *Core) collectDeletedStream(ctx context.Context, h *head, hv metadata.Version, queued metadata.Record, pend *gcPending) error {
	reason := "stream " + h.Name + " was deleted"
	if _, err := c.deleteIndexRange(ctx, indexPrefix(h.ID), indexPrefix(h.ID)+"\xff", reason); err != nil {
		return err
	}
	for _, d := range h.GenPending {
		if err := c.journalGeneration(ctx, h.ID, d, reason); err != nil {
			return err
		}
	}
	if _, err := c.retireGenerations(ctx, h, genPrefix(h.ID)+"\xff", reason); err != nil {
		return err
	}
	if _, err := c.deleteIndexRange(ctx, protectPrefix(h.ID), protectPrefix(h.ID)+"\xff", reason); err != nil {
		return err
	}
	if c.gens != nil {
		if err := c.sweepOrphanGenerations(ctx, h, pend); err != nil {
			return err
		}
	}
	if err := c.retireViews(ctx, h.ID, reason); err != nil {
		return err
	}
	if _, err := c.drainJournal(ctx, h, pend); err != nil {
		return err
	}
	left, err := c.meta.RangeScan(ctx, retirePrefix(h.ID), retirePrefix(h.ID)+"\xff", 1)
	if err != nil {
		return err
	}
	if len(left) > 0 || c.cfg.Lifecycle.GCDryRun {
		pend.add(GCPending{Kind: "stream", Unit: h.Name + " (" + h.ID.String() + ")", Reason: "deleted; generation objects still in their grace period"})
		return nil
	}
	// The name record must not outlive the head: a lookup would recreate
	// the head from it under the old ID.
	if rec, err := c.meta.Get(ctx, nameKey(h.Name)); err == nil {
		if nr, derr := decodeNameRecord(rec.Value); derr == nil && nr.ID == h.ID {
			if err := c.meta.Delete(ctx, nameKey(h.Name), rec.Version); err != nil && !errors.Is(err, metadata.ErrKeyNotFound) &&
				metadata.Classify(err) != metadata.Conflict {
				return err
			}
		}
	} else if !errors.Is(err, metadata.ErrKeyNotFound) {
		return err
	}
	if err := c.meta.Delete(ctx, mergeClaimKey(h.ID), metadata.AnyVersion); err != nil && !errors.Is(err, metadata.ErrKeyNotFound) {
		return err
	}
	if err := c.meta.Delete(ctx, headKey(h.ID), hv); err != nil && !errors.Is(err, metadata.ErrKeyNotFound) {
		return err
	}
	_ = c.meta.Delete(ctx, queued.Key, queued.Version)
	c.lc.gcStreams.Add(1)
	c.lc.gcRecords.Add(1)
	c.audit("stream", h.Name+" ("+h.ID.String()+")", 0, reason+": every record and object removed")
	return nil
}

// --- orphan generation objects ---

// genOfObjectKey parses the generation number out of a genObjectKey.
func genOfObjectKey(key string) (uint64, bool) {
	i := strings.LastIndex(key, "-g")
	if i < 0 {
		return 0, false
	}
	rest := key[i+2:]
	j := strings.IndexByte(rest, '-')
	if j < 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(rest[:j], 10, 64)
	return n, err == nil
}

// maxOrphanSweepsPerPass bounds the streams whose generation objects one
// GC pass lists for orphans (a listing each), so a pass's cost does not
// grow with the number of streams; the others are due in later passes.
const maxOrphanSweepsPerPass = 16

// needsOrphanSweep reports whether stream id's generation objects should be
// listed this pass: when never listed in this process (a crash may have
// left an object that no record names), after a materialization failure
// or an orphan still in its grace period (markOrphanSweep), and again
// every OrphanSweepInterval (a lost publication can leave one at any time)
// — at most maxOrphanSweepsPerPass streams per pass.
func (c *Core) needsOrphanSweep(id ID, passN int) bool {
	c.gc.mu.Lock()
	defer c.gc.mu.Unlock()
	if c.gc.swept == nil {
		c.gc.swept = map[ID]time.Time{}
	}
	if c.gc.sweepPass != passN {
		c.gc.sweepPass, c.gc.sweepsInPass = passN, 0
	}
	now := c.rt.now()
	if last, ok := c.gc.swept[id]; ok && now.Sub(last) < c.cfg.Lifecycle.OrphanSweepInterval {
		return false
	}
	if c.gc.sweepsInPass >= maxOrphanSweepsPerPass {
		return false
	}
	c.gc.sweepsInPass++
	c.gc.swept[id] = now
	return true
}

// markOrphanSweep asks for stream id's objects to be listed again.
func (c *Core) markOrphanSweep(id ID) {
	c.gc.mu.Lock()
	if c.gc.swept != nil {
		delete(c.gc.swept, id)
	}
	c.gc.mu.Unlock()
}

// sweepOrphanGenerations journals generation objects of h that no record
// names (a materialization that crashed or lost between its PUT and its
// publication). The listing only nominates; the proof is that neither the
// head, nor the generation index, nor the journal names the object, that
// it is older than the grace period (so no task is still publishing it),
// and that no standing merge claim names its window (a merge whose
// publication response was lost keeps its claim: its write may still
// apply; standingMergeClaim fences it once the claim is stale).
func (c *Core) sweepOrphanGenerations(ctx context.Context, h *head, pend *gcPending) error {
	named := map[string]bool{}
	var covered []offsetGap // ranges the named records serve
	note := func(d descriptor) error {
		covered = append(covered, offsetGap{d.Start, d.End})
		for _, pt := range d.Parts {
			gt, err := decodeGenTarget(pt.Target)
			if err != nil {
				return err
			}
			named[gt.Key] = true
		}
		return nil
	}
	for _, d := range h.GenPending {
		if err := note(d); err != nil {
			return err
		}
	}
	after := genPrefix(h.ID)
	for {
		recs, err := c.meta.RangeScan(ctx, after, genPrefix(h.ID)+"\xff", 512)
		if err != nil {
			return err
		}
		for _, r := range recs {
			d, err := decodeIndexRecord(r.Value)
			if err != nil {
				return err
			}
			if err := note(d); err != nil {
				return err
			}
		}
		if len(recs) < 512 {
			break
		}
		after = recs[len(recs)-1].Key + "\x00"
	}
	journal, err := c.meta.RangeScan(ctx, retirePrefix(h.ID), retirePrefix(h.ID)+"\xff", 0)
	if err != nil {
		return err
	}
	for _, r := range journal {
		rr, err := decodeRetire(r.Value)
		if err != nil {
			return err
		}
		named[rr.ObjectKey] = true
	}
	var orphans []objectstore.ObjectInfo
	for info, err := range c.cfg.ObjectStore.List(ctx, genObjectPrefix(h.ID)) {
		if err != nil {
			if info.Key == "" || ctx.Err() != nil {
				return err // the listing itself failed
			}
			// This object alone cannot be listed (a corrupt stored
			// header): keep it — nothing is deleted without proof — say
			// so, and sweep the others (objectstore.ObjectStore.List).
			c.lc.gcUnreadable.Add(1)
			c.log.Warn("gc: generation object cannot be read; skipped and kept", "stream", h.ID, "object", info.Key, "err", err)
			pend.add(GCPending{Kind: "generation", Unit: info.Key, Reason: "unreadable, kept (nothing is deleted without proof): " + err.Error()})
			c.markOrphanSweep(h.ID) // keep reporting it until repaired
			continue
		}
		if !named[info.Key] {
			orphans = append(orphans, info)
		}
	}
	sort.Slice(orphans, func(i, j int) bool { return orphans[i].Key < orphans[j].Key })
	grace := c.cfg.Lifecycle.OrphanGrace
	if h.State == StateDeleted {
		// No task can publish into a deleted stream (the publication CAS
		// refuses it): only a PUT still in flight needs waiting for.
		grace = c.cfg.Lifecycle.GCGrace
	}
	var claim *claimWindow // read once, when the first candidate needs it
	claimRead := false
	for _, info := range orphans {
		if gen, ok := genOfObjectKey(info.Key); !ok || gen >= h.NextGen {
			// A task builds generation NextGen and publishes it only by a
			// CAS that requires gen >= NextGen: an unnamed object at or
			// above it may still be published; one below it never can.
			pend.add(GCPending{Kind: "generation", Unit: info.Key, Bytes: info.Size, Reason: "unreferenced; a materialization task may still publish it"})
			c.markOrphanSweep(h.ID)
			continue
		}
		if _, s, e, ok := parseGenObjectKey(h.ID, info.Key); ok && h.State != StateDeleted &&
			!coveredBy(covered, max(s, h.Start), min(e, h.GenThrough)) {
			// It serves offsets the head says generations serve and no
			// record names: a lost record, not an orphan.
			pend.add(GCPending{Kind: "generation", Unit: info.Key, Bytes: info.Size,
				Reason: "unreferenced, but it holds offsets no generation record covers: run rebuild-index"})
			c.markOrphanSweep(h.ID) // keep reporting it until repaired
			continue
		}
		if age := c.rt.now().Sub(info.ModTime); age < grace {
			pend.add(GCPending{Kind: "generation", Unit: info.Key, Bytes: info.Size, Reason: "unreferenced but younger than the grace period (a task may still publish it)"})
			c.markOrphanSweep(h.ID)
			continue
		}
		// A merge whose publication is unsettled (a lost response) keeps
		// its claim: its object may still become named, however old it is.
		if !claimRead {
			if claim, err = c.standingMergeClaim(ctx, h); err != nil {
				return err
			}
			claimRead = true
		}
		if claim.covers(h.ID, info.Key) {
			pend.add(GCPending{Kind: "generation", Unit: info.Key, Bytes: info.Size,
				Reason: "unreferenced, but " + claim.reason()})
			c.markOrphanSweep(h.ID)
			continue
		}
		// Journal it (End = its range end is unknown without reading it;
		// MaxInt64 makes every protection cover it).
		rec := retireRecord{ObjectKey: info.Key, End: orphanEnd, Bytes: info.Size, SinceMs: c.nowMs()}
		if c.cfg.Lifecycle.GCDryRun {
			c.audit("generation", info.Key, info.Size, "orphan: no record names it")
			continue
		}
		c.gcTouchJournal(h.ID)
		_, err := c.meta.Put(ctx, retireKey(h.ID, info.Key), rec.encode(), metadata.NotExists)
		c.gcTouchJournal(h.ID)
		if err != nil && metadata.Classify(err) != metadata.Conflict {
			return err
		}
	}
	return nil
}

// coveredBy reports whether the ranges cover [from, to) (true when empty).
func coveredBy(ranges []offsetGap, from, to int64) bool {
	if from >= to {
		return true
	}
	sorted := append([]offsetGap(nil), ranges...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].start < sorted[j].start })
	next := from
	for _, r := range sorted {
		if r.start > next {
			break
		}
		next = max(next, r.end)
		if next >= to {
			return true
		}
	}
	return false
}
