package pulsar

// Delayed delivery (deliverAt / deliverAfter), as Apache Pulsar's
// InMemoryDelayedDeliveryTracker: on Shared and Key_Shared subscriptions an
// entry whose MessageMetadata.deliver_at_time is later than now plus the
// tick (Config.DelayedDeliveryTick, Pulsar's delayedDeliveryTickTimeMillis,
// 1s; Pulsar's non-strict mode) is not dispatched when the read position
// passes it: the subscription records (offset, time) and dispatches it once
// the time has come, as a replay (no redelivery count). Other subscription
// types deliver at once, as in Pulsar.
//
// The index is durable in the sense that matters for delivery: the delay
// is part of the stored entry, and an entry stays unacknowledged until it
// was delivered and acked, so after a restart (or an unload, a seek, a
// rewind) the dispatcher reads it again from the mark-delete position and
// re-indexes it with the same time. Nothing is delivered early or lost
// across a crash (TestDelayedDeliverySurvivesRestart). The in-memory index
// is bounded (Config.MaxDelayedEntries); past it the subscription stops
// reading ahead until due entries leave it.

import (
	"container/heap"
	"time"

	"github.com/nereusstream/nereus-go/pulsar/pb"
)

type delayedEntry struct {
	off, at int64
}

// delayedIndex is a min-heap of delayed entries by delivery time, with the
// set of their offsets.
type delayedIndex struct {
	h    []delayedEntry
	offs map[int64]bool
}

func (d *delayedIndex) Len() int           { return len(d.h) }
func (d *delayedIndex) Less(i, j int) bool { return d.h[i].at < d.h[j].at }
func (d *delayedIndex) Swap(i, j int)      { d.h[i], d.h[j] = d.h[j], d.h[i] }
func (d *delayedIndex) Push(x any)         { d.h = append(d.h, x.(delayedEntry)) }
func (d *delayedIndex) Pop() any {
	e := d.h[len(d.h)-1]
	d.h = d.h[:len(d.h)-1]
	return e
}

func (d *delayedIndex) add(off, at int64) {
	if d.offs == nil {
		d.offs = map[int64]bool{}
	}
	if d.offs[off] {
		return
	}
	d.offs[off] = true
	heap.Push(d, delayedEntry{off: off, at: at})
}

// due removes and returns the offsets whose time is <= now.
func (d *delayedIndex) due(now int64) []int64 {
	var out []int64
	for len(d.h) > 0 && d.h[0].at <= now {
		e := heap.Pop(d).(delayedEntry)
		if d.offs[e.off] {
			delete(d.offs, e.off)
			out = append(out, e.off)
		}
	}
	return out
}

// next is the earliest delivery time, zero when empty.
func (d *delayedIndex) next() time.Time {
	for len(d.h) > 0 && !d.offs[d.h[0].off] {
		heap.Pop(d) // removed (acknowledged) entries
	}
	if len(d.h) == 0 {
		return time.Time{}
	}
	return time.UnixMilli(d.h[0].at)
}

func (d *delayedIndex) remove(off int64) { delete(d.offs, off) }

// removeBelow forgets entries below off (acknowledged cumulatively,
// skipped).
func (d *delayedIndex) removeBelow(off int64) {
	for o := range d.offs {
		if o < off {
			delete(d.offs, o)
		}
	}
}

func (d *delayedIndex) size() int { return len(d.offs) }

func (d *delayedIndex) reset() { d.h, d.offs = nil, nil }

// delays reports whether this subscription type holds delayed entries.
func (s *subscription) delays() bool {
	return !s.t.s.cfg.DisableDelayedDelivery &&
		(s.subType == pb.CommandSubscribe_Shared || s.subType == pb.CommandSubscribe_Key_Shared)
}

// holdDelayed (on the dispatcher) indexes the entry if it must wait, and
// reports whether it does.
func (s *subscription) holdDelayed(off int64, deliverAt int64) bool {
	if deliverAt <= 0 || !s.delays() {
		return false
	}
	if deliverAt <= time.Now().Add(s.t.s.cfg.DelayedDeliveryTick).UnixMilli() {
		return false // within the tick: now (Pulsar's non-strict cut-off)
	}
	s.delayed.add(off, deliverAt)
	return true
}

// releaseDue (on the dispatcher) moves entries whose time has come to the
// replay queue; true if any moved.
func (s *subscription) releaseDue() bool {
	offs := s.delayed.due(time.Now().UnixMilli())
	for _, off := range offs {
		s.addReplay(off, &replayItem{slot: -1, due: true})
	}
	return len(offs) > 0
}
