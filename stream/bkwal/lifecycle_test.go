package bkwal_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/bkwal"
)

// lifecycleCore is a core on the BookKeeper WAL (fake bookies) with an
// object store for generations and a lifecycle tuned for tests.
func (f *fixture) lifecycleCore(t *testing.T, writer string, lc stream.LifecycleConfig) (*stream.Core, *bkwal.Provider, *objmem.Store) {
	t.Helper()
	p := f.provider(t, writer, func(c *bkwal.Config) { c.MaxLedgerEntries = 50 })
	objs := objmem.New()
	c, err := stream.Open(ctxT(t), stream.Config{Metadata: f.meta, BookKeeperWAL: p, ObjectStore: objs, WriterID: writer,
		Logger: quiet(), Lifecycle: lc, RetentionInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, p, objs
}

func testLC() stream.LifecycleConfig {
	return stream.LifecycleConfig{Interval: 20 * time.Millisecond, GenerationBytes: 2 << 10, GenerationMaxAge: 100 * time.Millisecond,
		GCInterval: time.Hour, GCGrace: 20 * time.Millisecond}
}

func objectCount(t *testing.T, s *objmem.Store, prefix string) int {
	n := 0
	for _, err := range s.List(context.Background(), prefix) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func appendBatches(t *testing.T, c *stream.Core, s stream.Session, n int) [][]byte {
	t.Helper()
	var all [][]byte
	for i := 0; i < n; i++ {
		p := []byte(fmt.Sprintf("payload-%04d-%s", i, bytes.Repeat([]byte{'z'}, 40)))
		if _, err := c.Append(ctxT(t), s, stream.AppendRequest{Entries: []stream.Entry{{Payload: p, RecordCount: 1}}, ExpectedStart: -1}); err != nil {
			t.Fatal(err)
		}
		all = append(all, p)
	}
	return all
}

func TestBookKeeperProfilesLifecycle(t *testing.T) {
	for _, prof := range []stream.Profile{stream.BookKeeperWALOnly, stream.BookKeeperWALAsyncObject, stream.BookKeeperWALSyncObject} {
		t.Run(prof.String(), func(t *testing.T) {
			f := newFixture(t, 3, nil)
			c, p, objs := f.lifecycleCore(t, "b1", testLC())
			ctx := ctxT(t)
			info, err := c.Create(ctx, "s-"+prof.String(), stream.CreateOptions{Profile: prof})
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.AcquireSession(ctx, info.ID, stream.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// A reader re-reads the stream from 0 while generations replace
			// the ledgers as its source: no error, no gap, no duplicate,
			// identical bytes.
			stop := make(chan struct{})
			readerErr := make(chan error, 1)
			var acked sync.Map
			go func() {
				defer close(readerErr)
				for {
					select {
					case <-stop:
						return
					default:
					}
					next := int64(0)
					for {
						res, err := c.Read(ctxT(t), info.ID, next, stream.ReadOptions{MaxEntries: 37})
						if err != nil {
							readerErr <- fmt.Errorf("read at %d: %w", next, err)
							return
						}
						for _, e := range res.Entries {
							if e.Offset != next {
								readerErr <- fmt.Errorf("gap or duplicate: entry at %d, expected %d", e.Offset, next)
								return
							}
							if w, ok := acked.Load(e.Offset); ok && !bytes.Equal(w.([]byte), e.Payload) {
								readerErr <- fmt.Errorf("offset %d: %q, acked %q", e.Offset, e.Payload, w)
								return
							}
							next = e.Offset + int64(e.RecordCount)
						}
						if len(res.Entries) == 0 {
							break
						}
					}
				}
			}()
			want := appendBatches(t, c, s, 200)
			for i, p := range want {
				acked.Store(int64(i), p)
			}
			if prof == stream.BookKeeperWALSyncObject {
				// Acknowledged only once a generation covers it.
				in, err := c.Describe(ctx, info.ID)
				if err != nil {
					t.Fatal(err)
				}
				if objectCount(t, objs, "gen/") == 0 || in.EndOffset != 200 {
					t.Fatalf("sync-object append acknowledged without a generation (%d objects)", objectCount(t, objs, "gen/"))
				}
			}
			if prof != stream.BookKeeperWALOnly {
				deadline := time.Now().Add(20 * time.Second)
				for c.LifecycleStats().Materialized == 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if c.LifecycleStats().Materialized == 0 {
					t.Fatal("nothing materialized")
				}
			} else if n := objectCount(t, objs, "gen/"); n != 0 {
				t.Fatalf("BOOKKEEPER_WAL_ONLY wrote %d generation objects", n)
			}
			time.Sleep(150 * time.Millisecond) // a few more passes over the swapped source
			close(stop)
			if err := <-readerErr; err != nil {
				t.Fatalf("concurrent reader: %v", err)
			}
			got := readAll(t, c, info.ID)
			if len(got) != len(want) {
				t.Fatalf("read %d entries, want %d", len(got), len(want))
			}
			for i, e := range got {
				if !bytes.Equal(e.Payload, want[i]) {
					t.Fatalf("entry %d: %q", i, e.Payload)
				}
			}
			// Release the session so every ledger settles, trim, and GC
			// reclaims the ledgers wholly below the start.
			if err := c.ReleaseSession(ctx, s); err != nil {
				t.Fatal(err)
			}
			before := ledgerCount(t, p)
			if err := c.Trim(ctx, info.ID, 190); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for ledgerCount(t, p) >= before && time.Now().Before(deadline) {
				if _, err := c.CollectGarbage(ctx); err != nil {
					t.Fatal(err)
				}
				time.Sleep(30 * time.Millisecond)
			}
			if after := ledgerCount(t, p); after >= before {
				t.Fatalf("ledgers %d -> %d; pending %+v", before, after, c.GCStatus().Pending)
			}
			res, err := c.Read(ctx, info.ID, 190, stream.ReadOptions{})
			if err != nil || len(res.Entries) != 10 || !bytes.Equal(res.Entries[0].Payload, want[190]) {
				t.Fatalf("read after GC: %d entries, %v", len(res.Entries), err)
			}
		})
	}
}

func ledgerCount(t *testing.T, p *bkwal.Provider) int {
	l, err := p.Ledgers(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return len(l)
}
