package bkwal

import (
	"testing"
	"time"
)

// TestStaleHintsAreDropped: a retention hint of a stream this provider
// has no lane for is kept while the core keeps giving it, and dropped
// hintTTL after the last one (the stream was deleted before it was ever
// written here, or is owned elsewhere now) — it stayed for the provider's
// life before.
func TestStaleHintsAreDropped(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	p := &Provider{cfg: Config{Now: func() time.Time { return clock }}, lanes: map[uint64]*lane{}, hints: map[uint64]laneHint{}}
	p.HintRetention(1, 5*time.Second) // hinted on every pass
	p.HintRetention(2, 5*time.Second) // deleted after this one
	for i := 0; i < 3; i++ {
		clock = clock.Add(hintTTL / 2)
		p.HintRetention(1, 5*time.Second)
		p.pruneHints()
	}
	if _, ok := p.hints[1]; !ok {
		t.Fatal("the hint of a stream still hinted was dropped")
	}
	if _, ok := p.hints[2]; ok {
		t.Fatalf("the hint of a stream not hinted for %v is still kept", 3*hintTTL/2)
	}
	if h := p.hints[1]; h.retention != int64(5*time.Second) {
		t.Fatalf("kept hint %v, want 5s", time.Duration(h.retention))
	}
}
