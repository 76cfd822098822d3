package namespace

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/bkfake"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/memstore"
)

type fixture struct {
	fc  *bkfake.Cluster
	bk  *bookkeeper.Client
	cfg Config
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	fc, err := bkfake.NewCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fc.Close)
	bk, err := bookkeeper.New(bookkeeper.Config{Metadata: fc.Meta, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bk.Close() })
	ms := memstore.New()
	t.Cleanup(func() { ms.Close() })
	return &fixture{fc: fc, bk: bk, cfg: Config{Meta: ms, Cluster: fc.Meta, Client: bk}}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestNoProofRefusesEverything(t *testing.T) {
	f := newFixture(t)
	if _, err := Open(ctx(t), f.cfg); !errors.Is(err, ErrNoProof) {
		t.Fatalf("open without reservation: %v", err)
	}
}

func TestReserveAllocateCreateDelete(t *testing.T) {
	f := newFixture(t)
	c := ctx(t)
	r, err := Reserve(c, f.cfg, MinBlock+5)
	if err != nil {
		t.Fatal(err)
	}
	if r.First != (MinBlock+5)<<40 || r.Last != r.First+BlockSize-1 || r.First < 1<<62 || r.Last < 0 {
		t.Fatalf("range [%d, %d]", r.First, r.Last)
	}
	again, err := Reserve(c, f.cfg, MinBlock+5)
	if err != nil || *again != *r {
		t.Fatalf("reserve is not idempotent: %v", err)
	}
	if _, err := Reserve(c, f.cfg, MinBlock+6); !errors.Is(err, ErrReserved) {
		t.Fatalf("second block for the same deployment: %v", err)
	}
	n, err := Open(c, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	id, err := n.Allocate(c)
	if err != nil || id != r.First {
		t.Fatalf("first allocation %d %v", id, err)
	}
	w, err := n.CreateLedger(c, bookkeeper.CreateOptions{LedgerID: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(c, []byte("data")); err != nil {
		t.Fatal(err)
	}
	res, err := w.Close(c)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := f.bk.ReadLedgerMetadata(c, id)
	if string(info.Metadata.Custom[OwnerKey]) != r.DeploymentID {
		t.Fatalf("owner tag %q", info.Metadata.Custom[OwnerKey])
	}
	if _, err := n.CreateLedger(c, bookkeeper.CreateOptions{LedgerID: id}); !errors.Is(err, ErrNotAllocated) {
		t.Fatalf("re-create of a used ID: %v", err)
	}
	if _, err := n.CreateLedger(c, bookkeeper.CreateOptions{LedgerID: id + 100}); !errors.Is(err, ErrNotAllocated) {
		t.Fatalf("create of an unallocated ID: %v", err)
	}
	if err := n.DeleteLedger(c, id, res.Version-1); !errors.Is(err, bookkeeper.ErrBadVersion) {
		t.Fatalf("stale delete: %v", err)
	}
	if err := n.DeleteLedger(c, id, res.Version); err != nil {
		t.Fatal(err)
	}
	next, err := n.Allocate(c)
	if err != nil || next != id+1 {
		t.Fatalf("allocation after delete: %d %v (IDs are never reused)", next, err)
	}
}

func TestAllocationNeverRepeats(t *testing.T) {
	f := newFixture(t)
	c := ctx(t)
	if _, err := Reserve(c, f.cfg, MinBlock); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		n, err := Open(c, f.cfg) // four "processes"
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				id, err := n.Allocate(c)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("ID %d allocated twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Fatalf("%d IDs", len(seen))
	}
}

// lossyMeta loses the answer of the next Put after applying it.
type lossyMeta struct {
	metadata.Store
	mu   sync.Mutex
	lose int
}

func (l *lossyMeta) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	v, err := l.Store.Put(ctx, key, value, expected)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && l.lose > 0 {
		l.lose--
		return 0, metadata.ErrUnavailable
	}
	return v, err
}

func TestAllocationUnknownBurnsTheID(t *testing.T) {
	f := newFixture(t)
	c := ctx(t)
	lm := &lossyMeta{Store: f.cfg.Meta}
	f.cfg.Meta = lm
	r, err := Reserve(c, f.cfg, MinBlock)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Open(c, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	lm.lose = 1
	id, err := n.Allocate(c)
	if err != nil || id != r.First+1 {
		t.Fatalf("allocation after a lost answer: %d %v (want %d: %d burnt)", id, err, r.First+1, r.First)
	}
	if _, err := n.CreateLedger(c, bookkeeper.CreateOptions{LedgerID: r.First}); !errors.Is(err, ErrNotAllocated) {
		t.Fatalf("burnt ID usable: %v", err)
	}
}

func TestExhaustion(t *testing.T) {
	f := newFixture(t)
	c := ctx(t)
	r, err := Reserve(c, f.cfg, MaxBlock)
	if err != nil {
		t.Fatal(err)
	}
	if r.Last != 1<<63-1 {
		t.Fatalf("last block ends at %d", r.Last)
	}
	if _, err := f.cfg.Meta.Put(c, f.cfg.counterKey(), encodeCounter(r.Last), metadata.NotExists); err != nil {
		t.Fatal(err)
	}
	n, _ := Open(c, f.cfg)
	if id, err := n.Allocate(c); err != nil || id != r.Last {
		t.Fatalf("last ID: %d %v", id, err)
	}
	if _, err := n.Allocate(c); !errors.Is(err, ErrExhausted) {
		t.Fatalf("past the end: %v", err)
	}
}

// Collisions with a foreign ledger inside the block are detected; foreign
// ledgers are never deleted.
func TestForeignLedgerInBlock(t *testing.T) {
	f := newFixture(t)
	c := ctx(t)
	r, err := Reserve(c, f.cfg, MinBlock)
	if err != nil {
		t.Fatal(err)
	}
	// A non-Nereus writer takes the ID we will allocate next.
	fw, err := f.bk.CreateLedger(c, bookkeeper.CreateOptions{LedgerID: r.First})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Append(c, []byte("foreign")); err != nil {
		t.Fatal(err)
	}
	before, v0, _ := f.fc.Meta.Ledger(r.First)
	n, _ := Open(c, f.cfg)
	id, _ := n.Allocate(c)
	if _, err := n.CreateLedger(c, bookkeeper.CreateOptions{LedgerID: id}); !errors.Is(err, bookkeeper.ErrLedgerExists) {
		t.Fatalf("collision: %v", err)
	}
	after, v1, _ := f.fc.Meta.Ledger(r.First)
	if !bytes.Equal(before, after) || v0 != v1 {
		t.Fatal("foreign ledger modified")
	}
	if err := n.DeleteLedger(c, r.First, v1); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("delete of a foreign ledger: %v", err)
	}
	if err := n.DeleteLedger(c, 12345, 0); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("delete outside the block: %v", err)
	}
	if _, _, ok := f.fc.Meta.Ledger(r.First); !ok {
		t.Fatal("foreign ledger deleted")
	}
}

// Every way the proof can be wrong refuses creates and deletes.
func TestInvalidProofs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, f *fixture, r *Reservation)
	}{
		{"marker-deleted", func(t *testing.T, f *fixture, r *Reservation) {
			_ = f.fc.Meta.DeleteMarker(context.Background(), MarkerDir, markerName(r.Block))
		}},
		{"marker-names-another-deployment", func(t *testing.T, f *fixture, r *Reservation) {
			other := *r
			other.DeploymentID = "00000000000000000000000000000000"
			_ = f.fc.Meta.WriteMarker(context.Background(), MarkerDir, markerName(r.Block), encode(&other))
		}},
		{"other-bookkeeper-cluster", func(t *testing.T, f *fixture, r *Reservation) {
			f.fc.Meta.SetInstanceID("a-different-cluster")
		}},
		{"record-corrupt", func(t *testing.T, f *fixture, r *Reservation) {
			rec, _ := f.cfg.Meta.Get(context.Background(), f.cfg.recordKey())
			bad := append([]byte(nil), rec.Value...)
			bad[len(bad)-2] ^= 1
			if _, err := f.cfg.Meta.Put(context.Background(), f.cfg.recordKey(), bad, rec.Version); err != nil {
				t.Fatal(err)
			}
		}},
		{"record-deleted", func(t *testing.T, f *fixture, r *Reservation) {
			_ = f.cfg.Meta.Delete(context.Background(), f.cfg.recordKey(), metadata.AnyVersion)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c := ctx(t)
			r, err := Reserve(c, f.cfg, MinBlock)
			if err != nil {
				t.Fatal(err)
			}
			n, err := Open(c, f.cfg)
			if err != nil {
				t.Fatal(err)
			}
			id, _ := n.Allocate(c)
			w, err := n.CreateLedger(c, bookkeeper.CreateOptions{LedgerID: id})
			if err != nil {
				t.Fatal(err)
			}
			res, _ := w.Close(c)
			id2, _ := n.Allocate(c)

			tc.corrupt(t, f, r)

			if _, err := Open(c, f.cfg); !errors.Is(err, ErrProofInvalid) && !errors.Is(err, ErrNoProof) {
				t.Fatalf("open with a broken proof: %v", err)
			}
			_, err = n.CreateLedger(c, bookkeeper.CreateOptions{LedgerID: id2})
			if !errors.Is(err, ErrProofInvalid) && !errors.Is(err, ErrNoProof) {
				t.Fatalf("create with a broken proof: %v", err)
			}
			if _, _, ok := f.fc.Meta.Ledger(id2); ok {
				t.Fatal("ledger created without a valid proof")
			}
			err = n.DeleteLedger(c, id, res.Version)
			if !errors.Is(err, ErrProofInvalid) && !errors.Is(err, ErrNoProof) {
				t.Fatalf("delete with a broken proof: %v", err)
			}
			if _, _, ok := f.fc.Meta.Ledger(id); !ok {
				t.Fatal("ledger deleted without a valid proof")
			}
		})
	}
}

// A second deployment on the same BookKeeper cluster cannot take the block.
func TestSecondDeploymentRefused(t *testing.T) {
	f := newFixture(t)
	c := ctx(t)
	if _, err := Reserve(c, f.cfg, MinBlock+1); err != nil {
		t.Fatal(err)
	}
	other := f.cfg
	other.Meta = memstore.New() // its own metadata store
	if _, err := Reserve(c, other, MinBlock+1); !errors.Is(err, ErrReserved) {
		t.Fatalf("second deployment reserved the same block: %v", err)
	}
	if _, err := Open(c, other); !errors.Is(err, ErrNoProof) {
		t.Fatalf("second deployment opened: %v", err)
	}
	if _, err := Reserve(c, other, MinBlock+2); err != nil {
		t.Fatalf("another block: %v", err)
	}
	if _, err := Reserve(c, f.cfg, MinBlock-1); err == nil {
		t.Fatal("block below 2^62 accepted")
	}
}
