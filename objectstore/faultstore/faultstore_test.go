package faultstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/faultstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/objectstore/objectstoretest"
)

var ctx = context.Background()

func TestConformanceFaultsDisabled(t *testing.T) {
	t.Run("memstore", func(t *testing.T) {
		objectstoretest.Run(t, func(t *testing.T) objectstore.ObjectStore {
			return faultstore.New(memstore.New(), faultstore.Config{Seed: 1})
		})
	})
	t.Run("fsstore", func(t *testing.T) {
		objectstoretest.Run(t, func(t *testing.T) objectstore.ObjectStore {
			fs, err := fsstore.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = fs.Close() })
			// Rules present but switched off: the wrapper must be transparent.
			s := faultstore.New(fs, faultstore.Config{Seed: 1, Rules: []faultstore.Rule{{Probability: 1, Kind: faultstore.FailClean}}})
			s.SetEnabled(false)
			return s
		})
	})
	t.Run("latency-only", func(t *testing.T) {
		objectstoretest.Run(t, func(t *testing.T) objectstore.ObjectStore {
			return faultstore.New(memstore.New(), faultstore.Config{Seed: 2, Rules: []faultstore.Rule{
				{Probability: 0.3, Kind: faultstore.Latency, Latency: 10 * time.Microsecond, MaxLatency: 200 * time.Microsecond},
			}})
		})
	})
}

func TestFailCleanIsNotApplied(t *testing.T) {
	s := faultstore.New(memstore.New(), faultstore.Config{Seed: 7, Rules: []faultstore.Rule{
		{Ops: []faultstore.Op{faultstore.OpPut}, Probability: 1, Kind: faultstore.FailClean},
	}})
	_, err := s.Put(ctx, "k", []byte("x"), objectstore.PutOptions{Mode: objectstore.PutCreate})
	if !errors.Is(err, faultstore.ErrInjected) || !errors.Is(err, objectstore.ErrConflict) {
		t.Fatalf("Put = %v", err)
	}
	if c := objectstore.Classify(err); c != objectstore.NotApplied {
		t.Fatalf("Classify = %v, want not-applied", c)
	}
	if _, _, err := s.Inner().Get(ctx, "k"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("clean failure reached the inner store: %v", err)
	}
	if c := s.Counts(faultstore.OpPut); c.Calls != 1 || c.FailedClean != 1 || c.LostResponses != 0 {
		t.Fatalf("counts %+v", c)
	}
	// Reads are untouched by a put-only rule.
	if _, _, err := s.Get(ctx, "k"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("Get = %v", err)
	}
}

func TestLoseResponseAppliedButUnknown(t *testing.T) {
	s := faultstore.New(memstore.New(), faultstore.Config{Seed: 7, Rules: []faultstore.Rule{
		{Ops: []faultstore.Op{faultstore.OpPut, faultstore.OpDelete}, Probability: 1, Kind: faultstore.LoseResponse},
	}})
	_, err := s.Put(ctx, "manifest", []byte("v1"), objectstore.PutOptions{Mode: objectstore.PutCreate})
	if !errors.Is(err, faultstore.ErrResponseLost) || objectstore.Classify(err) != objectstore.Unknown {
		t.Fatalf("Put = %v (%v), want lost response / unknown", err, objectstore.Classify(err))
	}
	// The write landed: re-reading proves it.
	got, v, err := s.Get(ctx, "manifest")
	if err != nil || string(got) != "v1" {
		t.Fatalf("Get after lost response = %q, %v", got, err)
	}
	// A retry of the create now loses against our own earlier write — the
	// trap that "re-read, never guess" avoids.
	_, err = s.Put(ctx, "manifest", []byte("v1"), objectstore.PutOptions{Mode: objectstore.PutCreate})
	if !errors.Is(err, faultstore.ErrResponseLost) {
		t.Fatalf("second Put = %v", err)
	}
	c := s.Counts(faultstore.OpPut)
	if c.LostResponses != 2 || c.LostResponsesApplied != 1 {
		t.Fatalf("counts %+v: want 2 lost, 1 applied (the retry hit ErrAlreadyExists)", c)
	}
	if err := s.Delete(ctx, "manifest", &v); !errors.Is(err, faultstore.ErrResponseLost) {
		t.Fatalf("Delete = %v", err)
	}
	if _, _, err := s.Get(ctx, "manifest"); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("lost delete did not apply: %v", err)
	}
}

func TestKeySubstringTargetsOneKey(t *testing.T) {
	s := faultstore.New(memstore.New(), faultstore.Config{Seed: 3, Rules: []faultstore.Rule{
		{KeySubstring: "manifest", Probability: 1, Kind: faultstore.FailClean},
	}})
	if _, err := s.Put(ctx, "log/manifest", []byte("x"), objectstore.PutOptions{}); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("manifest Put = %v", err)
	}
	if _, err := s.Put(ctx, "log/segment/1", []byte("x"), objectstore.PutOptions{}); err != nil {
		t.Fatalf("segment Put = %v", err)
	}
	for _, err := range s.List(ctx, "log/manifest") {
		if !errors.Is(err, faultstore.ErrInjected) {
			t.Fatalf("List(manifest prefix) = %v", err)
		}
	}
	n := 0
	for _, err := range s.List(ctx, "log/segment/") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("listed %d", n)
	}
}

func TestLimitAndSetEnabled(t *testing.T) {
	s := faultstore.New(memstore.New(), faultstore.Config{Seed: 3, Rules: []faultstore.Rule{
		{Probability: 1, Kind: faultstore.FailClean, Limit: 2},
	}})
	fails := 0
	for i := range 5 {
		if _, err := s.Put(ctx, fmt.Sprint(i), nil, objectstore.PutOptions{}); err != nil {
			fails++
		}
	}
	if fails != 2 {
		t.Fatalf("%d failures, want Limit 2", fails)
	}
	s2 := faultstore.New(memstore.New(), faultstore.Config{Seed: 3, Rules: []faultstore.Rule{{Probability: 1, Kind: faultstore.FailClean}}})
	s2.SetEnabled(false)
	if _, err := s2.Put(ctx, "k", nil, objectstore.PutOptions{}); err != nil {
		t.Fatalf("disabled store injected: %v", err)
	}
	s2.SetEnabled(true)
	if _, err := s2.Put(ctx, "k", nil, objectstore.PutOptions{}); err == nil {
		t.Fatalf("re-enabled store did not inject")
	}
}

// pattern runs a fixed workload and records which calls failed how.
func pattern(seed uint64) ([]string, faultstore.Counts) {
	s := faultstore.New(memstore.New(), faultstore.Config{Seed: seed, Rules: []faultstore.Rule{
		{Ops: []faultstore.Op{faultstore.OpPut}, Probability: 0.2, Kind: faultstore.FailClean},
		{Ops: []faultstore.Op{faultstore.OpPut}, Probability: 0.2, Kind: faultstore.LoseResponse},
		{Ops: []faultstore.Op{faultstore.OpGet}, Probability: 0.3, Kind: faultstore.FailClean, CleanErr: errors.New("transport")},
	}})
	var out []string
	for i := range 200 {
		key := fmt.Sprintf("k%d", i%17)
		_, err := s.Put(ctx, key, []byte{byte(i)}, objectstore.PutOptions{})
		_, _, gerr := s.Get(ctx, key)
		out = append(out, fmt.Sprintf("%v/%v", objectstore.Classify(err), gerr != nil && errors.Is(gerr, faultstore.ErrInjected)))
	}
	return out, s.Total()
}

func TestDeterministicFromSeed(t *testing.T) {
	a, ca := pattern(42)
	b, cb := pattern(42)
	if !slices.Equal(a, b) || ca != cb {
		t.Fatalf("same seed, different faults: %+v vs %+v", ca, cb)
	}
	c, cc := pattern(43)
	if slices.Equal(a, c) {
		t.Fatalf("different seeds gave identical fault patterns")
	}
	// Rates are roughly as configured: 200 puts, ~20%% clean, ~16%% lost.
	if ca.FailedClean < 40 || ca.LostResponses < 15 || cc.FailedClean < 40 {
		t.Fatalf("implausible fault counts: %+v / %+v", ca, cc)
	}
	if ca.Calls != 400 {
		t.Fatalf("calls %d, want 400", ca.Calls)
	}
}

// Decisions depend on (seed, rule, op, key, attempt), not on what other keys
// did in between, so concurrent workers on distinct keys see the same faults
// as a sequential run.
func TestDecisionsIndependentOfOtherKeys(t *testing.T) {
	rules := []faultstore.Rule{{Ops: []faultstore.Op{faultstore.OpPut}, Probability: 0.5, Kind: faultstore.FailClean}}
	run := func(interleave bool) []bool {
		s := faultstore.New(memstore.New(), faultstore.Config{Seed: 9, Rules: rules})
		var res []bool
		for i := range 50 {
			if interleave {
				_, _ = s.Put(ctx, fmt.Sprintf("noise-%d", i), nil, objectstore.PutOptions{})
			}
			_, err := s.Put(ctx, "target", nil, objectstore.PutOptions{})
			res = append(res, err != nil)
		}
		return res
	}
	if !slices.Equal(run(false), run(true)) {
		t.Fatalf("faults on one key changed when other keys were used")
	}
}

func TestLatencyHonoursContext(t *testing.T) {
	s := faultstore.New(memstore.New(), faultstore.Config{Seed: 1, Rules: []faultstore.Rule{
		{Probability: 1, Kind: faultstore.Latency, Latency: time.Hour},
	}})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Get(cctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get = %v", err)
	}
	if c := s.Counts(faultstore.OpGet); c.Delayed != 1 {
		t.Fatalf("counts %+v", c)
	}
}
