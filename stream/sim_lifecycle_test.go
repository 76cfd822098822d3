package stream

import (
	"cmp"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Materialization, retention and GC in the simulation.
//
// Every broker runs the real materializer (materialize.go), retention
// passes (retention.go) and GC (gc.go, with protect.go's protections) as
// simulated goroutines on the simulated clock, against the shared simulated
// object store and the simulated WAL disks, whose Reclaim applies the
// provider contract (sim_wal_test.go). Crashes, restarts, lost responses
// and ownership moves hit them at every step. Checked:
//
//   - at every physical deletion (a WAL unit, a generation object): no
//     committed run at or above its stream's frontier max(Start,
//     GenThrough) is deleted, no published generation that the head or the
//     generation index still names above the start is deleted, and no
//     protection the
//     deleting process must respect (its own read slots, every unexpired
//     durable lease) needs what is deleted;
//   - after the world settled: every committed offset from the stream's
//     start reads back, through a fresh process and whichever generation or
//     WAL run serves it, exactly the bytes that were committed (the oracle
//     keeps them whatever GC deleted);
//   - the generations ever published cover disjoint ranges, except that
//     a merged generation contains the ones it supersedes (nothing
//     published twice, by materialization or by merges);
//   - trims by retention are part of the store history porcupine checks.

// simLifeMode overrides -sim.lifecycle (the mutation check sets it per
// planted bug; never concurrently with other tests).
var simLifeMode string

// setupLifecycle draws this seed's lifecycle settings: intervals and
// grace periods of a few simulated milliseconds, so generations are
// published, sources unpublished and units deleted within a seed.
func (h *simHarness) setupLifecycle() {
	rng := h.w.rng
	h.lifecycle = rng.Intn(5) == 0
	switch mode := cmp.Or(simLifeMode, *simLife); mode {
	case "on":
		h.lifecycle = true
	case "off":
		h.lifecycle = false
	}
	h.w.coroutines = h.lifecycle
	if !h.lifecycle {
		h.lc = LifecycleConfig{DisableMaterialization: true, GCDisabled: true}
		h.retain = time.Hour
		return
	}
	h.lc = LifecycleConfig{
		Interval:               time.Duration(20+rng.Intn(60)) * time.Millisecond,
		GenerationBytes:        int64(20 + rng.Intn(300)),
		GenerationMaxAge:       time.Duration(10+rng.Intn(90)) * time.Millisecond,
		MaterializeConcurrency: 16, // never full: a coroutine must not block on a real channel
		GCInterval:             time.Duration(40+rng.Intn(120)) * time.Millisecond,
		GCGrace:                time.Duration(5+rng.Intn(45)) * time.Millisecond,
		LeaseTTL:               300 * time.Millisecond,
		LeaseSkew:              20 * time.Millisecond,
	}
	h.retain = time.Duration(10+rng.Intn(90)) * time.Millisecond
	for _, d := range h.disks {
		d.onDelete = h.onUnitDelete
	}
	h.objs.onDelete = h.onObjectDelete
	h.meta.oracle.tracef = h.w.tracef
	h.meta.oracle.onTrim = func(id ID, start int64) {
		for _, st := range h.streams {
			if st.id == id {
				// The head write that moved Start is the trim's
				// linearization point (a retention pass or a Trim call).
				t := h.tick()
				h.storeHist = append(h.storeHist, porcupine.Operation{ClientId: 300, Input: simTrimIn{stream: st.idx, to: start},
					Call: t, Output: simTrimOut{}, Return: t})
				h.stats.retentionTrims++
			}
		}
	}
}

// deleter is the process whose GC is deleting (the running simulated
// goroutine's), or nil.
func (h *simHarness) deleter() *simProc {
	if c := h.w.current; c != nil && c.p != nil && c.p.core != nil {
		return c.p
	}
	return nil
}

// protections are what a GC decision of process p must respect for
// stream id right now: p's slots and every unexpired durable lease.
func (h *simHarness) protections(p *simProc, id ID) []protection {
	var out []protection
	if p != nil {
		out = p.core.slots.of(id)
	}
	recs, _ := h.meta.inner.RangeScan(simCtx, protectPrefix(id), protectPrefix(id)+"\xff", 0)
	now := h.w.now / 1e6
	for _, r := range recs {
		if l, err := decodeLease(r.Value); err == nil && l.ExpiresMs > now-h.lc.LeaseSkew.Milliseconds() {
			out = append(out, l.protection)
		}
	}
	return out
}

func (h *simHarness) storedHead(id ID) (*head, bool) {
	rec, err := h.meta.inner.Get(simCtx, headKey(id))
	if err != nil {
		return nil, false
	}
	hd, err := decodeHead(rec.Value)
	return hd, err == nil
}

// onUnitDelete runs before GC deletes a WAL unit's runs.
func (h *simHarness) onUnitDelete(unit uint64, runs []*simRun) {
	h.stats.unitsDeleted++
	p := h.deleter()
	for _, r := range runs {
		id := ID(r.run.Stream)
		hd, ok := h.storedHead(id)
		if !ok || hd.State == StateDeleted {
			continue
		}
		end := r.run.End()
		frontier := max(hd.Start, hd.GenThrough)
		committed := r.committed || h.meta.oracle.isCommitted(id, r.run.Epoch, r.run.Token, r.run.Commit, r.run.Start, end)
		if end > frontier {
			if committed {
				h.violate("GC deleted unit %d holding committed run [%d,%d) of %v above its frontier (start %d, generations through %d)",
					unit, r.run.Start, end, id, hd.Start, hd.GenThrough)
			}
			continue
		}
		for _, pr := range h.protections(p, id) {
			if pr.needsWAL(end) {
				h.violate("GC deleted unit %d holding run [%d,%d) of %v that a protection (from %d, gen %d) still needs",
					unit, r.run.Start, end, id, pr.From, pr.Gen)
				break
			}
		}
	}
}

// onObjectDelete runs before an object is deleted.
func (h *simHarness) onObjectDelete(key string) {
	rest, ok := strings.CutPrefix(key, "gen/")
	if !ok || len(rest) < 16 {
		return
	}
	v, err := strconv.ParseUint(rest[:16], 16, 64)
	if err != nil {
		return
	}
	id := ID(v)
	d, published := h.meta.oracle.wasPublished(id, key)
	if !published {
		return // never readable: a task's own unpublished object
	}
	h.stats.objectsDeleted++
	if hd, ok := h.storedHead(id); ok && hd.State != StateDeleted {
		named := false
		for _, gd := range hd.GenPending {
			named = named || descriptorNames(gd, key)
		}
		recs, _ := h.meta.inner.RangeScan(simCtx, genPrefix(id), genPrefix(id)+"\xff", 0)
		for _, r := range recs {
			if gd, err := decodeIndexRecord(r.Value); err == nil {
				named = named || descriptorNames(gd, key)
			}
		}
		// A record left naming a generation wholly below the start is
		// harmless (reads below the start are refused; the next pass
		// journals it again): a stale process's index publication can
		// re-create one after GC unpublished it.
		if named && d.End > hd.Start {
			h.violate("GC deleted generation object %s [%d,%d) of %v that the head or the generation index still names (start %d)",
				key, d.Start, d.End, id, hd.Start)
		}
	}
	for _, pr := range h.protections(h.deleter(), id) {
		if pr.needsGen(d.End) {
			h.violate("GC deleted generation object %s [%d,%d) of %v that a protection (from %d) still needs", key, d.Start, d.End, id, pr.From)
			break
		}
	}
}

func descriptorNames(d descriptor, key string) bool {
	for _, pt := range d.Parts {
		if gt, err := decodeGenTarget(pt.Target); err == nil && gt.Key == key {
			return true
		}
	}
	return false
}

// oracleLog returns stream st's whole committed history from the oracle
// (checkFinal's ground truth), after checking that a fresh process reads
// every committed offset from the start back identically, and that no
// range was published twice.
func (h *simHarness) oracleLog(audit *simProc, st *simStream) (string, bool) {
	hd, ok := h.storedHead(st.id)
	if !ok {
		h.violate("audit: stream %d has no head", st.idx)
		return "", false
	}
	log, err := h.meta.oracle.log(st.id, hd.End, h.rawRun)
	if err != nil {
		h.violate("audit: stream %d: %v", st.idx, err)
		return "", false
	}
	if err := h.meta.oracle.checkPublishedOnce(st.id); err != nil {
		h.violate("audit: stream %d: %v", st.idx, err)
	}
	h.stats.generations += len(h.meta.oracle.published[st.id])
	var b strings.Builder
	for next := hd.Start; next < hd.End; {
		res, err := audit.core.Read(simCtx, st.id, next, ReadOptions{MaxEntries: 1000, MaxBytes: 1 << 20})
		if err != nil || len(res.Entries) == 0 {
			h.violate("audit: stream %d: reading committed offset %d (start %d, end %d, generations through %d): %v (%d entries)",
				st.idx, next, hd.Start, hd.End, hd.GenThrough, err, len(res.Entries))
			return log, true
		}
		for _, e := range res.Entries {
			b.WriteString(entryString(string(e.Payload), e.Offset, e.RecordCount))
		}
		next = res.Next
	}
	if want := (simState{entries: log}).from(hd.Start); b.String() != want {
		h.violate("audit: stream %d from its start %d does not read back what was committed:\n  read      %s\n  committed %s",
			st.idx, hd.Start, b.String(), want)
	}
	return log, true
}
