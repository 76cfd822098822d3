package stream

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// RebuildReport says what RebuildIndex did.
type RebuildReport struct {
	// Republished is how many of the head's Pending commits were written to
	// the index again.
	Republished int
	// Gaps is how many offset ranges below IndexedThrough had no index entry.
	Gaps int
	// Scanned is how many runs of the stream the providers reported.
	Scanned int
	// Rebuilt is how many index entries were written from scanned runs.
	Rebuilt int
	// GenGaps is how many ranges of [Start, GenIndexedThrough) had no
	// generation-index record; GenScanned how many unnamed generation
	// objects overlapped them; GenRebuilt how many records were restored
	// from verified objects.
	GenGaps, GenScanned, GenRebuilt int
}

// RebuildIndex repairs stream id's offset index. It republishes the head's
// Pending commits (the tail of the commit chain the head itself carries),
// restores lost generation-index records from the generation objects
// (rebuild_gen.go), then looks for offsets below the head's IndexedThrough that no index entry
// covers; if there are any, it asks every provider that can describe its
// stored runs (provider.Scanner) for this stream's runs and rebuilds the
// missing entries from them.
//
// Which scanned run is the committed one at an offset follows from how runs
// are written: offsets are reassigned only after the runs holding them were
// definitely not committed (a WAL failure rewinds a session's projection to
// the committed end; a new session starts at the committed end), and every
// reassignment goes to a run with a higher (epoch, commit number). So the
// committed run at an offset is the covering run with the highest (epoch,
// commit); a run beaten at any of its offsets was not committed. The rebuilt
// entries must tile each gap exactly, or RebuildIndex reports the gap as
// unrecoverable and writes nothing for it.
func (c *Core) RebuildIndex(ctx context.Context, id ID) (RebuildReport, error) {
	var rep RebuildReport
	h, _, err := c.readHead(ctx, id)
	if err != nil {
		return rep, err
	}
	for _, d := range h.Pending {
		if _, err := c.meta.Put(ctx, indexKey(id, d.End), d.encodeIndexRecord(), metadata.AnyVersion); err != nil {
			return rep, err
		}
		rep.Republished++
	}
	for _, d := range h.GenPending {
		// Create-only (as publishGenIndex writes them): a record already
		// there is this one or a merge that replaced it.
		if _, err := c.meta.Put(ctx, genKey(id, d.End), d.encodeIndexRecord(), metadata.NotExists); err != nil &&
			metadata.Classify(err) != metadata.Conflict {
			return rep, err
		}
		rep.Republished++
	}
	if err := c.rebuildGenerations(ctx, h, &rep); err != nil {
		return rep, fmt.Errorf("generation index: %w", err)
	}
	gaps, before, err := c.indexGaps(ctx, h)
	if err != nil || len(gaps) == 0 {
		return rep, err
	}
	rep.Gaps = len(gaps)
	var cands []descriptor
	for _, p := range c.providers() {
		sc, ok := p.(provider.Scanner)
		if !ok {
			continue
		}
		err := sc.ScanRuns(ctx, func(run provider.Run, t provider.Target) error {
			if run.Stream != uint64(id) || run.End() <= h.Start || run.Start >= h.IndexedThrough {
				return nil
			}
			rep.Scanned++
			d := descriptor{Start: run.Start, End: run.End(), Entries: uint32(len(run.Entries)),
				MinTS: 1<<63 - 1, MaxTS: -1 << 63, Epoch: run.Epoch, Token: run.Token,
				FirstCommit: run.Commit, Commit: run.Commit, Provider: p.Name(),
				Parts: []part{{Start: run.Start, Target: append([]byte(nil), t...)}}}
			for _, e := range run.Entries {
				d.Bytes += int64(len(e.Payload))
				d.MinTS, d.MaxTS = min(d.MinTS, e.Timestamp), max(d.MaxTS, e.Timestamp)
			}
			cands = append(cands, d)
			return nil
		})
		if err != nil {
			return rep, err
		}
	}
	// Highest (epoch, commit) first; a run is accepted only if no
	// higher-ranked accepted run overlaps it.
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].Epoch != cands[j].Epoch {
			return cands[i].Epoch > cands[j].Epoch
		}
		return cands[i].Commit > cands[j].Commit
	})
	var accepted []descriptor
	for _, d := range cands {
		overlaps := false
		for _, a := range accepted {
			if d.Start < a.End && a.Start < d.End {
				overlaps = true
				break
			}
		}
		if !overlaps {
			accepted = append(accepted, d)
		}
	}
	sort.Slice(accepted, func(i, j int) bool { return accepted[i].Start < accepted[j].Start })
	var errs []error
	for gi, g := range gaps {
		var fill []descriptor
		next := g.start
		for _, d := range accepted {
			if d.End <= g.start || d.Start >= g.end {
				continue
			}
			if d.Start > next || d.End > g.end {
				break
			}
			fill = append(fill, d)
			next = d.End
		}
		// A run may start before the gap (the entry covering the gap's
		// start was lost together with it) but must end exactly at the gap's
		// end, where the next surviving index entry begins.
		if next != g.end {
			errs = append(errs, fmt.Errorf("offsets [%d, %d) of %v: the stored runs do not tile the gap", g.start, g.end, id))
			continue
		}
		cum := before[gi]
		for _, d := range fill {
			cum += d.Bytes
			d.CumBytes = cum
			if _, err := c.meta.Put(ctx, indexKey(id, d.End), d.encodeIndexRecord(), metadata.AnyVersion); err != nil {
				return rep, err
			}
			rep.Rebuilt++
		}
	}
	return rep, errors.Join(errs...)
}

type offsetGap struct{ start, end int64 }

// indexGaps lists the offset ranges in [max(h.Start, h.GenThrough),
// h.IndexedThrough) that no WAL index entry covers, and for each the
// cumulative payload size before it (from the entry preceding it, or the
// head). Below GenThrough generations serve reads and GC retires the WAL
// entries on purpose: those are not gaps.
func (c *Core) indexGaps(ctx context.Context, h *head) ([]offsetGap, []int64, error) {
	var gaps []offsetGap
	var before []int64
	next, cum := h.Start, h.StartBytes
	if h.GenThrough > h.Start {
		next, cum = h.GenThrough, h.GenCumBytes
	}
	from := indexKey(h.ID, next+1)
	to := indexKey(h.ID, h.IndexedThrough+1)
	for next < h.IndexedThrough {
		recs, err := c.meta.RangeScan(ctx, from, to, 512)
		if err != nil {
			return nil, nil, err
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			d, err := decodeIndexRecord(r.Value)
			if err != nil {
				return nil, nil, err
			}
			if d.Start > next {
				gaps = append(gaps, offsetGap{next, d.Start})
				before = append(before, cum)
			}
			if d.End > next {
				next, cum = d.End, d.CumBytes
			}
		}
		from = recs[len(recs)-1].Key + "\x00"
	}
	if next < h.IndexedThrough {
		gaps = append(gaps, offsetGap{next, h.IndexedThrough})
		before = append(before, cum)
	}
	return gaps, before, nil
}
