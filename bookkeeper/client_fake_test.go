package bookkeeper_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/bkfake"
	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	"github.com/nereusstream/nereus-go/bookkeeper/proto"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func fakeCluster(t *testing.T, n int) *bkfake.Cluster {
	t.Helper()
	c, err := bkfake.NewCluster(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newClient(t *testing.T, store bookkeeper.MetadataStore, mod func(*bookkeeper.Config)) *bookkeeper.Client {
	t.Helper()
	cfg := bookkeeper.Config{Metadata: store, Logger: quietLogger(), AddTimeout: 10 * time.Second, RequestTimeout: 5 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	c, err := bookkeeper.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func payload(ledger, entry int64, size int) []byte {
	p := bytes.Repeat([]byte{byte(entry)}, size)
	copy(p, fmt.Sprintf("L%d-E%d|", ledger, entry))
	return p
}

func TestAddReadRoundTrip(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 7, Custom: map[string][]byte{"app": []byte("test")}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	futs := make([]*bookkeeper.AddFuture, n)
	for i := range futs {
		if futs[i], err = w.AppendAsync(ctx, payload(7, int64(i), 100+i)); err != nil {
			t.Fatal(err)
		}
		if futs[i].EntryID() != int64(i) {
			t.Fatalf("entry id %d, want %d", futs[i].EntryID(), i)
		}
	}
	// Completion order: once the last entry is done, every earlier one is.
	if err := futs[n-1].Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for j := 0; j < n-1; j++ {
		select {
		case <-futs[j].Done():
			if futs[j].Err() != nil {
				t.Fatal(futs[j].Err())
			}
		default:
			t.Fatalf("entry %d completed before entry %d", n-1, j)
		}
	}
	if w.LastAddConfirmed() != n-1 {
		t.Fatalf("LAC %d", w.LastAddConfirmed())
	}
	res, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for i := 0; i < n; i++ {
		total += int64(100 + i)
	}
	if res.LastEntryID != n-1 || res.Length != total {
		t.Fatalf("close result %+v, want last %d length %d", res, n-1, total)
	}

	// Each entry is on exactly its write set, as stored BookKeeper entries.
	md, _, _ := fc.Meta.Ledger(7)
	lm, err := meta.Unmarshal(md)
	if err != nil || lm.State != meta.StateClosed || lm.LastEntryID != n-1 || string(lm.Custom["app"]) != "test" {
		t.Fatalf("metadata %+v %v", lm, err)
	}
	d, _ := proto.NewDigester(proto.DigestCRC32C, nil)
	for e := int64(0); e < n; e++ {
		holders := 0
		for i, id := range lm.Segments[0].Ensemble {
			b := fc.Bookie(id)
			raw, ok := b.Entry(7, e)
			inSet := int64(i) == e%3 || int64(i) == (e+1)%3
			if ok != inSet {
				t.Fatalf("entry %d on bookie %d: stored=%v, in write set=%v", e, i, ok, inSet)
			}
			if ok {
				holders++
				h, p, err := d.VerifyEntry(raw, 7, e)
				if err != nil || !bytes.Equal(p, payload(7, e, 100+int(e))) || h.LastAddConfirmed >= e {
					t.Fatalf("stored entry %d: %v %+v", e, err, h)
				}
			}
		}
		if holders != 2 {
			t.Fatalf("entry %d on %d bookies", e, holders)
		}
	}

	r, err := c.OpenLedger(ctx, 7, bookkeeper.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsClosed() || r.LastAddConfirmed() != n-1 {
		t.Fatalf("reader closed=%v lac=%d", r.IsClosed(), r.LastAddConfirmed())
	}
	ents, err := r.Read(ctx, 0, n-1)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range ents {
		if e.EntryID != int64(i) || !bytes.Equal(e.Payload, payload(7, int64(i), 100+i)) {
			t.Fatalf("entry %d mismatch", i)
		}
	}
	if _, err := r.Read(ctx, 0, n); !errors.Is(err, bookkeeper.ErrInvalidArgument) {
		t.Fatalf("read beyond LAC: %v", err)
	}
	if _, err := w.AppendAsync(ctx, []byte("x")); !errors.Is(err, bookkeeper.ErrLedgerClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

func TestAllDigestTypes(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	for i, dt := range []proto.DigestType{proto.DigestCRC32, proto.DigestCRC32C, proto.DigestHMAC, proto.DigestDummy} {
		id := int64(100 + i)
		w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id, DigestType: dt, Password: []byte("pw"),
			EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2})
		if err != nil {
			t.Fatal(err)
		}
		for e := int64(0); e < 5; e++ {
			if _, err := w.Append(ctx, payload(id, e, 10)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.OpenLedger(ctx, id, bookkeeper.OpenOptions{Password: []byte("wrong")}); !errors.Is(err, bookkeeper.ErrUnauthorized) {
			t.Fatalf("%s: wrong password: %v", dt, err)
		}
		r, err := c.OpenLedger(ctx, id, bookkeeper.OpenOptions{Password: []byte("pw"), DigestType: dt})
		if err != nil {
			t.Fatal(err)
		}
		ents, err := r.Read(ctx, 0, 4)
		if err != nil || len(ents) != 5 || !bytes.Equal(ents[4].Payload, payload(id, 4, 10)) {
			t.Fatalf("%s: %v", dt, err)
		}
	}
}

// Metadata first: no bookie sees a request for a ledger whose metadata
// does not exist yet.
func TestMetadataBeforeData(t *testing.T) {
	fc := fakeCluster(t, 3)
	var violations atomic.Int32
	for _, b := range fc.Bookies {
		b.SetIntercept(func(r proto.Request) bkfake.Action {
			if _, _, ok := fc.Meta.Ledger(r.LedgerID); !ok {
				violations.Add(1)
			}
			return bkfake.Action{}
		})
	}
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := w.Append(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.RecoverLedger(ctx, 1, bookkeeper.OpenOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d requests reached bookies before metadata existed", v)
	}
}

func TestExplicitIDCollision(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	if _, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 42}); err != nil {
		t.Fatal(err)
	}
	before, v0, _ := fc.Meta.Ledger(42)
	_, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 42})
	if !errors.Is(err, bookkeeper.ErrLedgerExists) || bookkeeper.Classify(err) != bookkeeper.Conflict {
		t.Fatalf("collision: %v", err)
	}
	after, v1, _ := fc.Meta.Ledger(42)
	if !bytes.Equal(before, after) || v0 != v1 {
		t.Fatal("collision overwrote the existing ledger")
	}
	// Another client colliding is detected the same way.
	c2 := newClient(t, fc.Meta, nil)
	if _, err := c2.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 42}); !errors.Is(err, bookkeeper.ErrLedgerExists) {
		t.Fatalf("collision from another client: %v", err)
	}
	if _, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: -1}); !errors.Is(err, bookkeeper.ErrInvalidArgument) {
		t.Fatalf("negative id: %v", err)
	}
	if _, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 43, EnsembleSize: 4, WriteQuorum: 2, AckQuorum: 2}); !errors.Is(err, bookkeeper.ErrNotEnoughBookies) {
		t.Fatalf("E > bookies: %v", err)
	}
}

// A ZooKeeper connection loss during create is settled by re-reading: the
// cToken tells our own landed create from someone else's ledger.
func TestCreateUnknownOutcomes(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)

	fc.Meta.InjectUnknown(bkfake.MetaCreate, true, 1) // applied, answer lost
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 1})
	if err != nil {
		t.Fatalf("applied-but-lost create not settled: %v", err)
	}
	if _, err := w.Append(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}

	before := fc.Meta.Ops(bkfake.MetaCreate)
	fc.Meta.InjectUnknown(bkfake.MetaCreate, false, 1) // lost before applying
	if _, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 2}); err != nil {
		t.Fatalf("not-applied create not retried: %v", err)
	}
	if got := fc.Meta.Ops(bkfake.MetaCreate) - before; got != 2 {
		t.Fatalf("%d create attempts, want 2", got)
	}

	// Lost answer, and the store stays unreachable: unknown, with our cToken.
	fc.Meta.InjectUnknown(bkfake.MetaCreate, true, 1)
	fc.Meta.InjectUnknown(bkfake.MetaRead, false, 1000)
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c.CreateLedger(sctx, bookkeeper.CreateOptions{LedgerID: 3})
	var cu *bookkeeper.CreateUnknownError
	if !errors.As(err, &cu) || bookkeeper.Classify(err) != bookkeeper.Unknown {
		t.Fatalf("want CreateUnknownError, got %v", err)
	}
	fc.Meta.ClearFaults()
	raw, _, ok := fc.Meta.Ledger(3)
	if !ok {
		t.Fatal("applied create missing")
	}
	m, _ := meta.Unmarshal(raw)
	if m.CToken != cu.CToken {
		t.Fatalf("cToken %d in store, %d in error", m.CToken, cu.CToken)
	}
}

// Non-recovery opens never fence: the writer keeps appending while readers
// follow the piggybacked LAC.
func TestNonRecoveryOpenNeverFences(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 5})
	if err != nil {
		t.Fatal(err)
	}
	r0, err := c.OpenLedger(ctx, 5, bookkeeper.OpenOptions{})
	if err != nil || r0.LastAddConfirmed() != -1 || r0.IsClosed() {
		t.Fatalf("empty open ledger: lac %d %v", r0.LastAddConfirmed(), err)
	}
	for i := int64(0); i < 10; i++ {
		if _, err := w.Append(ctx, payload(5, i, 8)); err != nil {
			t.Fatal(err)
		}
	}
	rc := newClient(t, fc.Meta, nil) // a separate reader process
	r, err := rc.OpenLedger(ctx, 5, bookkeeper.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// v2 LAC lags by one: entry 9 carried LAC 8.
	if r.LastAddConfirmed() != 8 {
		t.Fatalf("reader LAC %d, want 8", r.LastAddConfirmed())
	}
	ents, err := r.Read(ctx, 0, 8)
	if err != nil || len(ents) != 9 {
		t.Fatal(err)
	}
	for _, b := range fc.Bookies {
		if b.Fenced(5) {
			t.Fatal("non-recovery open fenced the ledger")
		}
	}
	if _, err := w.Append(ctx, payload(5, 10, 8)); err != nil {
		t.Fatalf("writer after a reader opened: %v", err)
	}
	if lac, err := r.Refresh(ctx); err != nil || lac != 9 {
		t.Fatalf("refreshed LAC %d %v", lac, err)
	}
	if _, err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if lac, err := r.Refresh(ctx); err != nil || lac != 10 || !r.IsClosed() {
		t.Fatalf("after close: LAC %d closed=%v %v", lac, r.IsClosed(), err)
	}
}

// After a recovery open, the old writer's adds fail and nothing it sends is
// acknowledged; its Close reports the recovery's decision.
func TestRecoveryFencesOldWriter(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 9})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 10; i++ {
		if _, err := w.Append(ctx, payload(9, i, 16)); err != nil {
			t.Fatal(err)
		}
	}
	rc := newClient(t, fc.Meta, nil)
	r, err := rc.RecoverLedger(ctx, 9, bookkeeper.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsClosed() || r.LastAddConfirmed() != 9 {
		t.Fatalf("recovered: closed=%v lac=%d", r.IsClosed(), r.LastAddConfirmed())
	}
	for i := int64(10); i < 20; i++ {
		f, err := w.AppendAsync(ctx, payload(9, i, 16))
		if err != nil {
			if !errors.Is(err, bookkeeper.ErrFenced) {
				t.Fatalf("append after fence: %v", err)
			}
			continue
		}
		err = f.Wait(ctx)
		if err == nil {
			t.Fatalf("entry %d acknowledged after the ledger was fenced", i)
		}
		if !errors.Is(err, bookkeeper.ErrFenced) || bookkeeper.Classify(err) != bookkeeper.Unknown {
			t.Fatalf("fenced add error: %v", err)
		}
	}
	if w.LastAddConfirmed() != 9 {
		t.Fatalf("old writer LAC moved to %d", w.LastAddConfirmed())
	}
	res, err := w.Close(ctx)
	if !errors.Is(err, bookkeeper.ErrFenced) || res.LastEntryID != 9 {
		t.Fatalf("old writer close: %+v %v", res, err)
	}
	ents, err := r.Read(ctx, 0, 9)
	if err != nil || len(ents) != 10 {
		t.Fatal(err)
	}
	// Nothing past entry 9 is part of the ledger, wherever it landed.
	r2, _ := c.OpenLedger(ctx, 9, bookkeeper.OpenOptions{})
	if r2.LastAddConfirmed() != 9 {
		t.Fatalf("reopened LAC %d", r2.LastAddConfirmed())
	}
}

// Recovery after a writer crash finds exactly the acknowledged entries when
// the in-flight ones never reached a bookie, and never loses an
// acknowledged one when some did.
func TestRecoveryAfterWriterCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		// drop decides, per bookie index and entry, whether the add is lost.
		drop func(bookie int, entry int64) bool
		// wantLast is the exact recovered last entry, or -2 for "any in [acked, sent]".
		wantLast int64
	}{
		{"in-flight-never-landed", func(_ int, e int64) bool { return e >= 20 }, 19},
		{"in-flight-on-one-bookie", func(b int, e int64) bool { return e >= 20 && b != 0 }, -2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakeCluster(t, 3)
			ens := []string{fc.Bookies[0].ID(), fc.Bookies[1].ID(), fc.Bookies[2].ID()}
			for i, b := range fc.Bookies {
				b.SetIntercept(func(r proto.Request) bkfake.Action {
					if r.Op == proto.OpAdd && r.Flags&proto.FlagRecoveryAdd == 0 && tc.drop(i, r.EntryID) {
						return bkfake.Action{Drop: true}
					}
					return bkfake.Action{}
				})
			}
			c := newClient(t, fc.Meta, func(cfg *bookkeeper.Config) { cfg.AddTimeout = time.Minute })
			ctx := testCtx(t)
			w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 11, Ensemble: ens})
			if err != nil {
				t.Fatal(err)
			}
			var futs []*bookkeeper.AddFuture
			for i := int64(0); i < 30; i++ {
				f, err := w.AppendAsync(ctx, payload(11, i, 32))
				if err != nil {
					t.Fatal(err)
				}
				futs = append(futs, f)
			}
			for _, f := range futs[:20] {
				if err := f.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// The writer "crashes": abandoned with 10 adds in flight.
			if w.LastAddConfirmed() != 19 {
				t.Fatalf("writer LAC %d", w.LastAddConfirmed())
			}
			c.Close()
			for _, b := range fc.Bookies {
				b.SetIntercept(nil)
			}
			rc := newClient(t, fc.Meta, nil)
			r, err := rc.RecoverLedger(ctx, 11, bookkeeper.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			last := r.LastAddConfirmed()
			if tc.wantLast != -2 && last != tc.wantLast {
				t.Fatalf("recovered last entry %d, want %d", last, tc.wantLast)
			}
			if last < 19 || last > 29 {
				t.Fatalf("recovered last entry %d outside [19, 29]", last)
			}
			ents, err := r.Read(ctx, 0, last)
			if err != nil {
				t.Fatal(err)
			}
			var length int64
			for i, e := range ents {
				if !bytes.Equal(e.Payload, payload(11, int64(i), 32)) {
					t.Fatalf("entry %d content differs", i)
				}
				length += 32
			}
			if info := r.Info(); info.Metadata.Length != length {
				t.Fatalf("recovered length %d, want %d", info.Metadata.Length, length)
			}
			// Recovered entries are now on at least AQ bookies.
			for e := int64(20); e <= last; e++ {
				n := 0
				for _, b := range fc.Bookies {
					if _, ok := b.Entry(11, e); ok {
						n++
					}
				}
				if n < 2 {
					t.Fatalf("recovered entry %d on %d bookies", e, n)
				}
			}
		})
	}
}

// An add that cannot reach its ack quorum breaks the writer after
// AddTimeout; Close seals at the LAC and so settles every pending add.
func TestAddTimeoutBreaksWriter(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, func(cfg *bookkeeper.Config) { cfg.AddTimeout = 1500 * time.Millisecond })
	ctx := testCtx(t)
	ens := []string{fc.Bookies[0].ID(), fc.Bookies[1].ID(), fc.Bookies[2].ID()}
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 3, Ensemble: ens})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 5; i++ {
		if _, err := w.Append(ctx, []byte("ok")); err != nil {
			t.Fatal(err)
		}
	}
	fc.Bookies[1].SetIntercept(func(r proto.Request) bkfake.Action {
		if r.Op == proto.OpAdd {
			return bkfake.Action{RC: proto.EIO}
		}
		return bkfake.Action{}
	})
	// Entry 5's write set is {2, 0}: unaffected. Entry 6's is {0, 1}: it
	// cannot reach AQ=2.
	f5, _ := w.AppendAsync(ctx, []byte("five"))
	f6, _ := w.AppendAsync(ctx, []byte("six"))
	f7, _ := w.AppendAsync(ctx, []byte("seven"))
	if err := f5.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var ae *bookkeeper.AddError
	if err := f6.Wait(ctx); !errors.As(err, &ae) || ae.EntryID != 6 || bookkeeper.Classify(err) != bookkeeper.Unknown {
		t.Fatalf("entry 6: %v", err)
	}
	if err := f7.Wait(ctx); !errors.As(err, &ae) || ae.EntryID != 7 {
		t.Fatalf("entry 7: %v", err)
	}
	if _, err := w.AppendAsync(ctx, []byte("x")); !errors.Is(err, bookkeeper.ErrWriterBroken) || bookkeeper.Classify(err) != bookkeeper.NotApplied {
		t.Fatalf("append on broken writer: %v", err)
	}
	res, err := w.Close(ctx)
	if err != nil || res.LastEntryID != 5 {
		t.Fatalf("close of broken writer: %+v %v", res, err)
	}
	// Entry 7 reached AQ on bookies {1,2}? No: bookie 1 refuses. Whatever
	// landed, the ledger is entries 0..5.
	r, err := c.OpenLedger(ctx, 3, bookkeeper.OpenOptions{})
	if err != nil || r.LastAddConfirmed() != 5 {
		t.Fatalf("reopen: %v lac %d", err, r.LastAddConfirmed())
	}
}

// A bookie failure is retried with byte-identical frames.
func TestResendIsByteIdentical(t *testing.T) {
	fc := fakeCluster(t, 3)
	var mu sync.Mutex
	seen := map[int64][][]byte{}
	failures := map[int64]int{}
	b0 := fc.Bookies[0]
	b0.SetIntercept(func(r proto.Request) bkfake.Action {
		if r.Op != proto.OpAdd {
			return bkfake.Action{}
		}
		mu.Lock()
		defer mu.Unlock()
		seen[r.EntryID] = append(seen[r.EntryID], append([]byte(nil), r.Entry...))
		if failures[r.EntryID] < 2 {
			failures[r.EntryID]++
			if r.EntryID%2 == 0 {
				return bkfake.Action{RC: proto.EIO}
			}
			return bkfake.Action{CloseConn: true}
		}
		return bkfake.Action{}
	})
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	ens := []string{fc.Bookies[0].ID(), fc.Bookies[1].ID(), fc.Bookies[2].ID()}
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 4, Ensemble: ens, EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 6; i++ {
		if _, err := w.Append(ctx, payload(4, i, 64)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for e, frames := range seen {
		if len(frames) < 2 {
			continue
		}
		for _, f := range frames[1:] {
			if !bytes.Equal(f, frames[0]) {
				t.Fatalf("entry %d resent with different bytes", e)
			}
		}
	}
	if len(seen[0]) != 3 {
		t.Fatalf("entry 0 sent %d times to bookie 0, want 3", len(seen[0]))
	}
}

// Acks arriving out of order still complete the futures in entry order.
func TestOutOfOrderAcks(t *testing.T) {
	fc := fakeCluster(t, 3)
	for _, b := range fc.Bookies {
		b.SetIntercept(func(r proto.Request) bkfake.Action {
			if r.Op == proto.OpAdd && r.EntryID%3 == 0 {
				return bkfake.Action{Delay: time.Duration(20+r.EntryID%7) * time.Millisecond}
			}
			return bkfake.Action{}
		})
	}
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 6})
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		f, err := w.AppendAsync(ctx, []byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-f.Done()
			// Record the LAC visible at completion: never below this entry.
			if w.LastAddConfirmed() < f.EntryID() {
				t.Errorf("entry %d completed with LAC %d", f.EntryID(), w.LastAddConfirmed())
			}
			mu.Lock()
			order = append(order, f.EntryID())
			mu.Unlock()
		}()
	}
	wg.Wait()
	if w.LastAddConfirmed() != 59 {
		t.Fatalf("LAC %d", w.LastAddConfirmed())
	}
}

// One bookie killed mid-stream. With E=WQ=3, AQ=2 the writer continues and
// nothing acknowledged is lost; with WQ=AQ=2 it breaks cleanly and the
// acknowledged prefix survives the seal.
func TestBookieKilledMidStream(t *testing.T) {
	for _, tc := range []struct {
		name       string
		wq, aq     int
		wantBroken bool
		addTimeout time.Duration // generous where no add should time out
	}{
		{"quorum-still-met", 3, 2, false, 20 * time.Second},
		{"quorum-lost", 2, 2, true, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakeCluster(t, 3)
			c := newClient(t, fc.Meta, func(cfg *bookkeeper.Config) { cfg.AddTimeout = tc.addTimeout })
			ctx := testCtx(t)
			ens := []string{fc.Bookies[0].ID(), fc.Bookies[1].ID(), fc.Bookies[2].ID()}
			w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 12, Ensemble: ens, EnsembleSize: 3, WriteQuorum: tc.wq, AckQuorum: tc.aq})
			if err != nil {
				t.Fatal(err)
			}
			var acked []int64
			var failed bool
			for i := int64(0); i < 100; i++ {
				if i == 40 {
					fc.Bookies[1].Kill()
				}
				f, err := w.AppendAsync(ctx, payload(12, i, 100))
				if err != nil {
					if !errors.Is(err, bookkeeper.ErrWriterBroken) {
						t.Fatal(err)
					}
					failed = true
					break
				}
				if err := f.Wait(ctx); err != nil {
					if bookkeeper.Classify(err) != bookkeeper.Unknown {
						t.Fatalf("add error %v", err)
					}
					t.Logf("entry %d: %v", i, err)
					failed = true
					break
				}
				acked = append(acked, f.EntryID())
			}
			if failed != tc.wantBroken {
				t.Fatalf("writer broken=%v, want %v (acked %d)", failed, tc.wantBroken, len(acked))
			}
			res, err := w.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := acked[len(acked)-1]; res.LastEntryID != want {
				t.Fatalf("sealed at %d, last acked %d", res.LastEntryID, want)
			}
			r, err := c.OpenLedger(ctx, 12, bookkeeper.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ents, err := r.Read(ctx, 0, r.LastAddConfirmed())
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != len(acked) {
				t.Fatalf("read %d entries, acked %d", len(ents), len(acked))
			}
			for _, e := range ents {
				if !bytes.Equal(e.Payload, payload(12, e.EntryID, 100)) {
					t.Fatalf("entry %d differs", e.EntryID)
				}
			}
		})
	}
}

// Wrong digests: a corrupt replica is skipped; if every replica is corrupt
// the read fails with ErrCorrupt instead of serving bad bytes.
func TestCorruptReplicas(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	ens := []string{fc.Bookies[0].ID(), fc.Bookies[1].ID(), fc.Bookies[2].ID()}
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 13, Ensemble: ens})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 6; i++ {
		if _, err := w.Append(ctx, payload(13, i, 50)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	corruptOn := func(idx ...int) {
		for i, b := range fc.Bookies {
			bad := false
			for _, j := range idx {
				bad = bad || i == j
			}
			b.SetIntercept(func(r proto.Request) bkfake.Action { return bkfake.Action{Corrupt: bad && r.Op == proto.OpRead} })
		}
	}
	corruptOn(0) // entry 0's write set is {0, 1}: the first replica is bad
	r, err := c.OpenLedger(ctx, 13, bookkeeper.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ents, err := r.Read(ctx, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range ents {
		if !bytes.Equal(e.Payload, payload(13, int64(i), 50)) {
			t.Fatalf("entry %d served wrong bytes", i)
		}
	}
	corruptOn(0, 1)
	if _, err := r.Read(ctx, 0, 0); !errors.Is(err, bookkeeper.ErrCorrupt) {
		t.Fatalf("all replicas corrupt: %v", err)
	}
}

// Every metadata CAS whose answer is lost is settled by re-reading.
func TestMetadataUnknownOutcomesSettled(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	for i, applied := range []bool{true, false} {
		id := int64(20 + i)
		w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(ctx, []byte("e0")); err != nil {
			t.Fatal(err)
		}
		fc.Meta.InjectUnknown(bkfake.MetaWrite, applied, 1)
		res, err := w.Close(ctx)
		if err != nil || res.LastEntryID != 0 {
			t.Fatalf("close (lost answer, applied=%v): %+v %v", applied, res, err)
		}
		info, _ := c.ReadLedgerMetadata(ctx, id)
		if info.Metadata.State != meta.StateClosed || info.Version != res.Version {
			t.Fatalf("metadata after close: %+v", info)
		}
		fc.Meta.InjectUnknown(bkfake.MetaDelete, applied, 1)
		if err := c.DeleteLedger(ctx, id, info.Version); err != nil {
			t.Fatalf("delete (lost answer, applied=%v): %v", applied, err)
		}
		if _, _, ok := fc.Meta.Ledger(id); ok {
			t.Fatal("ledger still there")
		}
	}
	// Recovery's IN_RECOVERY and CLOSED CASes settle too.
	w, _ := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 30})
	for i := 0; i < 3; i++ {
		if _, err := w.Append(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	fc.Meta.InjectUnknown(bkfake.MetaWrite, true, 2)
	r, err := newClient(t, fc.Meta, nil).RecoverLedger(ctx, 30, bookkeeper.OpenOptions{})
	if err != nil || r.LastAddConfirmed() != 2 {
		t.Fatalf("recover with lost CAS answers: %v", err)
	}
}

func TestDeleteGuardedByVersion(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 50})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := c.ReadLedgerMetadata(ctx, 50)
	if _, err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A delete planned against the OPEN version must not remove the closed ledger.
	if err := c.DeleteLedger(ctx, 50, info.Version); !errors.Is(err, bookkeeper.ErrBadVersion) || bookkeeper.Classify(err) != bookkeeper.Conflict {
		t.Fatalf("stale delete: %v", err)
	}
	info, _ = c.ReadLedgerMetadata(ctx, 50)
	if err := c.DeleteLedger(ctx, 50, info.Version); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteLedger(ctx, 50, info.Version); !errors.Is(err, bookkeeper.ErrNoSuchLedger) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestConcurrentRecoverers(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, nil)
	ctx := testCtx(t)
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 60})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 25; i++ {
		if _, err := w.Append(ctx, payload(60, i, 20)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	lacs := make([]int64, 4)
	for i := range lacs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := newClient(t, fc.Meta, nil).RecoverLedger(ctx, 60, bookkeeper.OpenOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			lacs[i] = r.LastAddConfirmed()
		}()
	}
	wg.Wait()
	for _, l := range lacs {
		if l != 24 {
			t.Fatalf("recoverers disagree: %v", lacs)
		}
	}
}

// A request timeout closes the connection, so a late answer can never be
// matched to a later request with the same key.
func TestTimeoutClosesConnection(t *testing.T) {
	fc := fakeCluster(t, 3)
	c := newClient(t, fc.Meta, func(cfg *bookkeeper.Config) { cfg.RequestTimeout = 100 * time.Millisecond })
	ctx := testCtx(t)
	ens := []string{fc.Bookies[0].ID(), fc.Bookies[1].ID(), fc.Bookies[2].ID()}
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: 70, Ensemble: ens, EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 3})
	if err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	fc.Bookies[2].SetIntercept(func(r proto.Request) bkfake.Action {
		if r.Op == proto.OpAdd && attempts.Add(1) == 1 {
			// The first attempt is answered after the client gave up on it.
			return bkfake.Action{Delay: 300 * time.Millisecond}
		}
		return bkfake.Action{}
	})
	f, err := w.AppendAsync(ctx, []byte("late"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(ctx); err != nil {
		t.Fatalf("add after a timed-out attempt: %v", err)
	}
	if n := attempts.Load(); n < 2 {
		t.Fatalf("%d attempts on the slow bookie, want a resend", n)
	}
	if _, err := w.Append(ctx, []byte("next")); err != nil {
		t.Fatal(err)
	}
}

func newBenchCluster(b *testing.B) (*bkfake.Cluster, error) {
	c, err := bkfake.NewCluster(3)
	if err == nil {
		b.Cleanup(c.Close)
	}
	return c, err
}
