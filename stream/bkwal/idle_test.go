package bkwal_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/bkwal"
)

// idleCore is a core on the BookKeeper WAL with the default rollover
// limits (one ledger per session for these tests) and a tiny idle seal.
func (f *fixture) idleCore(t *testing.T, writer string, idle time.Duration) (*stream.Core, *bkwal.Provider) {
	t.Helper()
	p := f.provider(t, writer, func(c *bkwal.Config) { c.IdleSeal, c.MinRollAge = idle, time.Nanosecond })
	lc := testLC()
	lc.GCGrace = time.Millisecond
	c, err := stream.Open(ctxT(t), stream.Config{Metadata: f.meta, BookKeeperWAL: p, ObjectStore: objmem.New(), WriterID: writer,
		Logger: quiet(), Lifecycle: lc, RetentionInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, p
}

// gcUntil runs GC passes until ok holds (bounded).
func gcUntil(t *testing.T, c *stream.Core, what string, ok func() bool) {
	t.Helper()
	for i := 0; i < 400 && !ok(); i++ {
		if _, err := c.CollectGarbage(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !ok() {
		t.Fatalf("%s: not reached; pending %+v", what, c.GCStatus().Pending)
	}
}

// A stream that stops receiving writes: its only ledger (never rolled
// over: default limits) is kept while it holds an untrimmed offset, sealed
// by a GC pass once everything in it is trimmed, and reclaimed; the stream
// then takes more appends in a new ledger. A deleted stream's last ledger
// goes the same way.
func TestIdleLedgerSealedAndReclaimed(t *testing.T) {
	f := newFixture(t, 3, nil)
	c, p := f.idleCore(t, "b1", time.Millisecond)
	ctx := ctxT(t)
	info, s := bkStream(t, c, "idle")
	want := appendBatches(t, c, s, 20)
	if n := len(f.ledgersOf(t, info.ID)); n != 1 {
		t.Fatalf("%d ledgers after 20 appends, want 1", n)
	}
	// Idle but needed: kept open, nothing deleted.
	for i := 0; i < 5; i++ {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(f.ledgersOf(t, info.ID)); n != 1 {
		t.Fatalf("an idle ledger with untrimmed offsets: %d ledgers, want 1", n)
	}
	if got := readAll(t, c, info.ID); len(got) != 20 || !bytes.Equal(got[19].Payload, want[19]) {
		t.Fatalf("read back %d entries", len(got))
	}
	if err := c.Trim(ctx, info.ID, 20); err != nil {
		t.Fatal(err)
	}
	gcUntil(t, c, "idle trimmed ledger reclaimed", func() bool { return len(f.ledgersOf(t, info.ID)) == 0 && ledgerCount(t, p) == 0 })

	// The session goes on in a new ledger.
	more := appendBatches(t, c, s, 5)
	res, err := c.Read(ctx, info.ID, 20, stream.ReadOptions{})
	if err != nil || len(res.Entries) != 5 || res.Entries[0].Offset != 20 || !bytes.Equal(res.Entries[4].Payload, more[4]) {
		t.Fatalf("read after the idle seal: %+v, %v", res.Entries, err)
	}
	if n := len(f.ledgersOf(t, info.ID)); n != 1 {
		t.Fatalf("%d ledgers after appending again, want 1", n)
	}

	// Deleted (not trimmed): its last, open ledger is reclaimed too.
	del, ds := bkStream(t, c, "deleted")
	appendBatches(t, c, ds, 7)
	if err := c.Delete(ctx, del.ID); err != nil {
		t.Fatal(err)
	}
	gcUntil(t, c, "deleted stream's open ledger reclaimed", func() bool { return len(f.ledgersOf(t, del.ID)) == 0 })
	if n := len(f.ledgersOf(t, info.ID)); n != 1 {
		t.Fatalf("the live stream's needed ledger was touched: %d ledgers", n)
	}
}

// Idle seals racing appends: GC passes (idle bound 1ms, so every pass
// finds the current ledger idle between two appends) and trims run while a
// writer appends; every acknowledged entry at or above the start reads
// back identical (trims move the start to the end so far, so the
// current ledger keeps becoming all-retired), nothing is lost or duplicated, and the idle seals did
// happen (more than one ledger was used).
func TestIdleSealRacesAppends(t *testing.T) {
	f := newFixture(t, 3, nil)
	c, _ := f.idleCore(t, "b1", time.Millisecond)
	ctx := ctxT(t)
	info, s := bkStream(t, c, "race")
	used := map[int64]bool{}
	var mu sync.Mutex
	var start atomic.Int64
	stop := make(chan struct{})
	gcDone := make(chan error, 1)
	go func() {
		defer close(gcDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.CollectGarbage(ctx); err != nil {
				gcDone <- err
				return
			}
			mu.Lock()
			for id := range f.ledgersOf(t, info.ID) {
				used[id] = true
			}
			mu.Unlock()
			{
				in, err := c.Describe(ctx, info.ID)
				if err == nil && in.EndOffset > 0 {
					to := in.EndOffset // everything so far: the current ledger becomes retired
					if err := c.Trim(ctx, info.ID, to); err == nil {
						start.Store(to)
					}
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	var want [][]byte
	for i := 0; i < 150; i++ {
		pl := []byte(fmt.Sprintf("race-%04d", i))
		res, err := c.Append(ctx, s, stream.AppendRequest{Entries: []stream.Entry{{Payload: pl, RecordCount: 1}}, ExpectedStart: -1})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if res.Start != int64(i) {
			t.Fatalf("append %d acknowledged at %d", i, res.Start)
		}
		want = append(want, pl)
		if i%30 == 29 {
			// Pause until a pass has sealed the idle current ledger (the
			// next append then races the seal's settling and the GC
			// passes that follow), bounded.
			deadline := time.Now().Add(10 * time.Second)
			for !allClosed(f.ledgersOf(t, info.ID)) {
				if time.Now().After(deadline) {
					t.Fatalf("after %d appends: the idle current ledger was not sealed within 10s", i+1)
				}
				time.Sleep(time.Millisecond)
			}
		} else if i%3 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	close(stop)
	if err := <-gcDone; err != nil {
		t.Fatal(err)
	}
	from := start.Load()
	for off := from; off < int64(len(want)); {
		res, err := c.Read(ctx, info.ID, off, stream.ReadOptions{MaxEntries: 1000})
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Entries) == 0 {
			t.Fatalf("nothing at %d (end %d)", off, len(want))
		}
		for _, e := range res.Entries {
			if e.Offset != off || !bytes.Equal(e.Payload, want[off]) {
				t.Fatalf("offset %d: got %q at %d", off, e.Payload, e.Offset)
			}
			off++
		}
	}
	mu.Lock()
	n := len(used)
	mu.Unlock()
	if n < 5 {
		t.Fatalf("only %d ledgers used: the idle seals did not happen", n)
	}
	t.Logf("%d ledgers used for 150 appends; start %d", n, from)
}

func allClosed(leds map[int64]*meta.LedgerMetadata) bool {
	for _, md := range leds {
		if md.State != meta.StateClosed {
			return false
		}
	}
	return true
}
