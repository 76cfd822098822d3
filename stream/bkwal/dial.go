package bkwal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/namespace"
	"github.com/nereusstream/nereus-go/metadata"
)

// DialConfig is what a server needs to serve BOOKKEEPER_* profiles:
// `nereus serve --bookkeeper-zk HOST:PORT [--bookkeeper-root /ledgers]`.
type DialConfig struct {
	// ZK is the BookKeeper cluster's ZooKeeper connect string. Required.
	ZK string
	// ZKDigest, when set, is "user:password" for ZooKeeper digest
	// authentication (never logged).
	ZKDigest string
	// Root is the bookies' ledgers root (default "/ledgers").
	Root string
	// Meta is the core's metadata store (namespace proof, ledger registry).
	Meta metadata.Store
	// WriterID is the core's writer identity (the node ID).
	WriterID string
	// Alias names the cluster in Nereus metadata (default "default").
	Alias string
	// Block, when non-zero, is the namespace block to reserve on first use;
	// zero reserves a random free block. An existing reservation is always
	// used as is.
	Block int64
	// Provider tunes the provider (its Client, Namespace, Meta, WriterID
	// and Alias are filled in by Dial).
	Provider Config
	// Client tunes the BookKeeper client (Metadata is filled in by Dial).
	Client bookkeeper.Config
	Logger *slog.Logger
}

// Dialed is an opened provider with the connections it owns.
type Dialed struct {
	*Provider
	Store  *bookkeeper.ZKStore
	Client *bookkeeper.Client
}

// CloseConnections closes the BookKeeper client and the ZooKeeper session;
// call it after the core (which closes the provider) is closed.
func (d *Dialed) CloseConnections() error {
	_ = d.Client.Close()
	return d.Store.Close()
}

// Dial connects to the BookKeeper cluster, opens (reserving on first use)
// the deployment's ledger-ID namespace and opens the provider. Reserving is
// the one-time bootstrap of a deployment on a cluster: it writes the proof
// (see package namespace); later starts only verify it, and refuse to serve
// BookKeeper profiles if it is wrong.
func Dial(ctx context.Context, dc DialConfig) (*Dialed, error) {
	if dc.Logger == nil {
		dc.Logger = slog.Default()
	}
	store, err := bookkeeper.DialZK(ctx, dc.ZK, bookkeeper.ZKOptions{LedgersRoot: dc.Root, Logger: dc.Logger, Digest: dc.ZKDigest})
	if err != nil {
		return nil, err
	}
	cc := dc.Client
	cc.Metadata, cc.Logger = store, dc.Logger
	bk, err := bookkeeper.New(cc)
	if err != nil {
		store.Close()
		return nil, err
	}
	fail := func(err error) (*Dialed, error) {
		bk.Close()
		store.Close()
		return nil, err
	}
	nsc := namespace.Config{Meta: dc.Meta, Cluster: store, Client: bk, Alias: dc.Alias}
	ns, err := namespace.Open(ctx, nsc)
	if errors.Is(err, namespace.ErrNoProof) {
		ns, err = reserve(ctx, nsc, dc.Block, dc.Logger)
	}
	if err != nil {
		return fail(fmt.Errorf("nereus/bkwal: ledger-ID namespace: %w", err))
	}
	pc := dc.Provider
	pc.Client, pc.Namespace, pc.Meta, pc.WriterID, pc.Alias = bk, ns, dc.Meta, dc.WriterID, ns.Reservation().Alias
	if pc.Logger == nil {
		pc.Logger = dc.Logger
	}
	p, err := Open(pc)
	if err != nil {
		return fail(err)
	}
	return &Dialed{Provider: p, Store: store, Client: bk}, nil
}

func reserve(ctx context.Context, nsc namespace.Config, block int64, log *slog.Logger) (*namespace.Namespace, error) {
	for attempt := 0; ; attempt++ {
		b := block
		if b == 0 {
			b = namespace.MinBlock + rand.Int64N(namespace.MaxBlock-namespace.MinBlock+1)
		}
		r, err := namespace.Reserve(ctx, nsc, b)
		if errors.Is(err, namespace.ErrReserved) && block == 0 && attempt < 8 {
			continue // another deployment holds that block: draw again
		}
		if err != nil {
			return nil, err
		}
		log.Info("reserved a BookKeeper ledger-ID namespace", "block", r.Block, "first", r.First, "last", r.Last,
			"deployment", r.DeploymentID, "instance", r.InstanceID)
		return namespace.Open(ctx, nsc)
	}
}
