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
}

type simRun struct {
	run      provider.Run
	writer   string
	inc      int
	pending  bool // written, not yet durable (lost if the writer crashes)
	durable  bool
	released bool
	deleted  bool // reclaimed (released as not committed) or never stored
}

func newSimDisk(kind string) *simDisk { return &simDisk{kind: kind, runs: map[uint64]*simRun{}} }

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
	r := &simRun{run: cp, writer: s.p.name, inc: s.p.inc, pending: true}
	d.runs[id] = r
	at := max(w.now+int64(w.jitter(w.faults.maxWALLat)), s.lane[run.Stream]+1)
	s.lane[run.Stream] = at
	w.at(at, s.p, func() {
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
		r.released = true
		r.deleted = !committed
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
	r.released = true
	if !committed {
		r.deleted = true
	}
}

func (s *simWAL) Close(ctx context.Context) error { return nil }

var _ = time.Second
