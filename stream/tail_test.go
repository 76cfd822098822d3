package stream

import (
	"testing"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// TestTailCacheArraysFollowLiveEntries: with many streams sharing the
// budget, each keeps a few live entries while one is added and one evicted
// per commit; its entries array must stay proportional to what it holds,
// not grow towards the compaction threshold (it fails with the old
// threshold of 1024: every array then reaches ~1,000 slots).
func TestTailCacheArraysFollowLiveEntries(t *testing.T) {
	const streams, rounds, payload = 200, 3000, 100
	tc := newTailCache(int64(streams * 4 * (payload + 64))) // ~4 live entries per stream
	p := make([]byte, payload)
	for r := 0; r < rounds; r++ {
		for s := 1; s <= streams; s++ {
			tc.add(ID(s), provider.Run{Stream: uint64(s), Start: int64(r), Entries: []provider.Entry{{Payload: p, RecordCount: 1}}})
		}
	}
	slots, live := 0, 0
	for _, s := range tc.streams {
		slots += cap(s.entries)
		live += len(s.entries) - s.first
	}
	if live == 0 {
		t.Fatal("nothing cached")
	}
	if limit := 2*live + 64*len(tc.streams); slots > limit {
		t.Fatalf("entries arrays hold %d slots for %d live entries over %d streams (limit %d)", slots, live, len(tc.streams), limit)
	}
	// The cache still serves every stream's newest entries contiguously.
	for id, s := range tc.streams {
		for i := s.first + 1; i < len(s.entries); i++ {
			if s.entries[i].Offset != s.entries[i-1].Offset+1 {
				t.Fatalf("stream %v: entries not contiguous at %d", id, i)
			}
		}
		if last := s.entries[len(s.entries)-1]; last.Offset != rounds-1 {
			t.Fatalf("stream %v: newest cached offset %d, want %d", id, last.Offset, rounds-1)
		}
	}
}
