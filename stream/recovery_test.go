package stream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/provider/memprovider"
)

// TestTakeoverByNextIncarnation: a writer process is replaced by its next
// incarnation (same WriterID) while it is still running and appending — the
// old one becomes a zombie. With metadata faults and WAL write failures
// injected throughout, every append either process acknowledged must read
// back at the offset it was given, no payload may appear twice, and the
// zombie must be fenced.
func TestTakeoverByNextIncarnation(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runTakeover(t, seed) })
	}
}

func runTakeover(t *testing.T, seed int64) {
	meta := newLossyStore(memstore.New(), seed, 0.03, 0.03)
	prov := memprovider.New(seed, memprovider.Faults{WriteError: 0.01, MaxDelay: 500 * time.Microsecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := func() *stream.Core {
		for {
			c, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: prov, WriterID: "broker-1"})
			if err == nil {
				return c
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
		}
	}
	var acked sync.Map // payload -> offset
	const streams = 3
	// Writers of every generation create (or find) the same stream names,
	// so they all learn the same IDs; idsMu orders their stores (several
	// generations store ids[s] concurrently), writers.Wait the audit after
	// them.
	var idsMu sync.Mutex
	ids := make([]stream.ID, streams)
	var cores []*stream.Core
	// The audit waits for the writers of EVERY generation, not only the
	// last: a writer of an older generation may still be retrying Create or
	// AcquireSession when a newer one has finished, and then takes the
	// stream over (same WriterID) and appends. An append it gets
	// acknowledged after the audit read the stream would look lost.
	var writers sync.WaitGroup
	for gen := 0; gen < 4; gen++ {
		prov.Restart()
		c := open()
		cores = append(cores, c)
		for s := 0; s < streams; s++ {
			writers.Add(1)
			go func(s int) {
				defer writers.Done()
				var info stream.Info
				var err error
				for {
					info, err = c.Create(ctx, fmt.Sprint("st", s), stream.CreateOptions{})
					if err == nil || errors.Is(err, stream.ErrStreamExists) {
						break
					}
					if ctx.Err() != nil {
						t.Errorf("create st%d: %v", s, err)
						return
					}
				}
				idsMu.Lock()
				ids[s] = info.ID
				idsMu.Unlock()
				var sess stream.Session
				for {
					if sess, err = c.AcquireSession(ctx, info.ID, stream.SessionOptions{}); err == nil {
						break
					}
					if ctx.Err() != nil {
						t.Errorf("acquire st%d: %v", s, err)
						return
					}
				}
				for i := 0; i < 40; i++ {
					p := fmt.Sprintf("g%d.s%d.%d", gen, s, i)
					r, err := c.Append(ctx, sess, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte(p), RecordCount: 1}}, ExpectedStart: -1})
					if err == nil {
						acked.Store(p, r.Start)
					} else if errors.Is(err, stream.ErrFenced) {
						return
					}
				}
			}(s)
		}
		// The next incarnation starts while this one is mid-flight.
		time.Sleep(time.Duration(5+seed) * time.Millisecond)
	}
	writers.Wait()
	meta.enabled.Store(false)
	for _, c := range cores {
		defer c.Close()
	}
	check := cores[len(cores)-1]
	seen := map[string]int64{}
	for s := 0; s < streams; s++ {
		from := int64(0)
		for {
			res, err := check.Read(ctx, ids[s], from, stream.ReadOptions{MaxEntries: 500})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range res.Entries {
				if prev, dup := seen[string(e.Payload)]; dup {
					t.Fatalf("payload %s committed twice (offsets %d and %d)", e.Payload, prev, e.Offset)
				}
				seen[string(e.Payload)] = e.Offset
			}
			if len(res.Entries) == 0 || res.Next >= res.EndOffset {
				break
			}
			from = res.Next
		}
	}
	n := 0
	acked.Range(func(k, v any) bool {
		n++
		off, ok := seen[k.(string)]
		if !ok {
			t.Errorf("acknowledged append %s@%d lost", k, v)
		} else if off != v.(int64) {
			t.Errorf("acknowledged append %s moved from %d to %d", k, v, off)
		}
		return true
	})
	t.Logf("seed %d: %d acked, %d committed, %d injected metadata faults", seed, n, len(seen), meta.injected.Load())
}
