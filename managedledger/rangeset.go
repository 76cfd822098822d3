package managedledger

import "sort"

// rangeSet is a set of int64 offsets kept as sorted, disjoint, non-adjacent
// half-open ranges [start, end).
type rangeSet struct {
	r [][2]int64
}

// add inserts [a, b).
func (s *rangeSet) add(a, b int64) {
	if a >= b {
		return
	}
	// First range whose end >= a (may touch or overlap).
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i][1] >= a })
	j := i
	for j < len(s.r) && s.r[j][0] <= b {
		a = min(a, s.r[j][0])
		b = max(b, s.r[j][1])
		j++
	}
	merged := [2]int64{a, b}
	s.r = append(s.r[:i], append([][2]int64{merged}, s.r[j:]...)...)
}

func (s *rangeSet) contains(x int64) bool {
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i][1] > x })
	return i < len(s.r) && s.r[i][0] <= x
}

// containsRange reports whether every offset of [a, b) is in the set.
func (s *rangeSet) containsRange(a, b int64) bool {
	if a >= b {
		return true
	}
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i][1] > a })
	return i < len(s.r) && s.r[i][0] <= a && s.r[i][1] >= b
}

// trimBelow removes every offset < x.
func (s *rangeSet) trimBelow(x int64) {
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i][1] > x })
	s.r = s.r[i:]
	if len(s.r) > 0 && s.r[0][0] < x {
		s.r[0][0] = x
	}
}

func (s *rangeSet) clone() rangeSet {
	return rangeSet{r: append([][2]int64(nil), s.r...)}
}
