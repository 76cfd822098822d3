package logstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// checkItems asserts the tree invariant the lookups rely on: every item
// carries its entry, its key is that entry's key, and keys ascend strictly.
func checkItems(t *testing.T, name string, tr *tree) {
	t.Helper()
	prev, n := "", 0
	tr.Ascend(func(it item) bool {
		switch {
		case it.e == nil:
			t.Errorf("%s: item %q has no entry", name, it.key)
		case it.key != it.e.key:
			t.Errorf("%s: item key %q, entry key %q", name, it.key, it.e.key)
		case n > 0 && it.key <= prev:
			t.Errorf("%s: key %q after %q", name, it.key, prev)
		}
		prev, n = it.key, n+1
		return true
	})
}

// TestTreeItemsCarryTheirKeys drives puts, CAS replacements, deletes, an
// ephemeral's purge and a reopen (replay) through the store and checks
// both the working and the published tree after each, then that every
// key reads back what the ops left. Mutants checked: inserting an item
// without its key (item{e: e}) or removing by an empty key fail here.
func TestTreeItemsCarryTheirKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir, testOpts)
	want := map[string]string{}
	for i := range 300 {
		k := fmt.Sprintf("/s/%03d/head", i%97)
		mustPut(t, s, k, fmt.Sprint(i))
		want[k] = fmt.Sprint(i)
	}
	for i := 0; i < 97; i += 3 {
		k := fmt.Sprintf("/s/%03d/head", i)
		if err := s.Delete(ctx, k, metadata.AnyVersion); err != nil {
			t.Fatal(err)
		}
		delete(want, k)
	}
	sess, err := s.NewSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutEphemeral(ctx, "/e/1", []byte("x"), metadata.AnyVersion, sess.ID()); err != nil {
		t.Fatal(err)
	}
	checkItems(t, "work", s.work)
	checkItems(t, "view", s.view.Load())
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		checkItems(t, "work", s.work)
		checkItems(t, "view", s.view.Load())
		if n := s.view.Load().Len(); n != len(want) {
			t.Errorf("%d keys, want %d", n, len(want))
		}
		for k, v := range want {
			r, err := s.Get(ctx, k)
			if err != nil || string(r.Value) != v {
				t.Errorf("Get %q = %q, %v; want %q", k, r.Value, err, v)
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, testOpts)
	defer s.Close()
	check(s)
}

// TestLookupDoesNotAllocate: a lookup's probe is an item value; the old
// *entry probe escaped through the comparison and cost an allocation per
// Get and per conditional write (one per head CAS). It runs under -race too
// (CI's only pass over this package): the race runtime adds no allocation to
// a B-tree descent.
func TestLookupDoesNotAllocate(t *testing.T) {
	tr := newTree()
	for i := range 1000 {
		insert(tr, &entry{key: fmt.Sprintf("/s/%04d/head", i)})
	}
	keys := []string{"/s/0000/head", "/s/0500/head", "/s/0999/head", "/absent"}
	if n := testing.AllocsPerRun(100, func() {
		for _, k := range keys {
			lookup(tr, k)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per 4 lookups, want 0", n)
	}
}
