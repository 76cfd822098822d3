package latency

import (
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	var h Histogram
	h.Observe(-time.Second)           // counted as 0: first bucket
	h.Observe(100 * time.Microsecond) // on a bound: that bucket
	h.Observe(101 * time.Microsecond) // just above: the next
	h.Observe(3 * time.Millisecond)   // on a bound
	h.Observe(time.Hour)              // above every bound
	s := h.Snapshot()
	if s.Count() != 5 {
		t.Fatalf("count %d, want 5", s.Count())
	}
	if s.Buckets[0] != 2 || s.Buckets[1] != 1 || s.Buckets[len(s.Buckets)-1] != 1 {
		t.Fatalf("buckets %v", s.Buckets)
	}
	cum := s.Cumulative()
	if cum[0.003] != 4 || cum[2] != 4 {
		t.Fatalf("cumulative %v", cum)
	}
	if want := 100*time.Microsecond + 101*time.Microsecond + 3*time.Millisecond + time.Hour; s.Sum != want {
		t.Fatalf("sum %v, want %v", s.Sum, want)
	}
}
