package kafka

import (
	"slices"
	"testing"
)

func TestSplitAllowedKeepsOrderAndNeverRewritesTheRequest(t *testing.T) {
	items := []int{1, 2, 3, 4, 5, 6}
	keep, denied := splitAllowed(items, func(i int) bool { return i%2 == 0 || i == 1 })
	if !slices.Equal(keep, []int{1, 2, 4, 6}) || !slices.Equal(denied, []int{3, 5}) {
		t.Fatalf("keep %v denied %v", keep, denied)
	}
	if !slices.Equal(items, []int{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("the request's items were rewritten: %v", items)
	}
	keep[0] = 99
	if items[0] != 1 {
		t.Fatal("keep shares the request's array")
	}

	all, none := splitAllowed(items, func(int) bool { return true })
	if &all[0] != &items[0] || none != nil {
		t.Fatalf("nothing denied: want the items themselves, got %v / %v", all, none)
	}
	gone, every := splitAllowed(items, func(int) bool { return false })
	if len(gone) != 0 || !slices.Equal(every, items) {
		t.Fatalf("all denied: keep %v denied %v", gone, every)
	}
}

func TestSplitDenialsCarriesEachCodeAndAsksOncePerItem(t *testing.T) {
	asked := map[string]int{}
	keep, denied := splitDenials([]string{"a", "b", "c"}, func(s string) int16 {
		asked[s]++
		if s == "b" {
			return topicDenied
		}
		if s == "c" {
			return groupDenied
		}
		return 0
	})
	if !slices.Equal(keep, []string{"a"}) || len(denied) != 2 ||
		denied[0] != (coded[string]{"b", topicDenied}) || denied[1] != (coded[string]{"c", groupDenied}) {
		t.Fatalf("keep %v denied %v", keep, denied)
	}
	for s, n := range asked {
		if n != 1 {
			t.Fatalf("%s authorized %d times, want once (an audit log would see it twice)", s, n)
		}
	}
}
