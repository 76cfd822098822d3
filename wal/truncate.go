package wal

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/nereusstream/nereus-go/internal/simrt"
)

// TruncatePlan chooses, from the manifest's entries (oldest first, as the
// producer holds them: no read of the store), the record sequence through
// which entries are dropped (Manifest.TruncateThrough); ok false drops
// nothing. It runs on the producer's committer goroutine, once per commit
// attempt, so it must be quick and must not call the producer.
type TruncatePlan func(entries []Entry) (through uint64, ok bool)

// truncReq is one Truncate call waiting for the commit that carries it.
type truncReq struct {
	plan    TruncatePlan
	dropped []Entry // of the latest attempt (committer-owned until done)
	done    chan truncResult
}

type truncResult struct {
	dropped []Entry
	err     error
}

// Truncate drops a prefix of the manifest's entries in the producer's own
// manifest commits, so the producer stays the only writer of its manifest:
// a truncation never races an append's CAS (no re-planning, no extra
// round trip on the append path), and needs no read of the store. The
// request is folded into the next batch commit when segments are on their
// way; on an idle producer it is a commit of its own. Truncate returns the
// entries the landed commit dropped, and those an earlier truncation whose
// outcome was unknown turned out to have dropped (see endTruncs). An error
// means the truncation is not known to have landed: treat its entries as
// still referenced.
func (p *Producer) Truncate(ctx context.Context, plan TruncatePlan) ([]Entry, error) {
	r := &truncReq{plan: plan, done: make(chan truncResult, 1)}
	p.rt.Wait(func() bool {
		return len(p.truncQ) < cap(p.truncQ) || simrt.IsClosed(p.committerDone) || ctx.Err() != nil
	})
	room, stopped := len(p.truncQ) < cap(p.truncQ), simrt.IsClosed(p.committerDone)
	select {
	case p.truncQ <- r:
		p.truncSent.Add(1)
	case <-simrt.Only(p.rt, p.committerDone, !room):
		return nil, ErrHalted
	case <-simrt.Only(p.rt, ctx.Done(), !room && !stopped):
		return nil, ctx.Err()
	}
	p.rt.Wait(func() bool { return len(r.done) > 0 || simrt.IsClosed(p.committerDone) || ctx.Err() != nil })
	answered, stopped := len(r.done) > 0, simrt.IsClosed(p.committerDone)
	select {
	case res := <-r.done:
		return res.dropped, res.err
	case <-simrt.Only(p.rt, p.committerDone, !answered):
		select {
		case res := <-r.done:
			return res.dropped, res.err
		default:
			return nil, ErrHalted
		}
	case <-simrt.Only(p.rt, ctx.Done(), !answered && !stopped):
		return nil, ctx.Err()
	}
}

// pipelineIdle reports whether no Append is pending and no segment is being
// uploaded, i.e. no batch commit is coming that a truncation could join.
func (p *Producer) pipelineIdle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending) == 0 && p.uploading == 0
}

// drainTruncs takes the queued truncation requests without blocking.
func (p *Producer) drainTruncs() {
	for {
		select {
		case r := <-p.truncQ:
			p.truncs = append(p.truncs, r)
		default:
			return
		}
	}
}

// planTruncs applies the held truncation requests to work, the manifest a
// commit attempt is about to write, before that attempt's new entries are
// appended (so a plan never sees, and never drops, the batch's own entries).
func (p *Producer) planTruncs(work *Manifest) error {
	for _, r := range p.truncs {
		r.dropped = nil
		entries, err := work.Entries()
		if err != nil {
			return err
		}
		through, ok := r.plan(entries)
		if !ok {
			continue
		}
		for _, e := range entries {
			if e.Sequence+e.RangeSize()-1 > through {
				break
			}
			r.dropped = append(r.dropped, e)
			p.truncPlanned[e.Sequence] = e
		}
		if _, err := work.TruncateThrough(through); err != nil {
			return fmt.Errorf("nereus/wal: truncation: %w", err)
		}
	}
	return nil
}

// commitTruncation commits the held truncation requests alone. A failure
// does not halt the producer: nothing of an Append rides on it, and the next
// batch commit re-reads the manifest if the failure left the cached version
// behind (a free re-plan at our epoch).
func (p *Producer) commitTruncation() {
	p.drainTruncs()
	if err := p.haltedErr(); err != nil {
		p.failTruncs(err)
		return
	}
	if _, after, _, err := p.commitEntries(nil); err != nil {
		p.failTruncs(err)
	} else {
		p.resolveTruncs()
		if after != nil {
			p.halt(after)
		}
	}
}

func (p *Producer) resolveTruncs() {
	for _, r := range p.truncs {
		r.done <- truncResult{dropped: r.dropped}
	}
	clear(p.truncs)
	p.truncs = p.truncs[:0]
}

func (p *Producer) failTruncs(err error) {
	for _, r := range p.truncs {
		r.done <- truncResult{err: err}
	}
	clear(p.truncs)
	p.truncs = p.truncs[:0]
}

// Reporting what a truncation dropped, exactly.
//
// The caller deletes or keeps the segments a landed truncation dropped, so
// an entry that leaves the manifest unreported is a segment nobody deletes
// until a restart rediscovers it. Each attempt of a commit re-plans on the
// manifest it writes over; after an attempt whose outcome was unknown
// applied, the re-read manifest no longer holds what it dropped, and a
// re-plan cannot see it. So the report is proven from the manifest
// instead: at our epoch only this producer drops entries, and only a
// prefix, so an entry some attempt planned to drop is gone iff its
// sequence is below the final manifest's first remaining one. When a
// commit fails after an unknown attempt, what its attempts planned is kept
// (truncMaybe) and settled by the next truncation that lands. (A
// Collector truncating the same log at our epoch would have its drops of
// planned entries reported here too; Object WAL logs run none.)

// beginTruncs starts a commit carrying truncation requests.
func (p *Producer) beginTruncs() {
	p.truncPlanned = make(map[uint64]Entry, len(p.truncMaybe))
	for _, e := range p.truncMaybe {
		p.truncPlanned[e.Sequence] = e
	}
}

// endTruncs settles the requests' dropped entries once the commit ended:
// landed says the manifest p.m is its final state; otherwise unknown says an
// attempt may have applied.
func (p *Producer) endTruncs(landed, unknown bool) {
	planned := p.truncPlanned
	p.truncPlanned = nil
	if !landed {
		if unknown {
			p.truncMaybe = sortedEntries(planned)
		}
		return
	}
	p.truncMaybe = nil
	first := p.m.firstLive()
	reported := make(map[uint64]bool, len(planned))
	for _, r := range p.truncs {
		kept := r.dropped[:0]
		for _, e := range r.dropped {
			if e.Sequence < first && !reported[e.Sequence] {
				reported[e.Sequence] = true
				kept = append(kept, e)
			}
		}
		r.dropped = kept
	}
	var missed []Entry
	for _, e := range sortedEntries(planned) {
		if e.Sequence < first && !reported[e.Sequence] {
			missed = append(missed, e)
		}
	}
	if len(missed) > 0 && len(p.truncs) > 0 {
		// Dropped by an earlier attempt whose outcome was unknown.
		p.log.Info("truncation attempt with unknown outcome had landed", "entries", len(missed))
		p.truncs[0].dropped = append(missed, p.truncs[0].dropped...)
	}
}

func sortedEntries(m map[uint64]Entry) []Entry {
	out := make([]Entry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Sequence, b.Sequence) })
	return out
}
