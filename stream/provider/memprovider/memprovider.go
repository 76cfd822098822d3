// Package memprovider is an in-memory WAL provider for tests of the stream
// core: durable only within the process, with seeded fault injection (failed
// writes, delays) and simulated process restarts (runs written before
// Restart become intents that the next core must settle).
//
// It must never be used where data has to survive the process.
package memprovider

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// Faults configures injected failures. Probabilities are in [0, 1].
type Faults struct {
	// WriteError fails a write (nothing stored).
	WriteError float64
	// LostAck stores the run but reports a failure (the outcome a caller
	// sees when a write lands and its acknowledgement is lost).
	LostAck float64
	// MaxDelay delays each write completion by a random duration up to it.
	MaxDelay time.Duration
}

type stored struct {
	run     provider.Run
	settled bool
	gen     int
}

// Provider is the in-memory provider.
type Provider struct {
	mu        sync.Mutex
	rng       *rand.Rand
	faults    Faults
	runs      map[uint64]*stored
	next      uint64
	gen       int
	closed    bool
	writes    int
	released  int
	completed atomic.Int64
	lanes     map[uint64]chan func() // per-stream completion order
	Settled   map[uint64]bool        // target -> committed, as settled by Recover
}

// New returns an empty provider with faults drawn from seed.
func New(seed int64, f Faults) *Provider {
	return &Provider{rng: rand.New(rand.NewSource(seed)), faults: f, runs: map[uint64]*stored{},
		lanes: map[uint64]chan func(){}, Settled: map[uint64]bool{}}
}

// SetFaults changes the injected faults.
func (p *Provider) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return "mem" }

// Restart simulates a new process incarnation: runs written so far become
// intents for the next Recover, and the provider accepts writes again.
func (p *Provider) Restart() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	p.closed = false
	p.closeLanesLocked()
}

// closeLanesLocked ends the per-stream callback goroutines once they have
// run what was queued (so a test in a synctest bubble ends with no
// goroutine left behind).
func (p *Provider) closeLanesLocked() {
	for _, lane := range p.lanes {
		close(lane)
	}
	p.lanes = map[uint64]chan func(){}
}

// Completed is the number of write callbacks that have run.
func (p *Provider) Completed() int64 { return p.completed.Load() }

// Writes is the number of successful writes.
func (p *Provider) Writes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writes
}

// Write implements provider.Provider.
func (p *Provider) Write(run provider.Run, done func(provider.Target, error)) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		done(nil, fmt.Errorf("memprovider: closed"))
		return
	}
	x := p.rng.Float64()
	fail := x < p.faults.WriteError
	lostAck := !fail && x < p.faults.WriteError+p.faults.LostAck
	var delay time.Duration
	if p.faults.MaxDelay > 0 {
		delay = time.Duration(p.rng.Int63n(int64(p.faults.MaxDelay)))
	}
	var target provider.Target
	if !fail {
		p.next++
		cp := run
		cp.Entries = make([]provider.Entry, len(run.Entries))
		for i, e := range run.Entries {
			cp.Entries[i] = provider.Entry{Payload: append([]byte(nil), e.Payload...), RecordCount: e.RecordCount, Timestamp: e.Timestamp}
		}
		p.runs[p.next] = &stored{run: cp, gen: p.gen}
		p.writes++
		target = binary.BigEndian.AppendUint64(nil, p.next)
	}
	lane := p.lanes[run.Stream]
	if lane == nil {
		lane = make(chan func(), 1<<16)
		p.lanes[run.Stream] = lane
		go func() {
			for f := range lane {
				f()
			}
		}()
	}
	// Sent under mu so Close (which closes the lanes under mu) never races
	// a send; the lane's buffer makes this non-blocking in practice.
	defer p.mu.Unlock()
	lane <- func() {
		if delay > 0 {
			time.Sleep(delay)
		}
		defer p.completed.Add(1)
		if fail {
			done(nil, fmt.Errorf("memprovider: injected write failure"))
			return
		}
		if lostAck {
			done(nil, fmt.Errorf("memprovider: write stored, acknowledgement lost"))
			return
		}
		done(target, nil)
	}
}

// Read implements provider.Provider.
func (p *Provider) Read(ctx context.Context, target provider.Target, runStart, from int64, maxBytes int) ([]provider.ReadEntry, error) {
	if len(target) != 8 {
		return nil, provider.ErrCorrupt
	}
	p.mu.Lock()
	s := p.runs[binary.BigEndian.Uint64(target)]
	p.mu.Unlock()
	if s == nil {
		return nil, provider.ErrNotFound
	}
	if s.run.Start != runStart {
		return nil, fmt.Errorf("%w: run starts at %d, descriptor says %d", provider.ErrCorrupt, s.run.Start, runStart)
	}
	var out []provider.ReadEntry
	off, size := runStart, 0
	for _, e := range s.run.Entries {
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

// Recover implements provider.Provider: every run of an earlier generation
// not yet settled is an intent.
func (p *Provider) Recover(ctx context.Context, settle func(context.Context, provider.Intent) (bool, error)) error {
	p.mu.Lock()
	var todo []uint64
	for id, s := range p.runs {
		if s.gen < p.gen && !s.settled {
			todo = append(todo, id)
		}
	}
	p.mu.Unlock()
	for _, id := range todo {
		p.mu.Lock()
		s := p.runs[id]
		p.mu.Unlock()
		committed, err := settle(ctx, provider.Intent{Run: runWithEnd(s.run), Target: binary.BigEndian.AppendUint64(nil, id)})
		if err != nil {
			return err
		}
		p.mu.Lock()
		s.settled = true
		p.Settled[id] = committed
		p.mu.Unlock()
	}
	return nil
}

// runWithEnd keeps entry record counts (so End() works) but drops payloads.
func runWithEnd(r provider.Run) provider.Run {
	out := r
	out.Entries = make([]provider.Entry, len(r.Entries))
	for i, e := range r.Entries {
		out.Entries[i] = provider.Entry{RecordCount: e.RecordCount}
	}
	return out
}

// ScanRuns implements provider.Scanner: every stored run, committed or not.
func (p *Provider) ScanRuns(ctx context.Context, fn func(provider.Run, provider.Target) error) error {
	p.mu.Lock()
	ids := make([]uint64, 0, len(p.runs))
	for id := range p.runs {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		p.mu.Lock()
		run := p.runs[id].run
		p.mu.Unlock()
		if err := fn(run, binary.BigEndian.AppendUint64(nil, id)); err != nil {
			return err
		}
	}
	return nil
}

// Release implements provider.Provider.
func (p *Provider) Release(target provider.Target, committed bool) {
	if len(target) != 8 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.runs[binary.BigEndian.Uint64(target)]; s != nil {
		s.settled = true
		if !committed {
			p.released++
		}
	}
}

// Released is the number of runs the core declared not committed.
func (p *Provider) Released() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.released
}

// Close implements provider.Provider.
func (p *Provider) Close(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.closeLanesLocked()
	return nil
}
