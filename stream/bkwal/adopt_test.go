package bkwal_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream"
)

// adoptOnly adopts exactly the listed writers (the cluster's policy is
// tested in package cluster).
type adoptOnly []string

func (a adoptOnly) ShouldAdopt(w string) bool { return slices.Contains(a, w) }

func (f *fixture) adoptingCore(t *testing.T, writer string, pol stream.AdoptionPolicy) *stream.Core {
	t.Helper()
	p := f.provider(t, writer, nil)
	lc := testLC()
	lc.GCGrace, lc.AdoptScanInterval = time.Millisecond, time.Millisecond
	c, err := stream.Open(ctxT(t), stream.Config{Metadata: f.meta, BookKeeperWAL: p, ObjectStore: objmem.New(), WriterID: writer,
		Logger: quiet(), Lifecycle: lc, RetentionInterval: time.Hour, Adoption: pol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Writer "a" appends to two streams and stops for good, its ledgers left
// OPEN (never sealed, never settled). Writer "b" adopts a's ledgers: the
// adoption recovery-opens them (fencing a at the bookies) and settles
// their runs; a's ledger of the trimmed stream is deleted, the one of the
// untrimmed stream is kept (a run in it is still needed) and reads back;
// once that stream is trimmed too, nothing of a is left.
func TestDeadWritersLedgersAdopted(t *testing.T) {
	f := newFixture(t, 3, nil)
	ctx := ctxT(t)
	a, _ := f.idleCore(t, "a", time.Hour)
	gone, gs := bkStream(t, a, "gone")
	kept, ks := bkStream(t, a, "kept")
	appendBatches(t, a, gs, 10)
	keptData := appendBatches(t, a, ks, 10)
	keptLedgers := f.ledgersOf(t, kept.ID)
	if len(f.ledgersOf(t, gone.ID)) != 1 || len(keptLedgers) != 1 {
		t.Fatalf("ledgers: %d and %d, want 1 each", len(f.ledgersOf(t, gone.ID)), len(keptLedgers))
	}
	// a is gone from here on (never closed: its ledgers stay open).

	b := f.adoptingCore(t, "b", adoptOnly{"a"})
	if err := b.Trim(ctx, gone.ID, 10); err != nil {
		t.Fatal(err)
	}
	gcUntil(t, b, "a's ledger of the trimmed stream reclaimed by b", func() bool { return len(f.ledgersOf(t, gone.ID)) == 0 })
	if got := b.Adopting(); !slices.Contains(got, "bookkeeper/a") {
		t.Fatalf("adopting %v", got)
	}
	for i := 0; i < 10; i++ {
		if _, err := b.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Kept (needed), and fenced: recovery-opened, closed at its last entry.
	for lid := range keptLedgers {
		raw, _, ok := f.fc.Meta.Ledger(lid)
		if !ok {
			t.Fatalf("a's ledger %d of the untrimmed stream was deleted", lid)
		}
		md, _ := meta.Unmarshal(raw)
		if md.State != meta.StateClosed || md.LastEntryID != 9 {
			t.Fatalf("adopted ledger %d: %s last %d, want closed at 9", lid, md.State, md.LastEntryID)
		}
		fenced := 0
		for _, bk := range f.fc.Bookies {
			if bk.Fenced(lid) {
				fenced++
			}
		}
		if fenced == 0 {
			t.Fatalf("adopted ledger %d not fenced on any bookie", lid)
		}
	}
	got := readAll(t, b, kept.ID)
	if len(got) != len(keptData) {
		t.Fatalf("kept: read %d entries", len(got))
	}
	for i, e := range got {
		if !bytes.Equal(e.Payload, keptData[i]) {
			t.Fatalf("kept entry %d: %q", i, e.Payload)
		}
	}
	// Fenced: were a still alive, its next run into its old ledger fails
	// (whether it could open a new one is not the adopter's business: the
	// head CAS decides commits, and a's session is the cluster's to take).
	if _, err := a.Append(ctx, ks, stream.AppendRequest{Entries: []stream.Entry{{Payload: []byte("late"), RecordCount: 1}}, ExpectedStart: -1}); err == nil {
		t.Fatal("a appended into its adopted (fenced) ledger")
	}

	if err := b.Trim(ctx, kept.ID, 10); err != nil {
		t.Fatal(err)
	}
	gcUntil(t, b, "every ledger of a reclaimed", func() bool { return len(f.ledgersOf(t, kept.ID)) == 0 })
	if n := b.LifecycleStats().Adoptions; n != 1 {
		t.Fatalf("%d adoptions, want 1", n)
	}
	gcUntil(t, b, "adoption ended (nothing left)", func() bool { return len(b.Adopting()) == 0 })
}
