package objectwal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/stream/provider"
	"github.com/nereusstream/nereus-go/wal"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

var _ provider.Reclaimer = (*Provider)(nil)

// Physical GC of segments that hold committed runs.
//
// Truncation (objectwal.go) deletes a segment none of whose runs was
// committed as soon as its manifest entry goes. A segment with committed
// runs is kept ("retained") until the core judges every one of them
// retired — trimmed, served by a published generation, or of a deleted
// stream — and no reader protection needs it; Reclaim deletes it once it
// has been found so for the grace period.
//
// Where the retained set comes from:
//   - in memory, from this incarnation's truncations: each retained
//     segment with the committed runs the core released (exact; no lookup);
//   - after a restart, from a listing of this log's segments: every segment
//     not in the live manifest and not written by a producer of this
//     process that is still running is read back and its runs (from their
//     self-describing headers) are judged with a commit lookup. The listing
//     only nominates; the judge's verdict is the proof.
//
// A segment in the live manifest is never touched here: its runs are not
// all settled (truncation handles it), and a live producer's uploads that
// are not yet in the manifest are skipped by their run ID.

// retainedSegment is one segment kept for its committed runs.
type retainedSegment struct {
	runs []provider.RunRef
	size int64
	// rediscovered segments' runs came from the segment's own headers; a
	// run judged needed once is committed (Committed set) from then on.
	rediscovered bool
}

// relistEvery is how often (in passes) the log is listed again to pick up
// segments the in-memory set does not know (an earlier incarnation's).
const relistEvery = 60

// maxPendingShown bounds the pending units a report lists.
const maxPendingShown = 100

// retain records location as retained with its committed runs. Called
// with p.mu held.
func (p *Provider) retain(location string, runs []provider.RunRef, size int64) {
	rs := &retainedSegment{runs: runs, size: size}
	for _, r := range runs {
		if r.Stream == ^uint64(0) {
			// A committed run of unknown identity: judge the segment from
			// its own bytes instead.
			rs = &retainedSegment{size: size, rediscovered: true}
			p.retained[location] = rs
			p.rediscoverQ = append(p.rediscoverQ, location)
			return
		}
	}
	p.retained[location] = rs
}

// Reclaim implements provider.Reclaimer.
func (p *Provider) Reclaim(ctx context.Context, judge provider.Judge, opts provider.ReclaimOptions) (rep provider.ReclaimReport, err error) {
	defer func() { rep.NextDue = p.nextDue(opts) }()
	p.mu.Lock()
	var relist bool
	var queue []string
	if !opts.DueOnly {
		// A due pass only re-judges units already found retired: listing
		// and reading back are the full passes' job.
		p.reclaimPass++
		relist = p.reclaimPass%relistEvery == 1
		queue = p.rediscoverQ
		p.rediscoverQ = nil
	}
	if relist {
		// Found again by this relisting if still there and unreadable.
		clear(p.unreadable)
	}
	p.mu.Unlock()
	if relist {
		found, err := p.unknownSegments(ctx)
		if err != nil {
			return rep, fmt.Errorf("objectwal: listing segments: %w", err)
		}
		queue = append(queue, found...)
	}
	for _, loc := range queue {
		if err := p.rediscover(ctx, loc); err != nil {
			rep.Errors++
			if ctx.Err() == nil {
				continue // noted as unreadable (logged, counted, kept)
			}
			p.log.Warn("objectwal: reading a retained segment back failed", "segment", loc, "err", err)
		}
	}
	p.reportUnreadable(&rep)

	p.mu.Lock()
	locs := make([]string, 0, len(p.retained))
	// all is sized for every retained run before it is filled: appended
	// from empty it was re-grown ~log2(runs) times per pass, with one
	// run per committed append whose segment is still retained (~4 % of
	// the window's allocated bytes in corebench at 10,000 streams).
	nruns := 0
	for _, rs := range p.retained {
		nruns += len(rs.runs)
	}
	all := make([]provider.RunRef, 0, nruns)
	spans := make([][2]int, 0, len(p.retained))
	for loc, rs := range p.retained {
		if rs.rediscovered && rs.runs == nil {
			continue // not read back yet
		}
		if opts.DueOnly {
			if first, ok := p.firstDead[loc]; !ok || first.Add(opts.Grace).After(opts.Now) {
				continue
			}
		}
		locs = append(locs, loc)
		spans = append(spans, [2]int{len(all), len(all) + len(rs.runs)})
		all = append(all, rs.runs...)
	}
	p.mu.Unlock()
	rep.Units = len(locs)
	if len(locs) == 0 {
		return rep, nil
	}
	verdicts, err := judge(ctx, all)
	if err == nil && len(verdicts) != len(all) {
		err = fmt.Errorf("%d verdicts for %d runs", len(verdicts), len(all))
	}
	if err != nil {
		return rep, fmt.Errorf("objectwal: judging retained runs: %w", err)
	}
	// The grace starts after the judge: a trim it saw may have committed
	// after opts.Now.
	judgedAt := opts.JudgedAt()
	type doomed struct {
		loc  string
		size int64
	}
	var del []doomed
	p.mu.Lock()
	for i, loc := range locs {
		rs := p.retained[loc]
		if rs == nil {
			continue
		}
		var needed *provider.RunRef
		for j := spans[i][0]; j < spans[i][1]; j++ {
			// Only a RunRetired verdict is proof; anything else keeps.
			if verdicts[j] != provider.RunRetired {
				k := j - spans[i][0]
				if k < len(rs.runs) {
					rs.runs[k].Committed = true // a needed run is a committed one
					needed = &rs.runs[k]
				}
				break
			}
		}
		if needed != nil {
			delete(p.firstDead, loc)
			p.addPending(&rep, loc, rs.size, fmt.Sprintf("holds offsets [%d, %d) of stream %016x, still needed", needed.Start, needed.End, needed.Stream))
			continue
		}
		first, ok := p.firstDead[loc]
		if !ok {
			first = judgedAt
			p.firstDead[loc] = first
		}
		if wait := first.Add(opts.Grace).Sub(judgedAt); wait > 0 {
			p.addPending(&rep, loc, rs.size, fmt.Sprintf("every run retired; grace period ends in %s", wait.Round(time.Millisecond)))
			rep.GraceBytes += rs.size
			continue
		}
		if opts.DryRun {
			p.addPending(&rep, loc, rs.size, "every run retired, grace passed (dry run: kept)")
			continue
		}
		del = append(del, doomed{loc, rs.size})
	}
	p.mu.Unlock()
	sort.Slice(del, func(i, j int) bool { return del[i].loc < del[j].loc })
	for _, d := range del {
		err := p.cfg.Store.Delete(ctx, d.loc, nil)
		if err != nil && !errors.Is(err, objectstore.ErrNotFound) {
			rep.Errors++
			p.log.Warn("objectwal: deleting a retired segment failed", "segment", d.loc, "err", err)
			continue
		}
		p.mu.Lock()
		delete(p.retained, d.loc)
		delete(p.firstDead, d.loc)
		p.mu.Unlock()
		rep.Deleted++
		rep.DeletedBytes += d.size
		rep.DeletedUnits = append(rep.DeletedUnits, provider.PendingUnit{Unit: d.loc, Bytes: d.size, Reason: "every run retired"})
		p.log.Info("gc deleted segment", "segment", d.loc, "bytes", d.size, "reason", "every committed run retired")
	}
	return rep, nil
}

// nextDue is the earliest end of a grace period after opts.Now among the
// segments last judged retired (zero if none).
func (p *Provider) nextDue(opts provider.ReclaimOptions) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var due time.Time
	for _, first := range p.firstDead {
		if end := first.Add(opts.Grace); end.After(opts.Now) && (due.IsZero() || end.Before(due)) {
			due = end
		}
	}
	return due
}

func (p *Provider) addPending(rep *provider.ReclaimReport, loc string, size int64, reason string) {
	rep.PendingCount++
	rep.PendingBytes += size
	if len(rep.Pending) < maxPendingShown {
		rep.Pending = append(rep.Pending, provider.PendingUnit{Unit: loc, Bytes: size, Reason: reason})
	}
}

// unknownSegments lists this log's segments that the in-memory set does
// not track, are not in the live manifest, and were not written by a
// producer of this process that is still running.
func (p *Provider) unknownSegments(ctx context.Context) ([]string, error) {
	m, _, ok, err := p.manifest.Load(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	if ok {
		entries, err := m.Entries()
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			live[e.Location] = true
		}
	}
	prefix := p.cfg.Prefix + "/seg/"
	var out []string
	for info, err := range p.cfg.Store.List(ctx, prefix) {
		if err != nil && (info.Key == "" || ctx.Err() != nil) {
			return nil, err // the listing itself failed
		}
		run, _, _ := strings.Cut(strings.TrimPrefix(info.Key, prefix), "/")
		p.mu.Lock()
		skip := live[info.Key] || p.liveRuns[run] || p.retained[info.Key] != nil || p.committed[info.Key] != nil || p.outstanding[info.Key] > 0
		if !skip && err == nil {
			p.retained[info.Key] = &retainedSegment{size: info.Size, rediscovered: true}
		}
		p.mu.Unlock()
		switch {
		case skip:
		case err != nil:
			// This segment alone cannot even be listed: skip it (kept, its
			// runs unknown) and go on with the others.
			p.noteUnreadable(ctx, "reclaim", info.Key, 0, err)
		default:
			out = append(out, info.Key)
		}
	}
	return out, nil
}

// unreadableSegment is a segment of this log that reclaim could not read
// (reported as pending until a relisting finds it readable or gone).
type unreadableSegment struct {
	size   int64
	reason string
}

// noteUnreadable records that segment key could not be read by op
// ("scan": ScanRuns; "reclaim": this log's physical GC, which then also
// reports it as pending): logged, counted in
// nereus.objectwal.unreadable_segments, and kept — it is never deleted on a
// guess.
func (p *Provider) noteUnreadable(ctx context.Context, op, key string, size int64, err error) {
	p.unreadableSegs.Add(ctx, 1, metric.WithAttributes(attribute.String("op", op)))
	p.log.Warn("objectwal: segment cannot be read; skipped and kept", "op", op, "segment", key, "err", err)
	if op != "reclaim" {
		return
	}
	p.mu.Lock()
	p.unreadable[key] = unreadableSegment{size: size, reason: err.Error()}
	p.mu.Unlock()
}

// reportUnreadable adds the segments reclaim could not read to rep's
// pending units, in key order.
func (p *Provider) reportUnreadable(rep *provider.ReclaimReport) {
	p.mu.Lock()
	for _, k := range slices.Sorted(maps.Keys(p.unreadable)) {
		u := p.unreadable[k]
		p.addPending(rep, k, u.size, "unreadable, kept until it can be read (nothing is deleted without proof): "+u.reason)
	}
	p.mu.Unlock()
}

// rediscover reads a retained segment back and records its runs (to be
// judged with a commit lookup).
func (p *Provider) rediscover(ctx context.Context, loc string) error {
	data, _, err := p.cfg.Store.Get(ctx, loc)
	if errors.Is(err, objectstore.ErrNotFound) {
		p.mu.Lock()
		delete(p.retained, loc)
		p.mu.Unlock()
		return nil
	}
	if err == nil {
		var records [][]byte
		var ok bool
		records, _, ok, err = wal.SegmentFrames(data)
		if err == nil {
			return p.recordRediscovered(loc, data, records, ok)
		}
	}
	// Unreadable (corrupt, or the read failed): never delete on a guess.
	// Forget it as retained so the next relisting nominates it and reads it
	// again; until then it is reported as pending.
	p.mu.Lock()
	size := int64(0)
	if rs := p.retained[loc]; rs != nil {
		size = rs.size
		if rs.runs == nil {
			delete(p.retained, loc)
		}
	}
	p.mu.Unlock()
	if ctx.Err() == nil {
		p.noteUnreadable(ctx, "reclaim", loc, size, err)
	}
	return fmt.Errorf("segment %s is unreadable (kept): %w", loc, err)
}

// recordRediscovered records the runs of a segment rediscover read back.
func (p *Provider) recordRediscovered(loc string, data []byte, records [][]byte, ok bool) error {
	runs := []provider.RunRef{}
	if ok {
		for _, rec := range records {
			if run, ok := parseRunHeader(rec); ok {
				runs = append(runs, provider.RunRef{Stream: run.Stream, Epoch: run.Epoch, Token: run.Token,
					Commit: run.Commit, Start: run.Start, End: run.end})
			}
		}
	}
	if !ok || len(runs) == 0 {
		// Not a segment of ours (no placement, no run headers): leave it.
		p.mu.Lock()
		delete(p.retained, loc)
		p.mu.Unlock()
		return nil
	}
	p.mu.Lock()
	if rs := p.retained[loc]; rs != nil {
		rs.runs, rs.size = runs, int64(len(data))
	}
	p.mu.Unlock()
	return nil
}
