package integration

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/bktest"
	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	"github.com/nereusstream/nereus-go/bookkeeper/proto"
	"github.com/nereusstream/nereus-go/internal/testenv"
)

// Add, read and LAC round trips against real bookies, for every digest
// type, including a reader following an open ledger.
func TestRealAddReadLAC(t *testing.T) {
	env.Require(t)
	c, _ := newClient(t, nil)
	ctx := ctxFor(t, 2*time.Minute)
	for _, dt := range []proto.DigestType{proto.DigestCRC32C, proto.DigestCRC32, proto.DigestHMAC, proto.DigestDummy} {
		t.Run(dt.String(), func(t *testing.T) {
			id := newLedgerID()
			w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id, DigestType: dt, Password: []byte("pw")})
			if err != nil {
				t.Fatal(err)
			}
			const n = 300
			var futs []*bookkeeper.AddFuture
			for i := int64(0); i < n; i++ {
				f, err := w.AppendAsync(ctx, payload(id, i, 100+int(i)))
				if err != nil {
					t.Fatal(err)
				}
				futs = append(futs, f)
			}
			for _, f := range futs {
				if err := f.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if w.LastAddConfirmed() != n-1 {
				t.Fatalf("writer LAC %d", w.LastAddConfirmed())
			}
			// A reader of the open ledger sees the piggybacked LAC: each
			// entry carries the writer's LAC when it was sent, so after a
			// pipelined burst it may lag by up to the whole burst.
			rc, _ := newClient(t, nil)
			r, err := rc.OpenLedger(ctx, id, bookkeeper.OpenOptions{Password: []byte("pw")})
			if err != nil {
				t.Fatal(err)
			}
			if r.IsClosed() || r.LastAddConfirmed() > n-2 {
				t.Fatalf("open-ledger reader: closed=%v LAC %d, want <= %d", r.IsClosed(), r.LastAddConfirmed(), n-2)
			}
			// The writer's acknowledgements prove entries the LAC does not
			// show yet; ReadUnconfirmed reads them.
			ents, err := r.ReadUnconfirmed(ctx, 0, n-1)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if !bytes.Equal(e.Payload, payload(id, e.EntryID, 100+int(e.EntryID))) {
					t.Fatalf("entry %d differs", e.EntryID)
				}
			}
			// One sequential add carries LAC n-1.
			if _, err := w.Append(ctx, payload(id, n, 10)); err != nil {
				t.Fatal(err)
			}
			if lac, err := r.Refresh(ctx); err != nil || lac != n-1 {
				t.Fatalf("refresh: %d %v", lac, err)
			}
			if ents, err := r.Read(ctx, 0, n-1); err != nil || len(ents) != n {
				t.Fatalf("read to LAC: %v", err)
			}
			res, err := w.Close(ctx)
			if err != nil || res.LastEntryID != n {
				t.Fatalf("close: %+v %v", res, err)
			}
			if lac, err := r.Refresh(ctx); err != nil || lac != n || !r.IsClosed() {
				t.Fatalf("refresh after close: %d %v", lac, err)
			}
			last, err := r.Read(ctx, n, n)
			if err != nil || !bytes.Equal(last[0].Payload, payload(id, n, 10)) {
				t.Fatalf("last entry: %v", err)
			}
		})
	}
}

// Go writes, Java reads: BookKeeper's shell parses the Go-written metadata
// (ledgermetadata) and reads the entries (readledger), and BookKeeper's
// Java client reads every entry byte for byte, over v3 and v2.
func TestRealJavaReadsGoLedger(t *testing.T) {
	env.RequireControl(t)
	c, store := newClient(t, nil)
	ctx := ctxFor(t, 5*time.Minute)
	type spec struct {
		dt   proto.DigestType
		java string
		pw   string
	}
	for _, sp := range []spec{{proto.DigestCRC32C, "CRC32C", ""}, {proto.DigestCRC32, "CRC32", "secret"}, {proto.DigestHMAC, "MAC", "secret"}} {
		t.Run(sp.java, func(t *testing.T) {
			id := newLedgerID()
			w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id, DigestType: sp.dt, Password: []byte(sp.pw),
				EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2, Custom: map[string][]byte{"writer": []byte("nereus-go")}})
			if err != nil {
				t.Fatal(err)
			}
			const n = 20
			want := map[int64]string{}
			var length int64
			for i := int64(0); i < n; i++ {
				p := payload(id, i, 1000+int(i))
				if _, err := w.Append(ctx, p); err != nil {
					t.Fatal(err)
				}
				want[i] = sha(p)
				length += int64(len(p))
			}
			if _, err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}

			out := env.Run(t, "shell", "ledgermetadata", "-ledgerid", fmt.Sprint(id))
			for _, s := range []string{"ledgerID: " + fmt.Sprint(id), "state=CLOSED", fmt.Sprintf("lastEntryId=%d", n-1),
				fmt.Sprintf("length=%d", length), "digestType=" + sp.java, "ensembleSize=3", "writeQuorumSize=2", "ackQuorumSize=2"} {
				if !strings.Contains(out, s) {
					t.Fatalf("ledgermetadata output lacks %q:\n%s", s, out)
				}
			}
			if sp.pw == "" {
				// readledger opens with the client configuration's password (empty).
				out = env.Run(t, "shell", "readledger", "-ledgerid", fmt.Sprint(id), "-firstentryid", "0", "-lastentryid", fmt.Sprint(n-1))
				if got := len(bktest.Lines(out, "--------- Lid=")); got != n {
					t.Fatalf("readledger printed %d entries, want %d:\n%s", got, n, out)
				}
				if !strings.Contains(out, fmt.Sprintf("Eid=%d, EntrySize=%d", n-1, length)) {
					t.Fatalf("readledger: last entry's cumulative size missing:\n%s", out)
				}
			}
			// Java's default wire protocol (v3) always; v2 too for CRC32C.
			v2s := []string{"false"}
			if sp.dt == proto.DigestCRC32C {
				v2s = append(v2s, "true")
			}
			for _, v2 := range v2s {
				out = env.Run(t, "java", path.Join(env.RepoRoot, "scripts/bookkeeper/LedgerTool.java"), env.ClientConf(),
					"read", fmt.Sprint(id), sp.java, sp.pw, "false", v2)
				metaLines := bktest.Lines(out, "META ")
				if len(metaLines) != 1 || metaLines[0] != fmt.Sprintf("META CLOSED %d %d 3 2 2 %s", n-1, length, sp.java) {
					t.Fatalf("java META (v2=%s): %q\n%s", v2, metaLines, out)
				}
				ents := bktest.Lines(out, "ENTRY ")
				if len(ents) != n {
					t.Fatalf("java read %d entries, want %d:\n%s", len(ents), n, out)
				}
				var cum int64
				for i, line := range ents {
					cum += int64(1000 + i)
					if exp := fmt.Sprintf("ENTRY %d %d %s", i, cum, want[int64(i)]); line != exp {
						t.Fatalf("java entry line %q, want %q", line, exp)
					}
				}
			}
			// The raw znode is where BookKeeper's hierarchical layout puts it.
			data, _, err := store.Conn().Get(store.LedgerPath(id))
			if err != nil || !bytes.HasPrefix(data, []byte("BookieMetadataFormatVersion\t3\n")) {
				t.Fatalf("znode %s: %v", store.LedgerPath(id), err)
			}
		})
	}
}

// Java writes, Go reads: a ledger written by BookKeeper's Java client (v3
// wire protocol, its own metadata) is read by the Go client; a ledger whose
// Java writer crashed is recovered by the Go client, and a ledger whose Go
// writer crashed is recovered by the Java client.
func TestRealGoReadsJavaLedger(t *testing.T) {
	env.RequireControl(t)
	c, _ := newClient(t, nil)
	ctx := ctxFor(t, 5*time.Minute)
	tool := path.Join(env.RepoRoot, "scripts/bookkeeper/LedgerTool.java")

	t.Run("closed", func(t *testing.T) {
		id := newLedgerID()
		out := env.Run(t, "java", tool, env.ClientConf(), "write", fmt.Sprint(id), "25", "4096", "CRC32C", "jpw", "3", "2", "2", "true", "false")
		if l := bktest.Lines(out, "WROTE "); len(l) != 1 || l[0] != fmt.Sprintf("WROTE %d 24", id) {
			t.Fatalf("java write: %q\n%s", l, out)
		}
		r, err := c.OpenLedger(ctx, id, bookkeeper.OpenOptions{Password: []byte("jpw")})
		if err != nil {
			t.Fatal(err)
		}
		info := r.Info()
		if !r.IsClosed() || r.LastAddConfirmed() != 24 || info.Metadata.Length != 25*4096 ||
			string(info.Metadata.Custom["writer"]) != "java-ledgertool" || info.Metadata.DigestType != proto.DigestCRC32C {
			t.Fatalf("java ledger metadata: %+v", info.Metadata)
		}
		ents, err := r.Read(ctx, 0, 24)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !bytes.Equal(e.Payload, payload(id, e.EntryID, 4096)) || e.Length != (e.EntryID+1)*4096 {
				t.Fatalf("java entry %d differs", e.EntryID)
			}
		}
	})

	t.Run("java-writer-crashed-go-recovers", func(t *testing.T) {
		id := newLedgerID()
		out := env.Run(t, "java", tool, env.ClientConf(), "write", fmt.Sprint(id), "10", "512", "MAC", "jpw", "3", "3", "2", "false", "true")
		if l := bktest.Lines(out, "WROTE "); len(l) != 1 || l[0] != fmt.Sprintf("WROTE %d 9", id) {
			t.Fatalf("java write: %q\n%s", l, out)
		}
		info, err := c.ReadLedgerMetadata(ctx, id)
		if err != nil || info.Metadata.State != meta.StateOpen {
			t.Fatalf("crashed java ledger: %+v %v", info, err)
		}
		r, err := c.RecoverLedger(ctx, id, bookkeeper.OpenOptions{Password: []byte("jpw")})
		if err != nil {
			t.Fatal(err)
		}
		if r.LastAddConfirmed() != 9 || r.Info().Metadata.Length != 10*512 {
			t.Fatalf("recovered java ledger: lac %d, %+v", r.LastAddConfirmed(), r.Info().Metadata)
		}
		ents, err := r.Read(ctx, 0, 9)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !bytes.Equal(e.Payload, payload(id, e.EntryID, 512)) {
				t.Fatalf("entry %d differs", e.EntryID)
			}
		}
		// Java agrees with the Go recovery.
		out = env.Run(t, "java", tool, env.ClientConf(), "read", fmt.Sprint(id), "MAC", "jpw", "false", "false")
		if l := bktest.Lines(out, "META "); len(l) != 1 || l[0] != "META CLOSED 9 5120 3 3 2 MAC" {
			t.Fatalf("java view after Go recovery: %q", l)
		}
	})

	t.Run("go-writer-crashed-java-recovers", func(t *testing.T) {
		id := newLedgerID()
		wc, _ := newClient(t, nil)
		w, err := wc.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id, Password: []byte("gpw"), EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2})
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < 15; i++ {
			if _, err := w.Append(ctx, payload(id, i, 300)); err != nil {
				t.Fatal(err)
			}
		}
		wc.Close() // crash: no ledger close
		out := env.Run(t, "java", tool, env.ClientConf(), "read", fmt.Sprint(id), "CRC32C", "gpw", "true", "false")
		if l := bktest.Lines(out, "META "); len(l) != 1 || l[0] != "META CLOSED 14 4500 3 3 2 CRC32C" {
			t.Fatalf("java recovery of a Go ledger: %q\n%s", l, out)
		}
		if n := len(bktest.Lines(out, "ENTRY ")); n != 15 {
			t.Fatalf("java read %d entries", n)
		}
		r, err := c.OpenLedger(ctx, id, bookkeeper.OpenOptions{Password: []byte("gpw")})
		if err != nil || !r.IsClosed() || r.LastAddConfirmed() != 14 {
			t.Fatalf("go view after java recovery: %v", err)
		}
	})
}

// Fencing: after a recovery open by a new owner, the old writer's adds
// fail and nothing it sends is acknowledged.
func TestRealFencing(t *testing.T) {
	env.Require(t)
	ctx := ctxFor(t, 2*time.Minute)
	old, _ := newClient(t, nil)
	id := newLedgerID()
	w, err := old.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 50; i++ {
		if _, err := w.Append(ctx, payload(id, i, 256)); err != nil {
			t.Fatal(err)
		}
	}
	owner, _ := newClient(t, nil)
	r, err := owner.RecoverLedger(ctx, id, bookkeeper.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.LastAddConfirmed() != 49 || !r.IsClosed() {
		t.Fatalf("recovered LAC %d", r.LastAddConfirmed())
	}
	acked := 0
	for i := int64(50); i < 80; i++ {
		f, err := w.AppendAsync(ctx, payload(id, i, 256))
		if err != nil {
			if !errors.Is(err, bookkeeper.ErrFenced) {
				t.Fatalf("append to fenced ledger: %v", err)
			}
			continue
		}
		if err := f.Wait(ctx); err == nil {
			acked++
		} else if !errors.Is(err, bookkeeper.ErrFenced) {
			t.Fatalf("fenced add: %v", err)
		}
	}
	if acked != 0 || w.LastAddConfirmed() != 49 {
		t.Fatalf("%d adds acknowledged after fencing (writer LAC %d)", acked, w.LastAddConfirmed())
	}
	res, err := w.Close(ctx)
	if !errors.Is(err, bookkeeper.ErrFenced) || res.LastEntryID != 49 {
		t.Fatalf("old writer close: %+v %v", res, err)
	}
	r2, err := owner.OpenLedger(ctx, id, bookkeeper.OpenOptions{})
	if err != nil || r2.LastAddConfirmed() != 49 {
		t.Fatalf("ledger after fencing: %v", err)
	}
}

// Recovery after a writer crash finds exactly the acknowledged entries.
func TestRealRecoveryAfterCrash(t *testing.T) {
	env.Require(t)
	ctx := ctxFor(t, 2*time.Minute)
	wc, _ := newClient(t, nil)
	id := newLedgerID()
	w, err := wc.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id, EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	var futs []*bookkeeper.AddFuture
	for i := int64(0); i < 200; i++ {
		f, err := w.AppendAsync(ctx, payload(id, i, 4096))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		if err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wc.Close() // crash with every add acknowledged and no close
	rc, _ := newClient(t, nil)
	r, err := rc.RecoverLedger(ctx, id, bookkeeper.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.LastAddConfirmed() != 199 || r.Info().Metadata.Length != 200*4096 {
		t.Fatalf("recovered %d entries (length %d), want exactly 200", r.LastAddConfirmed()+1, r.Info().Metadata.Length)
	}
	ents, err := r.Read(ctx, 0, 199)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !bytes.Equal(e.Payload, payload(id, e.EntryID, 4096)) {
			t.Fatalf("entry %d differs", e.EntryID)
		}
	}
	// Recovery is idempotent.
	r2, err := rc.RecoverLedger(ctx, id, bookkeeper.OpenOptions{})
	if err != nil || r2.LastAddConfirmed() != 199 {
		t.Fatalf("second recovery: %v", err)
	}
}

// A bookie killed mid-stream: with E=WQ=3, AQ=2 writes continue; with
// WQ=AQ=2 the writer breaks cleanly and is sealed at its LAC. Nothing
// acknowledged is lost either way.
func TestRealBookieKilled(t *testing.T) {
	env.RequireControl(t)
	if env.NumBookies(t) != 3 {
		testenv.SkipOrFail(t, "needs exactly 3 bookies, the cluster has %d", env.NumBookies(t))
	}
	for _, tc := range []struct {
		name       string
		wq, aq     int
		wantBroken bool
	}{
		{"quorum-still-met", 3, 2, false},
		{"quorum-lost", 2, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t, 3*time.Minute)
			c, _ := newClient(t, func(cfg *bookkeeper.Config) {
				if tc.wantBroken {
					// How long an add may wait for the dead bookie before
					// the writer breaks; generous for a loaded machine.
					cfg.AddTimeout = 10 * time.Second
				}
			})
			ens := []string{env.BookieID(t, 0), env.BookieID(t, 1), env.BookieID(t, 2)}
			id := newLedgerID()
			w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id, Ensemble: ens, EnsembleSize: 3, WriteQuorum: tc.wq, AckQuorum: tc.aq})
			if err != nil {
				t.Fatal(err)
			}
			restarted := false
			defer func() {
				if !restarted {
					env.Run(t, "start-bookie", "1")
				}
			}()
			var acked []int64
			broken := false
			for i := int64(0); i < 300 && !broken; i++ {
				if i == 100 {
					env.Run(t, "kill-bookie", "1")
				}
				f, err := w.AppendAsync(ctx, payload(id, i, 1024))
				if err != nil {
					if !errors.Is(err, bookkeeper.ErrWriterBroken) {
						t.Fatal(err)
					}
					broken = true
					break
				}
				if err := f.Wait(ctx); err != nil {
					if bookkeeper.Classify(err) != bookkeeper.Unknown {
						t.Fatalf("add error: %v", err)
					}
					broken = true
					break
				}
				acked = append(acked, f.EntryID())
			}
			if len(acked) < 100 {
				t.Fatalf("only %d adds acknowledged before the bookie was killed", len(acked))
			}
			if broken != tc.wantBroken {
				t.Fatalf("broken=%v, want %v after %d acks", broken, tc.wantBroken, len(acked))
			}
			res, err := w.Close(ctx)
			if err != nil || res.LastEntryID != acked[len(acked)-1] {
				t.Fatalf("sealed at %+v (%v), last acked %d", res, err, acked[len(acked)-1])
			}
			env.Run(t, "start-bookie", "1")
			restarted = true
			rc, _ := newClient(t, nil)
			r, err := rc.OpenLedger(ctx, id, bookkeeper.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ents, err := r.Read(ctx, 0, r.LastAddConfirmed())
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != len(acked) {
				t.Fatalf("read %d entries, %d acknowledged", len(ents), len(acked))
			}
			for _, e := range ents {
				if !bytes.Equal(e.Payload, payload(id, e.EntryID, 1024)) {
					t.Fatalf("entry %d differs", e.EntryID)
				}
			}
		})
	}
}

// Explicit IDs: a collision is detected, not overwritten, whoever created
// the ledger; deletes are conditional on the version and clean up parents.
func TestRealCollisionAndDelete(t *testing.T) {
	env.Require(t)
	ctx := ctxFor(t, time.Minute)
	c, store := newClient(t, nil)
	// In a znode directory of its own (a directory holds 10^4 IDs), so the
	// delete can remove the parent.
	id := newLedgerID() + 10_000_000
	w, err := c.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, []byte("first")); err != nil {
		t.Fatal(err)
	}
	before, st0, _ := store.Conn().Get(store.LedgerPath(id))
	c2, _ := newClient(t, nil)
	if _, err := c2.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id}); !errors.Is(err, bookkeeper.ErrLedgerExists) {
		t.Fatalf("collision: %v", err)
	}
	after, st1, _ := store.Conn().Get(store.LedgerPath(id))
	if !bytes.Equal(before, after) || st0.Version != st1.Version {
		t.Fatal("collision changed the existing ledger")
	}
	info, err := c.ReadLedgerMetadata(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteLedger(ctx, id, info.Version); !errors.Is(err, bookkeeper.ErrBadVersion) {
		t.Fatalf("stale delete: %v", err)
	}
	info, _ = c.ReadLedgerMetadata(ctx, id)
	if err := c.DeleteLedger(ctx, id, info.Version); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := store.Conn().Exists(store.LedgerPath(id)); ok {
		t.Fatal("znode still there")
	}
	// The ledger's private parent directory is gone too.
	if ok, _, err := store.Conn().Exists(path.Dir(store.LedgerPath(id))); ok || err != nil {
		t.Fatalf("empty parent left behind (%v)", err)
	}
	if _, err := c.OpenLedger(ctx, id, bookkeeper.OpenOptions{}); !errors.Is(err, bookkeeper.ErrNoSuchLedger) {
		t.Fatalf("open deleted: %v", err)
	}
}
