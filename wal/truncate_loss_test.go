package wal

import (
	"testing"

	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

// Response-loss cuts of a truncation-only manifest commit (an idle
// producer's Truncate). The caller deletes or keeps the segments a landed
// truncation dropped, so every dropped entry must be reported exactly once:
// an entry that is gone from the manifest but never reported is a segment
// nobody deletes until a restart rediscovers it.

// threeEntries appends three single-record segments (sequences 0, 1, 2).
func threeEntries(t *testing.T, p *Producer) {
	t.Helper()
	ctx := testCtx(t)
	for _, r := range []string{"a", "b", "c"} {
		d, err := p.Append(ctx, [][]byte{[]byte(r)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		mustWait(t, d)
	}
}

func throughPlan(seq uint64) TruncatePlan {
	return func(entries []Entry) (uint64, bool) { return seq, len(entries) > 0 }
}

func manifestFirst(t *testing.T, fs *faultStore) (uint64, int) {
	t.Helper()
	m, _, _, err := NewStore(memstoreOf(fs), testManifest).Load(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return m.firstLive(), m.Count()
}

func wantDropped(t *testing.T, dropped []Entry, seqs ...uint64) {
	t.Helper()
	if len(dropped) != len(seqs) {
		t.Fatalf("dropped %+v, want sequences %v", dropped, seqs)
	}
	for i, s := range seqs {
		if dropped[i].Sequence != s {
			t.Fatalf("dropped %+v, want sequences %v", dropped, seqs)
		}
	}
}

// TestTruncationLostResponseReportsDrops: the truncation commit applies but
// its response is lost. The re-read manifest's first remaining sequence
// proves it landed (an idle commit has no entries of its own to find), and
// the entries it dropped are reported. Before, the producer judged it "not
// landed", re-planned on the truncated manifest and reported nothing.
func TestTruncationLostResponseReportsDrops(t *testing.T) {
	fs := newFaultStore(memstore.New())
	p := newTestProducer(t, fs, testConfig())
	threeEntries(t, p)
	lost := 0
	fs.setRule(func(op, key string) fault {
		if op == "put" && key == testManifest && lost == 0 {
			lost++
			return failAfter
		}
		return pass
	})
	dropped, err := p.Truncate(testCtx(t), throughPlan(1))
	if err != nil {
		t.Fatal(err)
	}
	if lost != 1 {
		t.Fatal("the cut never fired")
	}
	wantDropped(t, dropped, 0, 1)
	if first, n := manifestFirst(t, fs); first != 2 || n != 1 {
		t.Fatalf("manifest starts at %d with %d entries, want 2 and 1", first, n)
	}
	// Nothing is reported twice.
	dropped, err = p.Truncate(testCtx(t), throughPlan(2))
	if err != nil {
		t.Fatal(err)
	}
	wantDropped(t, dropped, 2)
}

// TestTruncationUnknownThenFailedReportsLater: every attempt of a
// truncation commit loses its response (the first applied, the others
// fail cleanly on their re-read), so Truncate fails; what the applied
// attempt dropped is reported by the next truncation that succeeds.
func TestTruncationUnknownThenFailedReportsLater(t *testing.T) {
	fs := newFaultStore(memstore.New())
	cfg := testConfig()
	cfg.ManifestMaxAttempts = 2
	p := newTestProducer(t, fs, cfg)
	threeEntries(t, p)
	puts := 0
	fs.setRule(func(op, key string) fault {
		switch {
		case op == "put" && key == testManifest:
			puts++
			if puts == 1 {
				return failAfter
			}
			return failClean
		case op == "get" && key == testManifest:
			return failClean
		}
		return pass
	})
	if dropped, err := p.Truncate(testCtx(t), throughPlan(1)); err == nil {
		t.Fatalf("truncation succeeded through a failing store (dropped %+v)", dropped)
	}
	if first, _ := manifestFirst(t, fs); first != 2 {
		t.Fatalf("the first attempt did not apply (manifest starts at %d)", first)
	}
	fs.setRule(nil)
	dropped, err := p.Truncate(testCtx(t), throughPlan(2))
	if err != nil {
		t.Fatal(err)
	}
	wantDropped(t, dropped, 0, 1, 2)
}

// TestTruncationLostResponseNotApplied: the response is lost and the write
// did not apply (failed before the store saw it, then the re-read shows
// the old manifest): the re-plan drops and reports the entries once.
func TestTruncationLostResponseNotApplied(t *testing.T) {
	fs := newFaultStore(memstore.New())
	p := newTestProducer(t, fs, testConfig())
	threeEntries(t, p)
	failed := 0
	fs.setRule(func(op, key string) fault {
		if op == "put" && key == testManifest && failed == 0 {
			failed++
			return failClean
		}
		return pass
	})
	dropped, err := p.Truncate(testCtx(t), throughPlan(1))
	if err != nil {
		t.Fatal(err)
	}
	wantDropped(t, dropped, 0, 1)
	if first, _ := manifestFirst(t, fs); first != 2 {
		t.Fatalf("manifest starts at %d, want 2", first)
	}
}

// TestTruncationDroppingNothingWritesNothing: a truncation-only commit
// whose plan drops no entry does not rewrite the manifest. An idle Object
// WAL's truncator may be woken by a release that changes nothing; before,
// each such pass put an unchanged manifest (found by the Object WAL's
// TestIdleProviderDoesNoIO under load).
func TestTruncationDroppingNothingWritesNothing(t *testing.T) {
	fs := newFaultStore(memstore.New())
	p := newTestProducer(t, fs, testConfig())
	threeEntries(t, p)
	puts := 0
	fs.setRule(func(op, key string) fault {
		if op == "put" && key == testManifest {
			puts++
		}
		return pass
	})
	dropped, err := p.Truncate(testCtx(t), throughPlan(0))
	if err != nil {
		t.Fatal(err)
	}
	wantDropped(t, dropped, 0)
	if puts != 1 {
		t.Fatalf("a dropping truncation wrote the manifest %d times, want 1", puts)
	}
	declines := func(entries []Entry) (uint64, bool) { return 0, false }
	for _, plan := range []TruncatePlan{declines, throughPlan(0)} { // the second is already applied
		dropped, err := p.Truncate(testCtx(t), plan)
		if err != nil {
			t.Fatal(err)
		}
		wantDropped(t, dropped)
	}
	if puts != 1 {
		t.Fatalf("truncations that drop nothing wrote the manifest %d more times", puts-1)
	}
	if first, n := manifestFirst(t, fs); first != 1 || n != 2 {
		t.Fatalf("manifest starts at %d with %d entries, want 1 and 2", first, n)
	}
}
