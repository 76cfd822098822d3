package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// simDisk is the durable side of one simulated WAL kind (the object store
// behind the Object WAL, the bookies behind the BookKeeper WAL): shared by
// every simulated process, surviving their crashes.
type simDisk struct {
	kind string
	runs map[uint64]*simRun
	next uint64
	// unitRuns is how many runs one physical unit (a segment, a ledger)
	// holds; runs of one process incarnation fill units in write order.
	unitRuns int
	nextUnit uint64
	// onDelete is called before GC deletes a unit's runs (the invariants).
	onDelete func(unit uint64, runs []*simRun)
	// reclaimed counts units physical GC deleted.
	reclaimed int
	// units lists, per writer, the units that still hold live runs (in
	// write order), and unitOf their runs: Reclaim's working set.
	units  map[string][]uint64
	unitOf map[uint64][]*simRun
}

type simRun struct {
	run       provider.Run
	writer    string
	inc       int
	pending   bool // written, not yet durable (lost if the writer crashes)
	durable   bool
	released  bool
	committed bool // released (or recovered) as committed
	deleted   bool // reclaimed (released as not committed, or by GC) or never stored
	unit      uint64
}

func newSimDisk(kind string, unitRuns int) *simDisk {
	return &simDisk{kind: kind, runs: map[uint64]*simRun{}, unitRuns: max(unitRuns, 1),
		units: map[string][]uint64{}, unitOf: map[uint64][]*simRun{}}
}

var errSimWALFailed = errors.New("sim: WAL write failed")

// simWAL is one process incarnation's WAL provider over a simDisk. Writes
// of one stream complete in submission order after a random latency; a
// write fails, or lands and reports failure, at the world's fault rates. A
// write not yet complete when its process crashes may or may not have
// reached the disk (crash drops un-fsynced state at random). Releasing a
// run as not committed, or settling an intent as not committed, deletes
// its bytes at once — the harshest reclamation a provider may do, so a
// core that releases or settles wrongly loses data visibly.
type simWAL struct {
	p    *simProc
	disk *simDisk
	lane map[uint64]int64 // stream -> time of its last scheduled completion
	// the unit being filled, and how many runs it holds
	unit, inUnit uint64
	// retiredSince: when a pass first found a unit all-retired (this
	// process's memory, as ReclaimOptions.Grace says).
	retiredSince map[uint64]time.Time
	// writes not yet completed (Close fails them)
	inflight []simWrite
}

type simWrite struct {
	e    *simEvent
	r    *simRun
	done func(provider.Target, error)
}

var _ provider.Provider = (*simWAL)(nil)

func (s *simWAL) Name() string { return s.disk.kind }

func target(id uint64) provider.Target { return binary.BigEndian.AppendUint64(nil, id) }

func (s *simWAL) Write(run provider.Run, done func(provider.Target, error)) {
	w := s.p.w
	d := s.disk
	d.next++
	id := d.next
	cp := run
	cp.Entries = slices.Clone(run.Entries)
	if s.unit == 0 || s.inUnit >= uint64(d.unitRuns) {
		d.nextUnit++
		s.unit, s.inUnit = d.nextUnit, 0
		d.units[s.p.name] = append(d.units[s.p.name], s.unit)
	}
	s.inUnit++
	r := &simRun{run: cp, writer: s.p.name, inc: s.p.inc, pending: true, unit: s.unit}
	d.unitOf[s.unit] = append(d.unitOf[s.unit], r)
	d.runs[id] = r
	at := max(w.now+int64(w.jitter(w.faults.maxWALLat)), s.lane[run.Stream]+1)
	s.lane[run.Stream] = at
	var e *simEvent
	e = w.at(at, s.p, func() {
		s.forget(e)
		r.pending = false
		switch x := w.rng.Float64(); {
		case x < w.faults.walFail:
			r.deleted = true
			done(nil, errSimWALFailed)
		case x < w.faults.walFail+w.faults.walLost:
			r.durable = true
			done(nil, fmt.Errorf("sim: WAL write landed, acknowledgement lost"))
		default:
			r.durable = true
			done(target(id), nil)
		}
	})
	s.inflight = append(s.inflight, simWrite{e: e, r: r, done: done})
}

// crash decides the fate of the incarnation's incomplete writes.
func (s *simWAL) crash() {
	for _, id := range s.disk.sortedIDs() {
		r := s.disk.runs[id]
		if r.writer == s.p.name && r.inc == s.p.inc && r.pending {
			r.pending = false
			if s.p.w.chance(0.5) {
				r.durable = true
			} else {
				r.deleted = true
			}
		}
	}
}

func (d *simDisk) sortedIDs() []uint64 {
	ids := make([]uint64, 0, len(d.runs))
	for id := range d.runs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (s *simWAL) lookup(t provider.Target) (*simRun, error) {
	if len(t) != 8 {
		return nil, provider.ErrCorrupt
	}
	r := s.disk.runs[binary.BigEndian.Uint64(t)]
	if r == nil || r.deleted || !r.durable {
		return nil, fmt.Errorf("%w: sim run %x", provider.ErrNotFound, []byte(t))
	}
	return r, nil
}

func (s *simWAL) Read(ctx context.Context, t provider.Target, runStart, from int64, maxBytes int) ([]provider.ReadEntry, error) {
	// A read from a simulated goroutine takes a round trip, during which
	// anything (a GC pass of another process) may happen.
	s.p.w.sleepCoro(s.p.w.jitter(s.p.w.faults.maxWALLat))
	r, err := s.lookup(t)
	if err != nil {
		return nil, err
	}
	if r.run.Start != runStart {
		return nil, fmt.Errorf("%w: run starts at %d, descriptor says %d", provider.ErrCorrupt, r.run.Start, runStart)
	}
	var out []provider.ReadEntry
	off, size := runStart, 0
	for _, e := range r.run.Entries {
		end := off + int64(e.RecordCount)
		if end > from {
			if len(out) > 0 && size+len(e.Payload) > maxBytes {
				break
			}
			out = append(out, provider.ReadEntry{Offset: off, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: e.Payload})
			size += len(e.Payload)
		}
		off = end
	}
	return out, nil
}

// Recover settles the durable, unreleased runs of this writer's earlier
// incarnations, oldest first.
func (s *simWAL) Recover(ctx context.Context, settle func(context.Context, provider.Intent) (bool, error)) error {
	for _, id := range s.disk.sortedIDs() {
		r := s.disk.runs[id]
		if r.writer != s.p.name || r.inc >= s.p.inc || !r.durable || r.released || r.deleted {
			continue
		}
		committed, err := settle(ctx, provider.Intent{Run: r.run, Target: target(id)})
		if err != nil {
			return err
		}
		r.released, r.committed = true, committed
		r.deleted = r.deleted || !committed
	}
	return nil
}

func (s *simWAL) Release(t provider.Target, committed bool) {
	if len(t) != 8 {
		return
	}
	r := s.disk.runs[binary.BigEndian.Uint64(t)]
	if r == nil {
		return
	}
	r.released, r.committed = true, committed
	if !committed {
		r.deleted = true
	}
}

var _ provider.Reclaimer = (*simWAL)(nil)

// Reclaim is physical GC over the units this writer's incarnations wrote,
// with the provider contract's rules: a unit holding a run that is not
// settled (in flight, or an intent for the next Recover) is kept; the
// settled live runs are judged; a unit all of whose runs are RunRetired,
// found so for at least Grace, is deleted whole; a judge error keeps
// everything.
func (s *simWAL) Reclaim(ctx context.Context, judge provider.Judge, opts provider.ReclaimOptions) (provider.ReclaimReport, error) {
	d := s.disk
	if s.retiredSince == nil {
		s.retiredSince = map[uint64]time.Time{}
	}
	var rep provider.ReclaimReport
	all := d.units[s.p.name]
	keep := make([]uint64, 0, len(all))
	for i, u := range all {
		runs := d.unitOf[u]
		var live []*simRun
		settled := true
		for _, r := range runs {
			switch {
			case r.deleted:
			case r.pending || !r.released || r.unit == s.unit && s.p.alive && r.inc == s.p.inc && s.inUnit < uint64(d.unitRuns):
				// In flight, an intent, or the unit is still being filled.
				settled = false
			default:
				live = append(live, r)
			}
		}
		if settled && len(live) == 0 {
			delete(d.unitOf, u) // nothing left to reclaim
			continue
		}
		keep = append(keep, u)
		if !settled {
			continue
		}
		rep.Units++
		refs := make([]provider.RunRef, len(live))
		for i, r := range live {
			refs[i] = provider.RunRef{Stream: r.run.Stream, Epoch: r.run.Epoch, Token: r.run.Token, Commit: r.run.Commit,
				Start: r.run.Start, End: r.run.End(), Committed: r.committed}
		}
		verdicts, err := judge(ctx, refs)
		if err != nil {
			d.units[s.p.name] = append(keep, all[i+1:]...)
			return rep, err
		}
		retired := true
		for _, v := range verdicts {
			retired = retired && v == provider.RunRetired
		}
		if !retired {
			delete(s.retiredSince, u)
			continue
		}
		judgedAt := opts.JudgedAt()
		since, ok := s.retiredSince[u]
		if !ok {
			s.retiredSince[u] = judgedAt
			continue
		}
		if judgedAt.Sub(since) < opts.Grace {
			continue
		}
		if d.onDelete != nil {
			d.onDelete(u, live)
		}
		for _, r := range live {
			r.deleted = true
		}
		delete(s.retiredSince, u)
		d.reclaimed++
		rep.Deleted++
		rep.DeletedUnits = append(rep.DeletedUnits, provider.PendingUnit{Unit: fmt.Sprintf("unit %d", u)})
	}
	d.units[s.p.name] = keep
	return rep, nil
}

func (s *simWAL) forget(e *simEvent) {
	for i, wr := range s.inflight {
		if wr.e == e {
			s.inflight = slices.Delete(s.inflight, i, i+1)
			return
		}
	}
}

// Close fails the writes still in flight (the provider contract: pending
// writes fail); each may or may not have reached the disk, as at a crash.
func (s *simWAL) Close(ctx context.Context) error {
	pending := s.inflight
	s.inflight = nil
	for _, wr := range pending {
		wr.e.canceled = true
		wr.r.pending = false
		if s.p.w.chance(0.5) {
			wr.r.durable = true
		} else {
			wr.r.deleted = true
		}
		wr.done(nil, errors.New("sim: WAL closed"))
	}
	return nil
}

// rawRun returns a run's bytes whether or not they were deleted (the
// oracle's view), or false if no write ever made them durable.
func (d *simDisk) rawRun(t provider.Target) (*simRun, bool) {
	if len(t) != 8 {
		return nil, false
	}
	r := d.runs[binary.BigEndian.Uint64(t)]
	return r, r != nil && r.durable
}
