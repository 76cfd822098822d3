package bkwal_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper/bkfake"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/faultstore"
	mdmem "github.com/nereusstream/nereus-go/metadata/memstore"
)

// TestLedgerDeleteResponseLossCuts cuts GC's BookKeeper delete — the
// ledger's metadata delete in ZooKeeper, then the Nereus record of the
// ledger — at each step: the ledger delete applied but its answer lost,
// lost without applying, the record delete failing (the process then
// stopped: a new incarnation finds the record of a ledger that is gone) or
// its answer lost. Each time GC converges: the trimmed stream's ledger and
// its record are gone, the untrimmed stream's ledger is kept and reads
// back, and nothing else was deleted.
func TestLedgerDeleteResponseLossCuts(t *testing.T) {
	recordPrefix := "bkwal/default/w/b1/"
	cases := []struct {
		name   string
		ledger func(*bkfake.MetaStore)
		// deletes: ledger metadata deletes the cut takes at least (the
		// lost one and, when it did not apply, the retry).
		deletes int
		record  *faultstore.Rule
	}{
		{name: "ledger delete applied, answer lost", ledger: func(m *bkfake.MetaStore) { m.InjectUnknown(bkfake.MetaDelete, true, 1) }, deletes: 1},
		{name: "ledger delete lost, not applied", ledger: func(m *bkfake.MetaStore) { m.InjectUnknown(bkfake.MetaDelete, false, 1) }, deletes: 2},
		// A definite refusal (not retried in place), as when the process
		// goes away between the two deletes.
		{name: "record delete fails, restart", record: &faultstore.Rule{Kinds: faultstore.Delete, Prefix: recordPrefix, FailRate: 1, Limit: 1,
			Err: fmt.Errorf("%w (test: refused)", metadata.ErrClosed)}},
		{name: "record delete answer lost", record: &faultstore.Rule{Kinds: faultstore.Delete, Prefix: recordPrefix, LoseRate: 1, Limit: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := faultstore.Wrap(mdmem.New(), faultstore.Config{Seed: 1})
			f := newFixture(t, 3, fs)
			c, p := f.idleCore(t, "b1", time.Millisecond)
			ctx := ctxT(t)
			// The trimmed stream's ledger is sealed by the idle seal once
			// everything in it is trimmed (1 ms idle bound), then deleted;
			// the kept stream's stays open and needed.
			gone, sg := bkStream(t, c, "trimmed")
			kept, sk := bkStream(t, c, "kept")
			appendBatches(t, c, sg, 20)
			want := appendBatches(t, c, sk, 20)
			goneLedgers, keptLedgers := f.ledgersOf(t, gone.ID), f.ledgersOf(t, kept.ID)
			if len(goneLedgers) != 1 || len(keptLedgers) != 1 {
				t.Fatalf("ledgers: %d of the trimmed stream, %d of the kept one; want 1 each", len(goneLedgers), len(keptLedgers))
			}
			deletesBefore := f.fc.Meta.Ops(bkfake.MetaDelete)
			if tc.ledger != nil {
				tc.ledger(f.fc.Meta)
			}
			if tc.record != nil {
				fs.SetRules(*tc.record)
			}
			if err := c.Trim(ctx, gone.ID, 20); err != nil {
				t.Fatal(err)
			}
			done := func() bool {
				l, err := p.Ledgers(ctx)
				return err == nil && len(l) == 1 && len(f.ledgersOf(t, gone.ID)) == 0
			}
			if tc.record != nil && tc.record.FailRate > 0 {
				// The first deletion pass deletes the ledger and fails on
				// its record; the process then stops.
				gcUntil(t, c, "the ledger deleted", func() bool { return len(f.ledgersOf(t, gone.ID)) == 0 })
				if l, err := p.Ledgers(ctx); err != nil || len(l) != 2 {
					t.Fatalf("after the failed record delete: %d ledger records (%v), want the deleted ledger's still there", len(l), err)
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				c, p = f.idleCore(t, "b1", time.Millisecond)
			}
			gcUntil(t, c, "the trimmed stream's ledger and its record deleted", done)
			if st := fs.Stats()[faultstore.Delete]; st.Failed+st.Lost == 0 && tc.record != nil {
				t.Fatal("the record cut never happened")
			}
			if n := f.fc.Meta.Ops(bkfake.MetaDelete) - deletesBefore; n < tc.deletes {
				t.Fatalf("%d ledger metadata deletes, want at least %d", n, tc.deletes)
			}
			// More passes: the kept ledger stays and reads back.
			for i := 0; i < 5; i++ {
				if _, err := c.CollectGarbage(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := f.ledgersOf(t, kept.ID); len(got) != 1 {
				t.Fatalf("the kept stream has %d ledgers after GC, want its 1", len(got))
			}
			got := readAll(t, c, kept.ID)
			if len(got) != len(want) {
				t.Fatalf("kept stream: %d entries, want %d", len(got), len(want))
			}
			for i, e := range got {
				if !bytes.Equal(e.Payload, want[i]) {
					t.Fatalf("kept entry %d: %q", i, e.Payload)
				}
			}
		})
	}
}
