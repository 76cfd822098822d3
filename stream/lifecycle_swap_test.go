package stream_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// TestGenerationSwapUnderReaders: on each Object WAL profile, readers
// re-read a stream from offset 0 while it is appended to, materialized
// (generations replace the WAL as the source of ranges) and GC retires
// the WAL index entries and deletes the segments those ranges came from.
// No read fails, none has a gap or a duplicate, and every entry has the
// bytes it was appended with. (The BookKeeper profiles:
// stream/bkwal TestBookKeeperProfilesLifecycle.)
func TestGenerationSwapUnderReaders(t *testing.T) {
	for _, prof := range []stream.Profile{stream.ObjectWALAsyncObject, stream.ObjectWALSyncObject} {
		t.Run(prof.String(), func(t *testing.T) {
			e := newLCEnv(t)
			ctx := ctxT(t)
			// No tail cache (1 byte holds nothing): every read goes to the
			// WAL or a generation, so the readers meet the swap.
			w, err := objectwal.Open(ctx, objectwal.Config{Store: e.objects, Prefix: "wal/b1", FlushInterval: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			c, err := stream.Open(ctx, stream.Config{Metadata: e.meta, ObjectWAL: w, ObjectStore: e.objects, WriterID: "b1",
				Lifecycle: e.lc, RetentionInterval: time.Hour, TailCacheBytes: 1, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			info, err := c.Create(ctx, "swap", stream.CreateOptions{Profile: prof})
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: "b1"})
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var passes atomic.Int64
			errs := make(chan error, 4)
			var wg sync.WaitGroup
			for r := 0; r < 3; r++ {
				wg.Add(1)
				go func(maxEntries int) {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						next := int64(0)
						for {
							res, err := c.Read(ctx, info.ID, next, stream.ReadOptions{MaxEntries: maxEntries})
							if err != nil {
								errs <- fmt.Errorf("read at %d: %w", next, err)
								return
							}
							for _, en := range res.Entries {
								if en.Offset != next {
									errs <- fmt.Errorf("gap or duplicate: entry at %d, expected %d", en.Offset, next)
									return
								}
								if !bytes.Equal(en.Payload, payloadOf(int(en.Offset))) {
									errs <- fmt.Errorf("offset %d: %q", en.Offset, en.Payload)
									return
								}
								next = en.Offset + int64(en.RecordCount)
							}
							if len(res.Entries) == 0 {
								break
							}
						}
						passes.Add(1)
					}
				}(7 + 13*r)
			}
			// GC runs all the time too: it retires WAL index entries below
			// the generations and deletes their segments under the readers.
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := c.CollectGarbage(ctx); err != nil {
						errs <- fmt.Errorf("gc: %w", err)
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
			segsAt := func() int { return len(e.keys(t, "wal/b1/seg/")) }
			appendN(t, c, s, 0, 600)
			segsWritten := segsAt()
			waitFor(t, "generations and reclaimed segments", func() bool {
				st := c.LifecycleStats()
				return st.Materialized >= 3 && st.GCSegments > 0
			})
			p0 := passes.Load()
			waitFor(t, "more read passes over the swapped sources", func() bool { return passes.Load() >= p0+6 })
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			st, ls := c.Stats(), c.LifecycleStats()
			if st.GenerationReads == 0 || st.WALReads == 0 {
				t.Fatalf("reads never used both sources: %+v", st)
			}
			if end := readAll(t, c, info.ID, 0, appendedPayloads(600)); end != 600 {
				t.Fatalf("read to %d", end)
			}
			t.Logf("%s: %d read passes; %d generations, %d segments deleted (%d on the store right after the appends); %d generation reads, %d read retries",
				prof, passes.Load(), ls.Materialized, ls.GCSegments, segsWritten, st.GenerationReads, st.ReadRetries)
		})
	}
}

func appendedPayloads(n int) map[int64][]byte {
	out := map[int64][]byte{}
	for i := 0; i < n; i++ {
		out[int64(i)] = payloadOf(i)
	}
	return out
}
