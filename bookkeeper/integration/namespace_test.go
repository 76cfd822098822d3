package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/namespace"
	"github.com/nereusstream/nereus-go/metadata/memstore"
)

// The reserved namespace on a real cluster: the marker lives in the
// bookies' ZooKeeper tree next to the ledgers (and BookKeeper's tools
// ignore it), the proof is bound to the cluster's INSTANCEID, and without
// it creates and deletes are refused.
func TestRealNamespace(t *testing.T) {
	env.RequireControl(t)
	ctx := ctxFor(t, 3*time.Minute)
	c, store := newClient(t, nil)
	ms := memstore.New()
	defer ms.Close()
	cfg := namespace.Config{Meta: ms, Cluster: store, Client: c, Alias: fmt.Sprintf("it-%d", rand.Int64())}
	if _, err := namespace.Open(ctx, cfg); !errors.Is(err, namespace.ErrNoProof) {
		t.Fatalf("open before reserve: %v", err)
	}
	block := namespace.MinBlock + rand.Int64N(namespace.MaxBlock-namespace.MinBlock)
	r, err := namespace.Reserve(ctx, cfg, block)
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := store.InstanceID(ctx)
	if r.InstanceID != inst || inst == "" {
		t.Fatalf("reservation bound to instance %q, cluster %q", r.InstanceID, inst)
	}
	n, err := namespace.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id, err := n.Allocate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := n.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 5; i++ {
		if _, err := w.Append(ctx, payload(id, i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// BookKeeper's own tools still list and read ledgers with the marker in the tree.
	out := env.Run(t, "shell", "listledgers")
	if !strings.Contains(out, fmt.Sprint(id)) {
		t.Fatalf("listledgers does not show %d:\n%s", id, out)
	}
	out = env.Run(t, "shell", "ledgermetadata", "-ledgerid", fmt.Sprint(id))
	if !strings.Contains(out, "nereus/deployment") {
		t.Fatalf("owner tag missing from Java's view:\n%s", out)
	}

	// Another deployment cannot take the block.
	other := cfg
	other.Meta = memstore.New()
	if _, err := namespace.Reserve(ctx, other, block); !errors.Is(err, namespace.ErrReserved) {
		t.Fatalf("second deployment: %v", err)
	}

	// Remove the marker: creates and deletes are refused.
	id2, _ := n.Allocate(ctx)
	if err := store.DeleteMarker(ctx, namespace.MarkerDir, fmt.Sprintf("block-%d", block)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateLedger(ctx, bookkeeper.CreateOptions{LedgerID: id2}); !errors.Is(err, namespace.ErrProofInvalid) {
		t.Fatalf("create without marker: %v", err)
	}
	if err := n.DeleteLedger(ctx, id, res.Version); !errors.Is(err, namespace.ErrProofInvalid) {
		t.Fatalf("delete without marker: %v", err)
	}
	if _, err := c.ReadLedgerMetadata(ctx, id); err != nil {
		t.Fatalf("ledger gone after refused delete: %v", err)
	}
	if _, err := c.ReadLedgerMetadata(context.Background(), id2); !errors.Is(err, bookkeeper.ErrNoSuchLedger) {
		t.Fatalf("refused create left metadata: %v", err)
	}
}
