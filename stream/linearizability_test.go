package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

type appendOut struct {
	ok, unknown bool
	start       int64
}

// logModel is a single stream as a list of payloads. An append with an
// unknown outcome may or may not have happened (but never twice); a read
// from offset 0 must return exactly the committed list.
var logModel = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{""} },
	Step: func(state, input, output interface{}) []interface{} {
		st := state.(string)
		n := 0
		if st != "" {
			n = strings.Count(st, ",") + 1
		}
		switch in := input.(type) {
		case string: // append of payload `in`
			out := output.(appendOut)
			next := in
			if st != "" {
				next = st + "," + in
			}
			switch {
			case out.ok:
				if out.start != int64(n) {
					return nil
				}
				return []interface{}{next}
			case out.unknown:
				return []interface{}{st, next}
			default:
				return []interface{}{st}
			}
		default: // read
			if output.(string) == st {
				return []interface{}{st}
			}
			return nil
		}
	},
	DescribeOperation: func(input, output interface{}) string {
		if s, ok := input.(string); ok {
			return fmt.Sprintf("append(%s) -> %+v", s, output)
		}
		return fmt.Sprintf("read() -> %q", output)
	},
}

// TestLinearizableUnderMetadataFaults runs concurrent appends and reads on
// one stream while the metadata store fails calls and loses responses, and
// checks the histories with porcupine: once through the owning process,
// once through a second process that reads from the store.
func TestLinearizableUnderMetadataFaults(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runLinearizability(t, seed) })
	}
}

func runLinearizability(t *testing.T, seed int64) {
	meta := newLossyStore(memstore.New(), seed, 0.05, 0.05)
	prov := memprovider.New(seed, memprovider.Faults{WriteError: 0.02, MaxDelay: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := func(writer string) *stream.Core {
		c, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: prov, WriterID: writer})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c1, c2 := open("owner"), open("reader")
	var info stream.Info
	var err error
	for i := 0; i < 50; i++ { // setup may hit injected faults too
		if info, err = c1.Create(ctx, "lin", stream.CreateOptions{}); err == nil || errors.Is(err, stream.ErrStreamExists) {
			break
		}
	}
	var sess stream.Session
	for i := 0; i < 50; i++ {
		if sess, err = c1.AcquireSession(ctx, info.ID, stream.SessionOptions{}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var mu sync.Mutex
	var ownerHist, storeHist []porcupine.Operation
	record := func(h *[]porcupine.Operation, op porcupine.Operation) {
		mu.Lock()
		*h = append(*h, op)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	var unknowns atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				id := fmt.Sprintf("w%d.%d", w, i)
				call := now()
				actx, acancel := context.WithTimeout(ctx, 2*time.Second)
				r, err := c1.Append(actx, sess, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte(id), RecordCount: 1}}, ExpectedStart: -1})
				acancel()
				out := appendOut{ok: err == nil, start: r.Start}
				if stream.CommitCertainty(err) == stream.MaybeCommitted {
					out.unknown = true
					unknowns.Add(1)
				}
				op := porcupine.Operation{ClientId: w, Input: id, Call: call, Output: out, Return: now()}
				record(&ownerHist, op)
				record(&storeHist, op)
			}
		}(w)
	}
	readAll := func(c *stream.Core) (string, bool) {
		var ids []string
		from := int64(0)
		for {
			res, err := c.Read(ctx, info.ID, from, stream.ReadOptions{MaxEntries: 1000})
			if err != nil {
				return "", false
			}
			for _, e := range res.Entries {
				ids = append(ids, string(e.Payload))
			}
			if res.Next >= res.EndOffset || len(res.Entries) == 0 {
				return strings.Join(ids, ","), true
			}
			from = res.Next
		}
	}
	var stop atomic.Bool
	for r, c := range []*stream.Core{c1, c2} {
		hist := &ownerHist
		if r == 1 {
			hist = &storeHist
		}
		wg.Add(1)
		go func(r int, c *stream.Core, hist *[]porcupine.Operation) {
			defer wg.Done()
			for !stop.Load() {
				call := now()
				got, ok := readAll(c)
				if ok {
					record(hist, porcupine.Operation{ClientId: 10 + r, Input: nil, Call: call, Output: got, Return: now()})
				}
				time.Sleep(time.Millisecond)
			}
		}(r, c, hist)
	}
	// Readers stop once the writers are done.
	go func() {
		for {
			mu.Lock()
			n := 0
			for _, op := range ownerHist {
				if _, ok := op.Input.(string); ok {
					n++
				}
			}
			mu.Unlock()
			if n >= 100 || ctx.Err() != nil {
				stop.Store(true)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	wg.Wait()
	t.Logf("seed %d: %d injected metadata faults, %d unknown appends, %d owner ops, %d store ops",
		seed, meta.injected.Load(), unknowns.Load(), len(ownerHist), len(storeHist))
	for name, h := range map[string][]porcupine.Operation{"owner": ownerHist, "store": storeHist} {
		res, _ := porcupine.CheckOperationsVerbose(logModel.ToModel(), h, 30*time.Second)
		if res != porcupine.Ok {
			t.Fatalf("%s history is not linearizable (%v)", name, res)
		}
	}
}
