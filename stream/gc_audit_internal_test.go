package stream

import (
	"strconv"
	"testing"
)

// TestAuditTrailKeepsTheLastEvents: whatever the number of events added,
// recent is the last maxGCAudit of them (all of them below that), oldest
// first, and the trail never holds more than twice that.
func TestAuditTrailKeepsTheLastEvents(t *testing.T) {
	var a auditTrail
	for n := 1; n <= 5*maxGCAudit+7; n++ {
		a.add(GCEvent{Unit: strconv.Itoa(n)})
		if len(a.events) >= 2*maxGCAudit {
			t.Fatalf("after %d events the trail holds %d", n, len(a.events))
		}
		if n%97 != 0 && n != maxGCAudit && n != 2*maxGCAudit {
			continue
		}
		got := a.recent()
		if want := min(n, maxGCAudit); len(got) != want {
			t.Fatalf("after %d events recent has %d, want %d", n, len(got), want)
		}
		for i, ev := range got {
			if want := strconv.Itoa(n - len(got) + 1 + i); ev.Unit != want {
				t.Fatalf("after %d events recent[%d] = %s, want %s", n, i, ev.Unit, want)
			}
		}
	}
}

// TestBuilderCapacity: the buffer is sized for the payload the generation
// will take (the unmaterialized bytes, at most the limit) with room for
// headers and one entry past the cut, and never above maxBuilderPresize.
func TestBuilderCapacity(t *testing.T) {
	for _, c := range []struct {
		committed, genCum, start, limit int64
		want                            int
	}{
		{committed: 64 << 20, limit: 16 << 20, want: 17<<20 + 1<<20},
		{committed: 64 << 20, genCum: 60 << 20, limit: 16 << 20, want: 4<<20 + 256<<10 + 1<<20},
		{committed: 64 << 20, start: 63 << 20, limit: 16 << 20, want: 1<<20 + 64<<10 + 1<<20},
		{committed: 10, genCum: 20, limit: 16 << 20, want: 1 << 20},
		{committed: 1 << 40, limit: 1 << 62, want: maxBuilderPresize},
	} {
		h := &head{CommittedBytes: c.committed, GenCumBytes: c.genCum, StartBytes: c.start}
		if got := builderCapacity(h, c.limit); got != c.want {
			t.Errorf("builderCapacity(committed %d, genCum %d, start %d, limit %d) = %d, want %d", c.committed, c.genCum, c.start, c.limit, got, c.want)
		}
	}
}
