package bkwal_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/stream"
)

// A busy stream whose retention trims into its current ledger: with the
// default size limits (one ledger for these appends) the ledger would keep
// everything until it fills. Once a GC pass finds the ledger's first run
// trimmed, the next append goes into a new ledger, the old one is sealed,
// and it is reclaimed as soon as the rest of it is trimmed — while every
// untrimmed entry reads back. Without a trim into it, GC passes and appends
// never roll the ledger.
func TestRetiredPrefixRollsTheCurrentLedger(t *testing.T) {
	f := newFixture(t, 3, nil)
	c, p := f.idleCore(t, "b1", time.Hour) // no idle seal: only the retired prefix may roll
	ctx := ctxT(t)
	info, s := bkStream(t, c, "busy")
	want := appendBatches(t, c, s, 10)

	// Needed from offset 0: passes and appends keep the one ledger.
	for i := 0; i < 3; i++ {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		want = append(want, appendBatches(t, c, s, 1)...)
	}
	if n := len(f.ledgersOf(t, info.ID)); n != 1 {
		t.Fatalf("%d ledgers with nothing trimmed, want 1", n)
	}

	// Trim past the first run only: the ledger still holds needed offsets
	// (so it is kept), but the next append starts a new one.
	if err := c.Trim(ctx, info.ID, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	want = append(want, appendBatches(t, c, s, 3)...)
	leds := f.ledgersOf(t, info.ID)
	if len(leds) != 2 {
		t.Fatalf("%d ledgers after a trim into the current ledger and more appends, want 2", len(leds))
	}
	res, err := c.Read(ctx, info.ID, 1, stream.ReadOptions{MaxEntries: 1000})
	if err != nil || len(res.Entries) != len(want)-1 || res.Entries[0].Offset != 1 {
		t.Fatalf("read from 1: %d entries, %v; want %d", len(res.Entries), err, len(want)-1)
	}
	for i, e := range res.Entries {
		if !bytes.Equal(e.Payload, want[e.Offset]) {
			t.Fatalf("entry %d (offset %d) differs", i, e.Offset)
		}
	}

	// Trim past everything the old ledger holds: it is reclaimed, the new
	// (current) one is kept and still serves its entries.
	if err := c.Trim(ctx, info.ID, 13); err != nil {
		t.Fatal(err)
	}
	gcUntil(t, c, "the rolled ledger reclaimed", func() bool { return len(f.ledgersOf(t, info.ID)) == 1 && ledgerCount(t, p) == 1 })
	res, err = c.Read(ctx, info.ID, 13, stream.ReadOptions{})
	if err != nil || len(res.Entries) != 3 || res.Entries[0].Offset != 13 || !bytes.Equal(res.Entries[2].Payload, want[15]) {
		t.Fatalf("read of the current ledger after the reclaim: %+v, %v", res.Entries, err)
	}
}
