package keyshared

import (
	"sort"
	"strconv"
)

// DefaultPoints is Pulsar's subscriptionKeySharedConsistentHashingReplicaPoints.
const DefaultPoints = 100

// Ring is ConsistentHashingStickyKeyConsumerSelector: every consumer puts
// Points points on a ring of hashes in ConsistentRange; a key hash belongs
// to the consumer of the first point at or after it (wrapping to the
// first point). A point's hash is StickyKeyHash(name + "\x00" + nameIndex +
// "\x00" + i), where nameIndex is the lowest index not used by another
// attached consumer with the same name, so same-named consumers get
// distinct points. On a collision the earlier consumer keeps the point and
// the later one waits behind it, taking over when the earlier one leaves.
//
// C identifies a consumer instance (a pointer in the broker). Ring is not
// safe for concurrent use.
type Ring[C comparable] struct {
	points  int
	hashes  []int // sorted point hashes
	entries map[int]*ringEntry[C]
	members map[C]member
	inUse   map[string]map[int]bool // name -> indexes in use
}

type member struct {
	name  string
	index int
}

type ringEntry[C comparable] struct {
	owner   C
	waiting []C
}

// NewRing returns an empty ring with points per consumer (DefaultPoints
// when points <= 0).
func NewRing[C comparable](points int) *Ring[C] {
	if points <= 0 {
		points = DefaultPoints
	}
	return &Ring[C]{points: points, entries: map[int]*ringEntry[C]{}, members: map[C]member{}, inUse: map[string]map[int]bool{}}
}

// Len is the number of consumers on the ring.
func (r *Ring[C]) Len() int { return len(r.members) }

func pointHash(name string, index, i int) int {
	key := name + "\x00" + strconv.Itoa(index) + "\x00" + strconv.Itoa(i)
	return StickyKeyHash([]byte(key), ConsistentRange)
}

// Add puts consumer c (named name) on the ring. Adding a member again is a
// no-op.
func (r *Ring[C]) Add(c C, name string) {
	if _, ok := r.members[c]; ok {
		return
	}
	used := r.inUse[name]
	if used == nil {
		used = map[int]bool{}
		r.inUse[name] = used
	}
	index := 0
	for used[index] {
		index++
	}
	used[index] = true
	r.members[c] = member{name: name, index: index}
	for i := 0; i < r.points; i++ {
		h := pointHash(name, index, i)
		if e, ok := r.entries[h]; ok {
			e.waiting = append(e.waiting, c)
			continue
		}
		r.entries[h] = &ringEntry[C]{owner: c}
		j := sort.SearchInts(r.hashes, h)
		r.hashes = append(r.hashes, 0)
		copy(r.hashes[j+1:], r.hashes[j:])
		r.hashes[j] = h
	}
}

// Remove takes consumer c off the ring; points it held pass to the first
// waiting consumer, if any.
func (r *Ring[C]) Remove(c C) {
	m, ok := r.members[c]
	if !ok {
		return
	}
	delete(r.members, c)
	if used := r.inUse[m.name]; used != nil {
		delete(used, m.index)
		if len(used) == 0 {
			delete(r.inUse, m.name)
		}
	}
	for i := 0; i < r.points; i++ {
		h := pointHash(m.name, m.index, i)
		e, ok := r.entries[h]
		if !ok {
			continue
		}
		if e.owner == c {
			if len(e.waiting) > 0 {
				e.owner, e.waiting = e.waiting[0], e.waiting[1:]
				continue
			}
			delete(r.entries, h)
			j := sort.SearchInts(r.hashes, h)
			r.hashes = append(r.hashes[:j], r.hashes[j+1:]...)
			continue
		}
		for k, o := range e.waiting {
			if o == c {
				e.waiting = append(e.waiting[:k], e.waiting[k+1:]...)
				break
			}
		}
	}
}

// Select returns the consumer owning hash; ok is false on an empty ring.
func (r *Ring[C]) Select(hash int) (c C, ok bool) {
	if len(r.hashes) == 0 {
		return c, false
	}
	j := sort.SearchInts(r.hashes, hash)
	if j == len(r.hashes) {
		j = 0
	}
	return r.entries[r.hashes[j]].owner, true
}

// Assignment is one contiguous hash range and its consumer.
type Assignment[C comparable] struct {
	Range    Range
	Consumer C
}

// Assignments lists the ranges of ConsistentRange and their consumers in
// hash order, adjacent ranges of one consumer joined (as Pulsar's
// ConsumerHashAssignmentsSnapshot, which topic stats report).
func (r *Ring[C]) Assignments() []Assignment[C] {
	var out []Assignment[C]
	if len(r.hashes) == 0 {
		return out
	}
	start := ConsistentRange.Start
	for _, h := range r.hashes {
		c := r.entries[h].owner
		if n := len(out); n > 0 && out[n-1].Consumer == c {
			out[n-1].Range.End = h
		} else {
			out = append(out, Assignment[C]{Range: Range{Start: start, End: h}, Consumer: c})
		}
		start = h + 1
	}
	last := r.hashes[len(r.hashes)-1]
	if last != ConsistentRange.End {
		first := r.entries[r.hashes[0]].owner
		if n := len(out); out[n-1].Consumer == first {
			out[n-1].Range.End = ConsistentRange.End
		} else {
			out = append(out, Assignment[C]{Range: Range{Start: last + 1, End: ConsistentRange.End}, Consumer: first})
		}
	}
	return out
}
