package bkwal_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper/bkfake"
	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	"github.com/nereusstream/nereus-go/bookkeeper/proto"
	"github.com/nereusstream/nereus-go/metadata/faultstore"
	mdmem "github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/bkwal"
)

// TestGenerationsUnderFaults: four incarnations of one writer identity
// follow each other without a graceful close, each taking over while the
// previous one still runs, with lost and failed metadata answers and with
// bookies dropping, failing and delaying adds (so ledgers are tainted and
// rolled over). Invariants: every acknowledged append reads back at its
// offset, nothing is committed twice, offsets stay dense, and at the end
// no ledger is left OPEN.
func TestGenerationsUnderFaults(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			fs := faultstore.Wrap(mdmem.New(), faultstore.Config{Seed: seed})
			f := newFixture(t, 4, fs)
			f.addTimeout = time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var rngMu sync.Mutex
			rng := rand.New(rand.NewPCG(seed, 7))
			for _, b := range f.fc.Bookies {
				b.SetIntercept(func(r proto.Request) bkfake.Action {
					if r.Op != proto.OpAdd || r.Flags&proto.FlagRecoveryAdd != 0 {
						return bkfake.Action{}
					}
					rngMu.Lock()
					x := rng.Float64()
					rngMu.Unlock()
					switch {
					case x < 0.004:
						return bkfake.Action{Drop: true}
					case x < 0.008:
						return bkfake.Action{RC: proto.EIO}
					case x < 0.012:
						return bkfake.Action{DropAfterApply: true}
					case x < 0.05:
						return bkfake.Action{Delay: time.Millisecond}
					}
					return bkfake.Action{}
				})
			}
			mod := func(cfg *bkwal.Config) { cfg.MaxLedgerEntries = 40; cfg.OpTimeout = 5 * time.Second }
			open := func() *stream.Core {
				for attempt := 0; ; attempt++ {
					p := f.provider(t, "b1", mod)
					c, err := stream.Open(ctx, stream.Config{Metadata: fs, BookKeeperWAL: p, WriterID: "b1", Logger: quiet()})
					if err == nil {
						return c
					}
					_ = p.Close(ctx)
					if ctx.Err() != nil {
						t.Fatal(err)
					}
				}
			}
			fs.SetRules(faultstore.Rule{Kinds: faultstore.Batch | faultstore.Put | faultstore.Get | faultstore.RangeScan, LoseRate: 0.03, FailRate: 0.03})
			var acked sync.Map
			const streams = 3
			ids := make([]stream.ID, streams)
			for gen := 0; gen < 4; gen++ {
				c := open()
				var wg sync.WaitGroup
				for s := 0; s < streams; s++ {
					wg.Add(1)
					go func(s int) {
						defer wg.Done()
						var info stream.Info
						var err error
						for ctx.Err() == nil {
							info, err = c.Create(ctx, fmt.Sprint("st", s), stream.CreateOptions{Profile: stream.BookKeeperWALOnly})
							if err == nil || errors.Is(err, stream.ErrStreamExists) {
								break
							}
						}
						ids[s] = info.ID
						var sess stream.Session
						for ctx.Err() == nil {
							if sess, err = c.AcquireSession(ctx, info.ID, stream.SessionOptions{}); err == nil {
								break
							}
						}
						for i := 0; i < 40; i++ {
							p := fmt.Sprintf("g%d.s%d.%d", gen, s, i)
							r, err := c.Append(ctx, sess, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte(p), RecordCount: 1}}, ExpectedStart: -1})
							if err == nil {
								acked.Store(p, ack{s, r.Start})
							} else if errors.Is(err, stream.ErrFenced) {
								return
							}
						}
					}(s)
				}
				wg.Wait()
				go c.Close() // no graceful drain: the next incarnation takes over
			}
			fs.SetRules()
			for _, b := range f.fc.Bookies {
				b.SetIntercept(nil)
			}
			c := open()
			defer c.Close()
			total := 0
			for s, id := range ids {
				seen := map[string]int64{}
				for i, e := range readAll(t, c, id) {
					if _, dup := seen[string(e.Payload)]; dup {
						t.Fatalf("%s committed twice", e.Payload)
					}
					if e.Offset != int64(i) {
						t.Fatalf("stream %d: entry %d at offset %d", s, i, e.Offset)
					}
					seen[string(e.Payload)] = e.Offset
				}
				total += len(seen)
				acked.Range(func(k, v any) bool {
					a := v.(ack)
					if a.stream != s {
						return true
					}
					if got, ok := seen[k.(string)]; !ok || got != a.offset {
						t.Fatalf("acknowledged %s@%d reads back as %d (present %v)", k, a.offset, got, ok)
					}
					return true
				})
			}
			ledgers := 0
			for _, id := range ids {
				ls := f.ledgersOf(t, id)
				ledgers += len(ls)
				for lid, md := range ls {
					if md.State != meta.StateClosed {
						t.Fatalf("ledger %d left %s after the last takeover", lid, md.State)
					}
				}
			}
			n := 0
			acked.Range(func(any, any) bool { n++; return true })
			t.Logf("seed %d: %d acked, %d committed, %d ledgers kept, metadata faults %+v", seed, n, total, ledgers, fs.Stats())
		})
	}
}

type ack struct {
	stream int
	offset int64
}
