package faultstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/boltstore"
	"github.com/nereusstream/nereus-go/metadata/faultstore"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/metadata/metadatatest"
)

func TestConformanceNoFaultsMem(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) metadata.Store {
		return faultstore.Wrap(memstore.New(), faultstore.Config{Seed: 1})
	})
}

func TestConformanceNoFaultsBolt(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) metadata.Store {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "m.db"), boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return faultstore.Wrap(s, faultstore.Config{Seed: 1})
	})
}

// Fail means not applied; lose means applied; both classify Unknown.
func TestFailAndLoseSemantics(t *testing.T) {
	ctx := context.Background()
	s := faultstore.Wrap(memstore.New(), faultstore.Config{Rules: []faultstore.Rule{
		{Kinds: faultstore.Put, Prefix: "fail/", FailRate: 1},
		{Kinds: faultstore.Put | faultstore.Delete, Prefix: "lose/", LoseRate: 1},
	}})
	defer s.Close()

	_, err := s.Put(ctx, "fail/a", []byte("x"), metadata.NotExists)
	if !errors.Is(err, faultstore.ErrInjected) || metadata.Classify(err) != metadata.Unknown {
		t.Fatalf("failed put: %v (%v)", err, metadata.Classify(err))
	}
	if _, err := s.Inner().Get(ctx, "fail/a"); !errors.Is(err, metadata.ErrKeyNotFound) {
		t.Fatalf("failed put was applied: %v", err)
	}

	_, err = s.Put(ctx, "lose/a", []byte("x"), metadata.NotExists)
	if !errors.Is(err, faultstore.ErrResponseLost) || metadata.Classify(err) != metadata.Unknown {
		t.Fatalf("lost put: %v (%v)", err, metadata.Classify(err))
	}
	r, err := s.Get(ctx, "lose/a") // Get is not faulted by these rules
	if err != nil || string(r.Value) != "x" {
		t.Fatalf("lost put not applied: %+v %v", r, err)
	}
	if err := s.Delete(ctx, "lose/a", r.Version); !errors.Is(err, faultstore.ErrResponseLost) {
		t.Fatalf("lost delete: %v", err)
	}
	if _, err := s.Get(ctx, "lose/a"); !errors.Is(err, metadata.ErrKeyNotFound) {
		t.Fatalf("lost delete not applied: %v", err)
	}

	// Unmatched prefix and kind: untouched.
	if _, err := s.Put(ctx, "ok/a", []byte("x"), metadata.NotExists); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st[faultstore.Put] != (faultstore.Counters{Calls: 3, Failed: 1, Lost: 1}) ||
		st[faultstore.Delete] != (faultstore.Counters{Calls: 1, Lost: 1}) ||
		st[faultstore.Get] != (faultstore.Counters{Calls: 2}) {
		t.Fatalf("stats %+v", st)
	}
}

// A whole Batch round trip can be failed (nothing applied) or lost
// (everything applied).
func TestBatchRoundTripFaults(t *testing.T) {
	ctx := context.Background()
	s := faultstore.Wrap(memstore.New(), faultstore.Config{})
	defer s.Close()
	ops := func(tag string) []metadata.Op {
		var out []metadata.Op
		for i := range 10 {
			out = append(out, metadata.Op{Kind: metadata.OpPut, Key: fmt.Sprintf("heads/%s/%d", tag, i), Expected: metadata.NotExists})
		}
		return out
	}
	s.SetRules(faultstore.Rule{Kinds: faultstore.Batch, Prefix: "heads/", FailRate: 1})
	if _, err := s.Batch(ctx, ops("f")); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("failed batch: %v", err)
	}
	if recs, _ := s.Inner().RangeScan(ctx, "heads/f/", "heads/f0", 0); len(recs) != 0 {
		t.Fatalf("failed batch applied %d ops", len(recs))
	}
	s.SetRules(faultstore.Rule{Kinds: faultstore.Batch, Prefix: "heads/", LoseRate: 1})
	res, err := s.Batch(ctx, ops("l"))
	if !errors.Is(err, faultstore.ErrResponseLost) || res != nil {
		t.Fatalf("lost batch: %v %v", res, err)
	}
	if recs, _ := s.Inner().RangeScan(ctx, "heads/l/", "heads/l0", 0); len(recs) != 10 {
		t.Fatalf("lost batch applied %d of 10 ops", len(recs))
	}
	// A batch whose keys miss the prefix is not faulted.
	if _, err := s.Batch(ctx, []metadata.Op{{Kind: metadata.OpPut, Key: "other"}}); err != nil {
		t.Fatal(err)
	}
}

// Skip and Limit pick exactly the Nth call: a response-loss cut after a
// given irreversible step.
func TestSkipLimitCutsExactlyOneCall(t *testing.T) {
	ctx := context.Background()
	s := faultstore.Wrap(memstore.New(), faultstore.Config{Rules: []faultstore.Rule{
		{Kinds: faultstore.Put, LoseRate: 1, Skip: 3, Limit: 1},
	}})
	defer s.Close()
	for i := range 8 {
		_, err := s.Put(ctx, fmt.Sprintf("k%d", i), nil, metadata.NotExists)
		if lost := errors.Is(err, faultstore.ErrResponseLost); lost != (i == 3) {
			t.Fatalf("put %d: %v", i, err)
		}
	}
}

// The same seed faults the same calls; a different seed faults others.
func TestDeterministicBySeed(t *testing.T) {
	run := func(seed uint64) string {
		s := faultstore.Wrap(memstore.New(), faultstore.Config{Seed: seed, Rules: []faultstore.Rule{
			{Kinds: faultstore.Put, FailRate: 0.3, LoseRate: 0.3},
		}})
		defer s.Close()
		out := make([]byte, 0, 200)
		for i := range 200 {
			_, err := s.Put(context.Background(), fmt.Sprintf("k%d", i%7), nil, metadata.AnyVersion)
			switch {
			case err == nil:
				out = append(out, '.')
			case errors.Is(err, faultstore.ErrInjected):
				out = append(out, 'F')
			case errors.Is(err, faultstore.ErrResponseLost):
				out = append(out, 'L')
			default:
				t.Fatal(err)
			}
		}
		return string(out)
	}
	a, b, c := run(42), run(42), run(43)
	if a != b {
		t.Fatalf("same seed, different faults:\n%s\n%s", a, b)
	}
	if a == c {
		t.Fatalf("different seeds, same faults: %s", a)
	}
	var f, l int
	for _, ch := range a {
		switch ch {
		case 'F':
			f++
		case 'L':
			l++
		}
	}
	// 30% fail, then 30% of the remaining 70% lost: expect ~60 and ~42.
	if f < 35 || f > 85 || l < 20 || l > 65 {
		t.Fatalf("fault mix off: %d failed, %d lost of 200: %s", f, l, a)
	}
}

// Latency is added (and counted) and respects the caller's context.
func TestLatency(t *testing.T) {
	s := faultstore.Wrap(memstore.New(), faultstore.Config{Rules: []faultstore.Rule{
		{Kinds: faultstore.Get, Latency: time.Hour},
	}})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, "k")
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("delayed Get after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("delayed Get ignored its context")
	}
	if st := s.Stats()[faultstore.Get]; st.Delayed != 1 {
		t.Fatalf("stats %+v", st)
	}
	s.SetRules(faultstore.Rule{Kinds: faultstore.Get, Latency: 20 * time.Millisecond})
	start := time.Now()
	_, _ = s.Get(context.Background(), "k")
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("Get took %v, want >= 20ms of injected latency", d)
	}
}
