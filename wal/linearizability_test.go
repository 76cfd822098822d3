package wal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

// The model: an exactly-once, totally ordered log. An Append whose outcome is
// unknown is a nondeterministic step (it may or may not have landed, but
// never twice); an Append that resolved must sit exactly at its returned
// sequence; a read must equal the log.

type appendIn struct{ value string }
type appendOut struct {
	known bool
	seq   uint64
}
type readIn struct{}
type readOut struct{ values []string }

var logModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{[]string(nil)} },
	Step: func(state, input, output any) []any {
		log := state.([]string)
		switch in := input.(type) {
		case appendIn:
			out := output.(appendOut)
			next := append(slices.Clip(log), in.value)
			if !out.known {
				return []any{log, next}
			}
			if uint64(len(log)) != out.seq {
				return nil
			}
			return []any{next}
		case readIn:
			if slices.Equal(log, output.(readOut).values) {
				return []any{log}
			}
			return nil
		}
		return nil
	},
	Equal: func(a, b any) bool { return slices.Equal(a.([]string), b.([]string)) },
	DescribeOperation: func(input, output any) string {
		switch in := input.(type) {
		case appendIn:
			o := output.(appendOut)
			if !o.known {
				return fmt.Sprintf("append(%s) -> unknown", in.value)
			}
			return fmt.Sprintf("append(%s) -> %d", in.value, o.seq)
		default:
			return fmt.Sprintf("read -> %v", output.(readOut).values)
		}
	},
}

// readWholeLog reads the committed log (manifest, then every segment).
func readWholeLog(ctx context.Context, store objectstore.ObjectStore) ([]string, error) {
	m, _, ok, err := NewStore(store, testManifest).Load(ctx)
	if err != nil || !ok {
		return nil, err
	}
	es, _ := m.Entries()
	var out []string
	for _, e := range es {
		data, _, err := store.Get(ctx, e.Location)
		if err != nil {
			return nil, err
		}
		recs, _, err := decodeSegment(data)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			out = append(out, string(r))
		}
	}
	return out, nil
}

func TestLinearizableUnderFaults(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	if s := testSeed(t); s != 20260101 {
		seeds = []uint64{uint64(s)}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runLinearizability(t, seed) })
	}
}

func runLinearizability(t *testing.T, seed uint64) {
	ctx := testCtx(t)
	inner := memstore.New()
	fs := newFaultStore(inner)
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var faults atomic.Bool
	fs.setRule(func(op, key string) fault {
		if !faults.Load() {
			return pass
		}
		rngMu.Lock()
		x := rng.Float64()
		rngMu.Unlock()
		switch {
		case op == "put" && key == testManifest:
			switch {
			case x < 0.30:
				return failAfter // applied, response lost
			case x < 0.40:
				return failClean
			}
		case op == "put":
			if x < 0.10 {
				return failClean
			}
			if x < 0.15 {
				return failAfter
			}
		case op == "get" && key == testManifest && x < 0.05:
			return failClean
		}
		return pass
	})
	cfg := testConfig()
	cfg.ManifestMaxAttempts = 3
	cfg.UploadMaxAttempts = 3

	var pmu sync.Mutex
	var prod *Producer
	producers := 0
	current := func(stale *Producer) (*Producer, error) {
		pmu.Lock()
		defer pmu.Unlock()
		if prod != nil && prod != stale {
			return prod, nil
		}
		if prod != nil {
			_ = prod.Close(ctx)
		}
		var err error
		for range 20 {
			if prod, err = NewProducer(ctx, fs, cfg); err == nil {
				producers++
				return prod, nil
			}
		}
		return nil, err
	}
	t.Cleanup(func() {
		if prod != nil {
			_ = prod.Close(context.Background())
		}
	})
	if _, err := current(nil); err != nil {
		t.Fatal(err)
	}
	faults.Store(true)

	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var hmu sync.Mutex
	var history []porcupine.Operation
	var unknownIdx []int
	record := func(op porcupine.Operation, unknown bool) {
		hmu.Lock()
		defer hmu.Unlock()
		if unknown {
			unknownIdx = append(unknownIdx, len(history))
		}
		history = append(history, op)
	}

	var wg sync.WaitGroup
	const clients, perClient = 4, 12
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				value := fmt.Sprintf("c%d-%d", c, i)
				var p *Producer
				for attempt := 0; ; attempt++ {
					var err error
					if p, err = current(p); err != nil {
						t.Error(err)
						return
					}
					call := now()
					d, err := p.Append(ctx, [][]byte{[]byte(value)}, nil)
					if errors.Is(err, ErrHalted) && attempt < 50 {
						continue // not enqueued: nothing happened; retry on a fresh producer
					}
					if err != nil {
						t.Error(err)
						return
					}
					seq, werr := d.Wait(ctx)
					ret := now()
					record(porcupine.Operation{ClientId: c, Input: appendIn{value}, Call: call,
						Output: appendOut{known: werr == nil, seq: seq}, Return: ret}, werr != nil)
					break
				}
			}
		})
	}
	wg.Go(func() {
		for range 15 {
			call := now()
			vals, err := readWholeLog(ctx, inner)
			if err != nil {
				t.Error(err)
				return
			}
			record(porcupine.Operation{ClientId: clients, Input: readIn{}, Call: call, Output: readOut{vals}, Return: now()}, false)
			time.Sleep(time.Millisecond) // spread reads over the run (not synchronisation)
		}
	})
	wg.Wait()
	// A final read after everything resolved.
	vals, err := readWholeLog(ctx, inner)
	if err != nil {
		t.Fatal(err)
	}
	end := now()
	history = append(history, porcupine.Operation{ClientId: clients, Input: readIn{}, Call: end, Output: readOut{vals}, Return: end + 1})
	// An unknown append may take effect at any time after its call.
	for _, i := range unknownIdx {
		history[i].Return = math.MaxInt64 / 2
	}
	seen := map[string]bool{}
	for _, v := range vals {
		if seen[v] {
			t.Fatalf("value %s in the log twice", v)
		}
		seen[v] = true
	}
	res, info := porcupine.CheckOperationsVerbose(logModel.ToModel(), history, 60*time.Second)
	if res == porcupine.Illegal {
		path := t.TempDir() + "/history.html"
		_ = porcupine.VisualizePath(logModel.ToModel(), info, path)
		t.Fatalf("history not linearizable (visualization: %s)", path)
	}
	if res != porcupine.Ok {
		t.Fatalf("linearizability check inconclusive: %v", res)
	}
	t.Logf("%d ops (%d unknown), %d records in log, %d producers", len(history), len(unknownIdx), len(vals), producers)
}
