package stream

import (
	"sort"
	"sync"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// tailCache keeps the most recently committed entries of owned streams in
// memory so tailing readers (the common case for Kafka fetches and Pulsar
// dispatch) never touch the WAL. Committed entries are immutable facts, so a
// cached entry is always correct; only its presence is bounded.
//
// Invariant: per stream, the cached entries are contiguous in offset order
// (each starts where the previous ends). Insertion is in commit order and
// eviction is from the front (globally oldest first), which preserves it.
type tailCache struct {
	mu      sync.Mutex
	budget  int64
	size    int64
	streams map[ID]*tailStream
	order   []tailRef // global insertion order, oldest first
	head    int       // index of the oldest live ref in order
}

type tailStream struct {
	entries []provider.ReadEntry
	first   int // index of the first live entry
}

// tailCompactAt is how many evicted slots a stream's entries array may
// carry at its front before the live ones are moved to a new array (when
// they are fewer than the evicted ones, so the copying stays amortised O(1)
// per eviction). With thousands of streams sharing the budget each stream
// keeps only a few live entries while one is added and one evicted per
// commit, so a threshold of 1024 let every stream's array grow to ~1,000
// slots (48 B each, pointer-bearing, scanned by the Go GC) for a handful of
// live entries: ~0.5 GB at 10,000 streams in a long run.
const tailCompactAt = 16

type tailRef struct {
	id   ID
	size int64
}

func newTailCache(budget int64) *tailCache {
	return &tailCache{budget: budget, streams: map[ID]*tailStream{}}
}

func (t *tailCache) add(id ID, run provider.Run) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.streams[id]
	if s == nil {
		s = &tailStream{}
		t.streams[id] = s
	}
	off := run.Start
	if n := len(s.entries); n > s.first {
		last := s.entries[n-1]
		if last.Offset+int64(last.RecordCount) != off {
			t.dropLocked(id)
			s = &tailStream{}
			t.streams[id] = s
		}
	}
	for _, e := range run.Entries {
		s.entries = append(s.entries, provider.ReadEntry{Offset: off, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: e.Payload})
		sz := int64(len(e.Payload)) + 64
		t.order = append(t.order, tailRef{id: id, size: sz})
		t.size += sz
		off += int64(e.RecordCount)
	}
	for t.size > t.budget && t.head < len(t.order) {
		ref := t.order[t.head]
		t.head++
		t.size -= ref.size
		if s := t.streams[ref.id]; s != nil && s.first < len(s.entries) {
			s.entries[s.first] = provider.ReadEntry{}
			s.first++
			if s.first == len(s.entries) {
				delete(t.streams, ref.id)
			} else if s.first >= tailCompactAt && s.first*2 > len(s.entries) {
				s.entries = append([]provider.ReadEntry(nil), s.entries[s.first:]...)
				s.first = 0
			}
		}
	}
	if t.head > 4096 && t.head*2 > len(t.order) {
		t.order = append([]tailRef(nil), t.order[t.head:]...)
		t.head = 0
	}
}

// dropLocked forgets a stream's entries; their refs in order become stale
// and are skipped (their size is subtracted now).
func (t *tailCache) dropLocked(id ID) {
	s := t.streams[id]
	if s == nil {
		return
	}
	for _, e := range s.entries[s.first:] {
		t.size -= int64(len(e.Payload)) + 64
	}
	delete(t.streams, id)
	// Stale refs for id remain in order; neutralise them so eviction does
	// not subtract twice or evict a newer incarnation's entries.
	for i := t.head; i < len(t.order); i++ {
		if t.order[i].id == id {
			t.order[i] = tailRef{id: 0, size: 0}
		}
	}
}

func (t *tailCache) dropStream(id ID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropLocked(id)
}

// resetIfNotContiguous drops a stream's entries unless they end exactly at
// end (a new owner starts at end; older cached entries would leave a gap).
func (t *tailCache) resetIfNotContiguous(id ID, end int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.streams[id]
	if s == nil || len(s.entries) == s.first {
		return
	}
	last := s.entries[len(s.entries)-1]
	if last.Offset+int64(last.RecordCount) != end {
		t.dropLocked(id)
	}
}

// read returns cached entries starting with the one containing from, if the
// cache covers from; nil otherwise. Entries at or beyond end are excluded.
func (t *tailCache) read(id ID, from, end int64, maxBytes, maxEntries int) []provider.ReadEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.streams[id]
	if s == nil {
		return nil
	}
	live := s.entries[s.first:]
	if len(live) == 0 || live[0].Offset > from {
		return nil
	}
	i := sort.Search(len(live), func(i int) bool { return live[i].Offset+int64(live[i].RecordCount) > from })
	var out []provider.ReadEntry
	size := 0
	for ; i < len(live) && len(out) < maxEntries; i++ {
		e := live[i]
		if e.Offset >= end || (len(out) > 0 && size+len(e.Payload) > maxBytes) {
			break
		}
		out = append(out, e)
		size += len(e.Payload)
	}
	return out
}
