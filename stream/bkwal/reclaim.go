package bkwal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/stream/provider"
)

var _ provider.Reclaimer = (*Provider)(nil)

// Physical GC of SETTLED ledgers (ledgers that hold committed runs).
//
// A ledger belongs to one stream and one session, so it is retired whole:
// once the core judges its last committed run retired — trimmed, served by
// a published generation, or of a deleted stream — and no reader
// protection needs it, and that has held for the grace period, the ledger
// is deleted through the namespace (its proof and the ledger's owner tag
// re-checked, conditional on the ledger metadata's version), then its
// record. Only this writer identity's ledgers are reclaimed here; a
// ledger is never deleted on a guess (an unreadable record or ledger keeps
// it).

type reclaimState struct {
	mu        sync.Mutex
	firstDead map[int64]time.Time
	ends      map[int64]int64 // committed ends learned from v1 records' ledgers
}

// Reclaim implements provider.Reclaimer.
//
// A full pass judges every settled ledger; a due pass (opts.DueOnly) only
// the ledgers an earlier pass found retired whose grace has ended by
// opts.Now, judged again with fresh verdicts exactly as a full pass would
// (a due pass that finds none lists nothing). The report's NextDue is the
// earliest grace end still ahead, so the core deletes a ledger when its
// grace ends instead of at the first full pass after that (which came up
// to a GC interval later: docs/notes/issue-9.md, session 16).
func (p *Provider) Reclaim(ctx context.Context, judge provider.Judge, opts provider.ReclaimOptions) (rep provider.ReclaimReport, err error) {
	defer func() { rep.NextDue = p.nextDue(opts) }()
	if opts.DueOnly && !p.anyDue(opts) {
		return rep, nil
	}
	if !opts.DueOnly {
		p.pruneHints() // hints of streams the core stopped hinting (rollage.go)
	}
	if !opts.DryRun && !opts.DueOnly {
		// Idle current ledgers are sealed first (idle.go); they settle
		// asynchronously and are judged by a later pass.
		if _, err := p.sealIdle(ctx, judge); err != nil {
			rep.Errors++
			p.log.Warn("bkwal: idle seal skipped", "err", err)
		}
		// Current ledgers whose first run is retired roll over at their
		// next run (retire.go).
		if _, err := p.markRetiredPrefixes(ctx, judge); err != nil {
			rep.Errors++
			p.log.Warn("bkwal: retired-prefix rollover skipped", "err", err)
		}
	}
	prefix := p.writerPrefix(p.cfg.WriterID)
	recs, err := p.cfg.Meta.RangeScan(ctx, prefix, prefix+"\xff", 0)
	if err != nil {
		return rep, fmt.Errorf("nereus/bkwal: listing ledgers: %w", err)
	}
	type cand struct {
		rec     ledgerRecord
		key     string
		version int64
	}
	var cands []cand
	var runs []provider.RunRef
	listed := make(map[int64]bool, len(recs))
	for _, kv := range recs {
		rec, err := decodeLedgerRecord(kv.Value)
		if err != nil {
			rep.Errors++
			continue // never act on a record we cannot read
		}
		if rec.state != stateSettled || !rec.committed {
			continue // not settled: Recover or finalization owns it
		}
		listed[rec.ledger] = true
		if opts.DueOnly && !p.graceEnded(rec.ledger, opts) {
			continue
		}
		end := rec.committedEnd
		if end < 0 {
			if end, err = p.committedEndOf(ctx, rec); err != nil {
				rep.Errors++
				p.log.Warn("bkwal: cannot tell a settled ledger's end offset; keeping it", "ledger", rec.ledger, "err", err)
				continue
			}
		}
		cands = append(cands, cand{rec: rec, key: kv.Key, version: int64(kv.Version)})
		runs = append(runs, provider.RunRef{Stream: rec.stream, Epoch: rec.epoch, Token: rec.token, End: end, Committed: true})
	}
	if !opts.DueOnly {
		p.forgetUnlisted(listed)
	}
	rep.Units = len(cands)
	if len(cands) == 0 {
		return rep, nil
	}
	verdicts, err := judge(ctx, runs)
	if err != nil {
		return rep, fmt.Errorf("nereus/bkwal: judging ledgers: %w", err)
	}
	// The grace starts after the judge: a trim it saw may have committed
	// after opts.Now.
	judgedAt := opts.JudgedAt()
	p.reclaim.mu.Lock()
	if p.reclaim.firstDead == nil {
		p.reclaim.firstDead = map[int64]time.Time{}
	}
	p.reclaim.mu.Unlock()
	for i, cd := range cands {
		unit := fmt.Sprintf("ledger %d", cd.rec.ledger)
		p.reclaim.mu.Lock()
		if verdicts[i] != provider.RunRetired {
			delete(p.reclaim.firstDead, cd.rec.ledger)
			p.reclaim.mu.Unlock()
			addPending(&rep, unit, fmt.Sprintf("stream %016x offsets below %d still needed", cd.rec.stream, runs[i].End))
			continue
		}
		first, ok := p.reclaim.firstDead[cd.rec.ledger]
		if !ok {
			first = judgedAt
			p.reclaim.firstDead[cd.rec.ledger] = first
			p.log.Debug("bkwal: ledger retired, grace starts", "ledger", cd.rec.ledger, "stream", cd.rec.stream, "end", runs[i].End)
		}
		p.reclaim.mu.Unlock()
		if wait := first.Add(opts.Grace).Sub(judgedAt); wait > 0 {
			addPending(&rep, unit, fmt.Sprintf("retired; grace period ends in %s", wait.Round(time.Millisecond)))
			continue
		}
		if opts.DryRun {
			addPending(&rep, unit, "retired, grace passed (dry run: kept)")
			continue
		}
		info, err := p.cfg.Ledgers.ReadLedgerMetadata(ctx, cd.rec.ledger)
		switch {
		case errors.Is(err, bookkeeper.ErrNoSuchLedger):
			// Deleted already (an earlier pass lost its record delete).
		case err != nil:
			rep.Errors++
			p.log.Warn("bkwal: reading a retired ledger's metadata failed", "ledger", cd.rec.ledger, "err", err)
			continue
		default:
			if err := p.deleteLedger(ctx, cd.rec.ledger, info.Version); err != nil {
				rep.Errors++
				p.log.Warn("bkwal: deleting a retired ledger failed", "ledger", cd.rec.ledger, "err", err)
				continue
			}
		}
		if err := p.deleteSettled(ctx, cd.key); err != nil {
			rep.Errors++
			continue
		}
		p.reclaim.mu.Lock()
		delete(p.reclaim.firstDead, cd.rec.ledger)
		delete(p.reclaim.ends, cd.rec.ledger)
		p.reclaim.mu.Unlock()
		p.readers.drop(cd.rec.ledger)
		rep.Deleted++
		rep.DeletedUnits = append(rep.DeletedUnits, provider.PendingUnit{Unit: unit,
			Reason: fmt.Sprintf("stream %016x retired every offset below %d", cd.rec.stream, runs[i].End)})
		p.log.Info("gc deleted ledger", "ledger", cd.rec.ledger, "stream", cd.rec.stream, "end", runs[i].End,
			"retired_for", judgedAt.Sub(first).Round(time.Millisecond))
	}
	return rep, nil
}

// nextDue is the earliest end of a grace period after opts.Now among the
// ledgers last judged retired (zero if none).
func (p *Provider) nextDue(opts provider.ReclaimOptions) time.Time {
	p.reclaim.mu.Lock()
	defer p.reclaim.mu.Unlock()
	var due time.Time
	for _, first := range p.reclaim.firstDead {
		if end := first.Add(opts.Grace); end.After(opts.Now) && (due.IsZero() || end.Before(due)) {
			due = end
		}
	}
	return due
}

// anyDue reports whether some ledger's grace has ended by opts.Now.
func (p *Provider) anyDue(opts provider.ReclaimOptions) bool {
	p.reclaim.mu.Lock()
	defer p.reclaim.mu.Unlock()
	for _, first := range p.reclaim.firstDead {
		if !first.Add(opts.Grace).After(opts.Now) {
			return true
		}
	}
	return false
}

// graceEnded reports whether the ledger was found retired at least
// opts.Grace before opts.Now.
func (p *Provider) graceEnded(ledger int64, opts provider.ReclaimOptions) bool {
	p.reclaim.mu.Lock()
	defer p.reclaim.mu.Unlock()
	first, ok := p.reclaim.firstDead[ledger]
	return ok && !first.Add(opts.Grace).After(opts.Now)
}

// forgetUnlisted drops the grace clocks of ledgers a full listing no
// longer shows settled (their record went another way), so NextDue names
// no ledger that is not there.
func (p *Provider) forgetUnlisted(listed map[int64]bool) {
	p.reclaim.mu.Lock()
	defer p.reclaim.mu.Unlock()
	for l := range p.reclaim.firstDead {
		if !listed[l] {
			delete(p.reclaim.firstDead, l)
		}
	}
}

func addPending(rep *provider.ReclaimReport, unit, reason string) {
	rep.PendingCount++
	if len(rep.Pending) < 100 {
		rep.Pending = append(rep.Pending, provider.PendingUnit{Unit: unit, Reason: reason})
	}
}

// committedEndOf learns a v1 settled ledger's end offset from its last
// entry (the end of the last run in it, committed or not: an over-estimate
// only keeps the ledger longer).
func (p *Provider) committedEndOf(ctx context.Context, rec ledgerRecord) (int64, error) {
	p.reclaim.mu.Lock()
	if end, ok := p.reclaim.ends[rec.ledger]; ok {
		p.reclaim.mu.Unlock()
		return end, nil
	}
	p.reclaim.mu.Unlock()
	if rec.lastEntry < 0 {
		return 0, fmt.Errorf("ledger %d has no entries recorded", rec.ledger)
	}
	r, err := p.reader(ctx, rec.ledger)
	if err != nil {
		return 0, err
	}
	ents, err := r.Read(ctx, rec.lastEntry, rec.lastEntry)
	if err != nil {
		return 0, err
	}
	if len(ents) != 1 {
		return 0, fmt.Errorf("ledger %d: reading entry %d returned %d entries", rec.ledger, rec.lastEntry, len(ents))
	}
	h, _, err := parseEntryFrame(ents[0].Payload)
	if err != nil {
		return 0, err
	}
	end := h.offset + int64(h.recordCount)
	p.reclaim.mu.Lock()
	if p.reclaim.ends == nil {
		p.reclaim.ends = map[int64]int64{}
	}
	p.reclaim.ends[rec.ledger] = end
	p.reclaim.mu.Unlock()
	return end, nil
}
