package keyshared

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestMurmur3ReferenceVectors(t *testing.T) {
	for _, v := range []struct {
		in   string
		want uint32
	}{{"", 0}, {"hello", 0x248bfa47}, {"The quick brown fox jumps over the lazy dog", 0x2e4ff723}} {
		if got := Murmur3([]byte(v.in)); got != v.want {
			t.Errorf("Murmur3(%q) = %#x, want %#x", v.in, got, v.want)
		}
	}
	if h := StickyKeyHash(nil, ConsistentRange); h != 1 {
		t.Errorf("empty key hash %d, want 1 (0 is moved to 1)", h)
	}
}

// TestGoldenVectors replays testdata/golden.txt, which Apache Pulsar
// 4.0.7's own ConsistentHashingStickyKeyConsumerSelector printed
// (testdata/golden/run.sh): scenario (consumer names added in order, then
// "-name#i" for the first one removed), key, sticky-key hash, and the
// selected consumer as name#index-of-addition.
func TestGoldenVectors(t *testing.T) {
	f, err := os.Open("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rings := map[string]*Ring[string]{}
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "\t")
		if len(parts) != 4 {
			t.Fatalf("bad golden line %q", sc.Text())
		}
		scenario, key, wantHash, want := parts[0], parts[1], parts[2], parts[3]
		r := rings[scenario]
		if r == nil {
			r = NewRing[string](DefaultPoints)
			names, removed, _ := strings.Cut(scenario, " -")
			for i, name := range strings.Split(names, ",") {
				r.Add(name+"#"+strconv.Itoa(i), name)
			}
			if removed != "" {
				r.Remove(removed)
			}
			rings[scenario] = r
		}
		h := StickyKeyHash([]byte(key), ConsistentRange)
		if strconv.Itoa(h) != wantHash {
			t.Errorf("%s: key %q hash %d, Pulsar %s", scenario, key, h, wantHash)
		}
		if got, _ := r.Select(h); got != want {
			t.Errorf("%s: key %q -> %s, Pulsar -> %s", scenario, key, got, want)
		}
		n++
	}
	if n < 300 {
		t.Fatalf("only %d golden vectors", n)
	}
}

func TestRingMovesOnlyTheLeaversKeys(t *testing.T) {
	r := NewRing[int](DefaultPoints)
	for i := 0; i < 4; i++ {
		r.Add(i, "c"+strconv.Itoa(i))
	}
	before := map[int]int{}
	for h := ConsistentRange.Start; h <= ConsistentRange.End; h += 7 {
		before[h], _ = r.Select(h)
	}
	r.Remove(2)
	for h, was := range before {
		now, _ := r.Select(h)
		if was != 2 && now != was {
			t.Fatalf("hash %d moved from %d to %d though %d left", h, was, now, 2)
		}
		if now == 2 {
			t.Fatalf("hash %d still on the removed consumer", h)
		}
	}
	// Assignments cover the whole space without gaps.
	next := ConsistentRange.Start
	for _, a := range r.Assignments() {
		if a.Range.Start != next {
			t.Fatalf("gap before %v", a.Range)
		}
		next = a.Range.End + 1
	}
	if next != ConsistentRange.End+1 {
		t.Fatalf("assignments end at %d", next-1)
	}
}

func TestSameNamedConsumersGetDistinctPoints(t *testing.T) {
	r := NewRing[int](DefaultPoints)
	r.Add(1, "same")
	r.Add(2, "same")
	seen := map[int]bool{}
	for h := ConsistentRange.Start; h <= ConsistentRange.End; h += 3 {
		c, _ := r.Select(h)
		seen[c] = true
	}
	if !seen[1] || !seen[2] {
		t.Fatalf("same-named consumers not both selected: %v", seen)
	}
	r.Remove(1)
	r.Add(3, "same") // reuses name index 0
	if r.members[3].index != 0 {
		t.Fatalf("name index not reused: %d", r.members[3].index)
	}
}
