package stream

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/stream/generation"
)

// Repair of the generation index (rebuild-index knows generations).
//
// The head says which offsets generations serve: [Start, GenIndexedThrough)
// must be covered by generation-index records (later ones are in
// GenPending). A record lost from that range makes its offsets unreadable
// (GC retired their WAL entries once the generation was published), but the
// objects are self-describing: generation.Verify proves an object's stream,
// generation number and exact range, and every byte in it is a copy of
// committed entries (a materialization or merge only ever reads committed
// offsets, and an offset's committed bytes never change), so any verified
// object of the stream serves its range correctly.
//
// A candidate object must also be one GC has not retired: never journaled
// (s/r/: GC journals an object before it unpublishes it and deletes the
// journal entry only after the object) and numbered below the head's
// NextGen (a number at or above it was never published). The restored
// records must tile each gap exactly, with cumulative sizes that agree with
// the neighbouring records; otherwise nothing is written for that gap.
// Records are written create-only, so repair is idempotent and never
// overwrites a record a task wrote meanwhile; after writing, the journal is
// read again, and a record whose object was retired meanwhile is removed.
//
// What repair cannot restore is a generation's lineage (the commits its
// bytes came from): restored records carry lineageLost, and settling an
// unknown commit outcome against them reports "unknown" instead of a guess.

type genGap struct {
	start, end int64
	// cumStart / cumEnd: cumulative payload size at start and end, -1 if
	// unknown.
	cumStart, cumEnd int64
	// leading: the gap begins at the start offset, so its first
	// generation may begin below it.
	leading bool
}

// genGaps lists the offsets of [h.Start, h.GenIndexedThrough) that no
// generation record covers, and the names of the objects the records and
// GenPending name.
func (c *Core) genGaps(ctx context.Context, h *head) ([]genGap, map[string]bool, error) {
	named := map[string]bool{}
	for _, d := range h.GenPending {
		for _, k := range genKeysOf(d) {
			named[k] = true
		}
	}
	if h.GenIndexedThrough <= h.Start {
		return nil, named, nil
	}
	var gaps []genGap
	next, cum := h.Start, int64(-1)
	from, to := genKey(h.ID, h.Start+1), genKey(h.ID, h.GenIndexedThrough+1)
	for {
		recs, err := c.meta.RangeScan(ctx, from, to, 512)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range recs {
			d, err := decodeIndexRecord(r.Value)
			if err != nil {
				return nil, nil, fmt.Errorf("generation record %s: %w", r.Key, err)
			}
			for _, k := range genKeysOf(d) {
				named[k] = true
			}
			if d.Start > next {
				gaps = append(gaps, genGap{start: next, end: d.Start, cumStart: cum, cumEnd: d.CumBytes - d.Bytes, leading: next == h.Start})
			}
			if d.End > next {
				next, cum = d.End, d.CumBytes
			}
		}
		if len(recs) < 512 {
			break
		}
		from = recs[len(recs)-1].Key + "\x00"
	}
	if next < h.GenIndexedThrough {
		g := genGap{start: next, end: h.GenIndexedThrough, cumStart: cum, cumEnd: -1, leading: next == h.Start}
		switch {
		case len(h.GenPending) > 0 && h.GenPending[0].Start == h.GenIndexedThrough:
			g.cumEnd = h.GenPending[0].CumBytes - h.GenPending[0].Bytes
		case len(h.GenPending) == 0 && h.GenIndexedThrough == h.GenThrough:
			g.cumEnd = h.GenCumBytes
		}
		gaps = append(gaps, g)
	}
	return gaps, named, nil
}

func genKeysOf(d descriptor) []string {
	var out []string
	for _, pt := range d.Parts {
		if gt, err := decodeGenTarget(pt.Target); err == nil {
			out = append(out, gt.Key)
		}
	}
	return out
}

// parseGenObjectKey reads stream id's object key genObjectKey wrote.
func parseGenObjectKey(id ID, key string) (gen uint64, start, end int64, ok bool) {
	rest, found := strings.CutPrefix(key, genObjectPrefix(id))
	if !found {
		return 0, 0, 0, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 4 || !strings.HasPrefix(f[2], "g") {
		return 0, 0, 0, false
	}
	s, err1 := strconv.ParseInt(f[0], 10, 64)
	e, err2 := strconv.ParseInt(f[1], 10, 64)
	g, err3 := strconv.ParseUint(f[2][1:], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || e <= s {
		return 0, 0, 0, false
	}
	return g, s, e, true
}

type genCandidate struct {
	key        string
	gen        uint64
	start, end int64
	info       generation.Info
	verified   bool
	bad        bool
}

// rebuildGenerations restores missing generation-index records of h from
// the generation objects (see the comment at the top of this file).
func (c *Core) rebuildGenerations(ctx context.Context, h *head, rep *RebuildReport) error {
	if c.cfg.ObjectStore == nil {
		return nil
	}
	gaps, named, err := c.genGaps(ctx, h)
	if err != nil || len(gaps) == 0 {
		return err
	}
	rep.GenGaps = len(gaps)
	journal, err := c.meta.RangeScan(ctx, retirePrefix(h.ID), retirePrefix(h.ID)+"\xff", 0)
	if err != nil {
		return err
	}
	retired := map[string]bool{}
	for _, r := range journal {
		rr, err := decodeRetire(r.Value)
		if err != nil {
			return err
		}
		retired[rr.ObjectKey] = true
	}
	var cands []*genCandidate
	for oi, err := range c.cfg.ObjectStore.List(ctx, genObjectPrefix(h.ID)) {
		if err != nil {
			return err
		}
		gen, s, e, ok := parseGenObjectKey(h.ID, oi.Key)
		if !ok || named[oi.Key] || retired[oi.Key] || gen == 0 || gen >= h.NextGen {
			continue
		}
		for _, g := range gaps {
			if s < g.end && g.start < e {
				cands = append(cands, &genCandidate{key: oi.Key, gen: gen, start: s, end: e})
				break
			}
		}
	}
	rep.GenScanned = len(cands)
	var errs []error
	for _, g := range gaps {
		fill, err := c.tileGap(ctx, h.ID, g, cands)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n, err := c.writeRestoredGens(ctx, h, g, fill)
		rep.GenRebuilt += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// tileGap chooses verified candidates that tile g exactly (each starting
// where the previous ended; the first may start below a leading gap). An
// object failing verification is dropped and the choice made again.
func (c *Core) tileGap(ctx context.Context, id ID, g genGap, cands []*genCandidate) ([]*genCandidate, error) {
	sorted := append([]*genCandidate(nil), cands...)
	// Longest first: fewer, larger records.
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].end != sorted[j].end {
			return sorted[i].end > sorted[j].end
		}
		return sorted[i].gen > sorted[j].gen
	})
	for attempt := 0; attempt <= len(sorted); attempt++ {
		dead := map[int64]bool{}
		var solve func(cur int64, first bool) ([]*genCandidate, bool)
		solve = func(cur int64, first bool) ([]*genCandidate, bool) {
			if cur == g.end {
				return nil, true
			}
			if dead[cur] {
				return nil, false
			}
			for _, cd := range sorted {
				if cd.bad || cd.end <= cur || cd.end > g.end {
					continue
				}
				if !(cd.start == cur || first && g.leading && cd.start < cur) {
					continue
				}
				if rest, ok := solve(cd.end, false); ok {
					return append([]*genCandidate{cd}, rest...), true
				}
			}
			dead[cur] = true
			return nil, false
		}
		fill, ok := solve(g.start, true)
		if !ok {
			return nil, fmt.Errorf("generation offsets [%d, %d) of %v: the stored generation objects do not tile the gap", g.start, g.end, id)
		}
		allGood := true
		for _, cd := range fill {
			if cd.verified {
				continue
			}
			if err := c.verifyCandidate(ctx, id, cd); err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, objectstore.ErrNotFound) {
					return nil, err
				}
				c.log.Warn("rebuild-index: generation object refused", "stream", id, "key", cd.key, "err", err)
				cd.bad, allGood = true, false
				break
			}
		}
		if allGood {
			return fill, nil
		}
	}
	return nil, fmt.Errorf("generation offsets [%d, %d) of %v: no verified tiling", g.start, g.end, id)
}

// verifyCandidate reads cd's object whole and checks it is what its key says.
func (c *Core) verifyCandidate(ctx context.Context, id ID, cd *genCandidate) error {
	obj, _, err := c.cfg.ObjectStore.Get(ctx, cd.key)
	if err != nil {
		return err
	}
	info, kind, err := generation.VerifyKind(obj)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if kind != generation.KindLossless {
		// A lossy view (compaction) must never become a lossless source.
		return fmt.Errorf("%w: object %s is a view (kind %d), not a lossless generation", ErrCorrupt, cd.key, kind)
	}
	if info.Stream != uint64(id) || info.Generation != cd.gen || info.Start != cd.start || info.End != cd.end {
		return fmt.Errorf("%w: object %s holds stream %d generation %d [%d, %d)", ErrCorrupt, cd.key, info.Stream, info.Generation, info.Start, info.End)
	}
	cd.info, cd.verified = info, true
	return nil
}

// writeRestoredGens writes the records of fill (which tiles g) create-only
// and reports how many it wrote.
func (c *Core) writeRestoredGens(ctx context.Context, h *head, g genGap, fill []*genCandidate) (int, error) {
	var sum int64
	for _, cd := range fill {
		sum += cd.info.Bytes
	}
	// Cumulative sizes come from the neighbours: the record after the gap
	// (or the head) fixes the end, the record before it the start; when
	// both are known they must agree with the objects' sizes.
	cumEnd := g.cumEnd
	switch {
	case cumEnd < 0 && g.cumStart >= 0 && fill[0].start == g.start:
		cumEnd = g.cumStart + sum
	case cumEnd < 0:
		return 0, fmt.Errorf("generation offsets [%d, %d) of %v: cumulative size at the gap is unknown", g.start, g.end, h.ID)
	case g.cumStart >= 0 && fill[0].start == g.start && g.cumStart+sum != cumEnd:
		return 0, fmt.Errorf("generation offsets [%d, %d) of %v: objects hold %d payload bytes, the index says %d", g.start, g.end, h.ID, sum, cumEnd-g.cumStart)
	}
	descs := make([]descriptor, len(fill))
	cum := cumEnd
	for i := len(fill) - 1; i >= 0; i-- {
		cd := fill[i]
		descs[i] = genDescriptor(genTarget{Key: cd.key, Info: cd.info}, cum, []lineage{lineageLost})
		cum -= cd.info.Bytes
	}
	written := 0
	for _, d := range descs {
		key := genKey(h.ID, d.End)
		ok, err := c.putRecordCreateOnly(ctx, key, d.encodeIndexRecord())
		if err != nil {
			return written, err
		}
		if !ok {
			continue // a record appeared meanwhile: it covers the range
		}
		// Retired meanwhile (the orphan sweep journals unnamed objects)?
		// A real retirement wins: take the record back.
		gt, _ := decodeGenTarget(d.Parts[0].Target)
		if rec, err := c.meta.Get(ctx, retireKey(h.ID, gt.Key)); err == nil {
			if rr, derr := decodeRetire(rec.Value); derr == nil && rr.End != orphanEnd {
				if cur, err := c.meta.Get(ctx, key); err == nil {
					_ = c.meta.Delete(ctx, key, cur.Version)
				}
				continue
			}
		} else if !errors.Is(err, metadata.ErrKeyNotFound) {
			return written, err
		}
		written++
		c.log.Info("rebuild-index restored a generation record", "stream", h.ID, "key", gt.Key, "start", d.Start, "end", d.End)
	}
	return written, nil
}

// putRecordCreateOnly writes key = value if it does not exist. It reports
// whether this call (or an earlier attempt of it whose response was lost)
// created the record; an unknown outcome is settled by reading it back.
func (c *Core) putRecordCreateOnly(ctx context.Context, key string, value []byte) (bool, error) {
	for attempt := 0; ; attempt++ {
		_, err := c.meta.Put(ctx, key, value, metadata.NotExists)
		switch metadata.Classify(err) {
		case metadata.Applied:
			return true, nil
		case metadata.NotApplied:
			return false, err
		}
		rec, gerr := c.meta.Get(ctx, key)
		switch {
		case gerr == nil:
			return string(rec.Value) == string(value), nil
		case errors.Is(gerr, metadata.ErrKeyNotFound) && attempt < 5:
			if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
				return false, err
			}
		default:
			return false, fmt.Errorf("writing %s: outcome unknown: %w (proof: %w)", key, err, gerr)
		}
	}
}
