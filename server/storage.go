package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/objectstore/metered"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/bkwal"
	"github.com/nereusstream/nereus-go/stream/objectwal"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// openedStorage is the stream storage the process serves, with what /healthz
// reports about it.
type openedStorage struct {
	stream.Storage
	io.Closer
	// Metadata is the store the core commits through; front ends keep their
	// own protocol state in it under their own key namespaces.
	Metadata metadata.Store
	// Backend names the implementation ("memory", "core").
	Backend string
	// Durable is false when acknowledged appends do not survive the process.
	Durable bool
	// ObjectStoreInfo and MetadataInfo describe the stores under the core
	// for /healthz (nil when the storage was handed in, not built by
	// openStorage).
	ObjectStoreInfo, MetadataInfo *adminapi.StorageBackend
}

// RegisterRetentionGuard forwards to the core (front ends type-assert
// Deps.Storage for it to protect what their consumers still need from
// retention; see stream.RetentionGuard). Without a core it does nothing:
// nothing else applies retention.
func (o openedStorage) RegisterRetentionGuard(match func(stream.Info) bool, g stream.RetentionGuard) {
	if r, ok := o.Storage.(interface {
		RegisterRetentionGuard(func(stream.Info) bool, stream.RetentionGuard)
	}); ok {
		r.RegisterRetentionGuard(match, g)
	}
}

// The view methods forward to the core (stream.Views) so front ends can
// serve compacted views; without a core there are no views: ReadView is
// Read, and compaction is refused.
func (o openedStorage) views() (stream.Views, bool) {
	v, ok := o.Storage.(stream.Views)
	return v, ok
}

func (o openedStorage) ReadView(ctx context.Context, id stream.ID, kind string, from int64, opts stream.ReadOptions) (stream.ReadResult, error) {
	if v, ok := o.views(); ok {
		return v.ReadView(ctx, id, kind, from, opts)
	}
	return o.Storage.Read(ctx, id, from, opts)
}

func (o openedStorage) DescribeView(ctx context.Context, id stream.ID, kind string) (stream.ViewInfo, error) {
	if v, ok := o.views(); ok {
		return v.DescribeView(ctx, id, kind)
	}
	return stream.ViewInfo{Kind: kind}, nil
}

func (o openedStorage) ViewBounds(ctx context.Context, id stream.ID, kind string) (int64, int64, error) {
	if v, ok := o.views(); ok {
		return v.ViewBounds(ctx, id, kind)
	}
	in, err := o.Storage.Describe(ctx, id)
	return in.StartOffset, in.EndOffset, err
}

func (o openedStorage) Compact(ctx context.Context, id stream.ID, kind string, upTo int64, cmp stream.Compactor) (stream.CompactionStats, error) {
	if v, ok := o.views(); ok {
		return v.Compact(ctx, id, kind, upTo, cmp)
	}
	return stream.CompactionStats{}, fmt.Errorf("%w: this storage keeps no views", stream.ErrInvalidArgument)
}

func (o openedStorage) RegisterCompactionPolicy(kind string, match func(stream.Info) bool, p stream.CompactionPolicy) {
	if v, ok := o.views(); ok {
		v.RegisterCompactionPolicy(kind, match, p)
	}
}

// openStorage is the ONE place the process constructs its stream storage:
// the stream core over the metadata store --metadata selects (logstore in
// <data-dir>/metadata.log/ or bbolt in <data-dir>/metadata.db, or etcd) and the Object WAL on the object store
// --object-store selects (the filesystem in <data-dir>/objects, or S3).
// The node ID is the core's writer identity and names this node's WAL log
// (wal/<node-id> in the object store), so a restarted process claims (and
// fences) its predecessor's log and sessions; nodes sharing S3 and etcd
// each need their own data dir, hence their own node ID.
func openStorage(cfg Config, nodeID string, logger *slog.Logger, reg prometheus.Registerer, own stream.Ownership) (_ openedStorage, err error) {
	objSpec, err := parseObjectStore(cfg.ObjectStore)
	if err != nil {
		return openedStorage{}, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return openedStorage{}, err
	}
	var metaWhy string
	cfg.Metadata, metaWhy = resolveMetadata(cfg.DataDir, cfg.Metadata)
	metaSpec, err := parseMetadata(cfg.Metadata)
	if err != nil {
		return openedStorage{}, err
	}
	record, err := checkBackends(cfg.DataDir, objSpec, metaSpec)
	if err != nil {
		return openedStorage{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RecoveryTimeout)
	defer cancel()

	// Undo on failure, in reverse order of opening.
	var undo []func() error
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				_ = undo[i]()
			}
		}
	}()
	mtr, err := newMeters(reg)
	if err != nil {
		return openedStorage{}, err
	}
	undo = append(undo, func() error { return mtr.shutdown(context.Background()) })
	meta, metaInfo, err := openMetadataStore(ctx, cfg, logger)
	if err != nil {
		return openedStorage{}, err
	}
	undo = append(undo, meta.Close)
	objects, closeObjects, objInfo, err := openObjectStore(ctx, cfg, logger, reg)
	if err != nil {
		return openedStorage{}, err
	}
	if closeObjects != nil {
		undo = append(undo, closeObjects)
	}
	// Every object store call of the WAL (and, later, of materialization
	// and GC) is counted and timed here.
	objects = metered.Wrap(objects, mtr.Meter(metered.InstrumentationName))
	// Recorded before the WAL's recovery, which is the first step that
	// acts on what the metadata store says.
	if record {
		if err := recordBackends(cfg.DataDir, objSpec, metaSpec); err != nil {
			return openedStorage{}, fmt.Errorf("recording the storage backends in the data dir: %w", err)
		}
	}
	logger.Info("storage backends", "object_store", objInfo.Kind, "object_store_location", objInfo.Location,
		"s3_endpoint", objInfo.Endpoint, "metadata", metaInfo.Kind, "metadata_location", metaInfo.Location, "metadata_chosen_by", metaWhy)

	wal, err := objectwal.Open(ctx, cfg.objectWALConfig(objectwal.Config{Store: objects, Prefix: "wal/" + nodeID,
		Logger: logger, Meter: mtr.Meter("github.com/nereusstream/nereus-go/wal")}, objInfo.Kind))
	if err != nil {
		return openedStorage{}, err
	}
	var bkWAL provider.Provider
	if cfg.BookKeeperZK != "" {
		// --bookkeeper-zk enables the BOOKKEEPER_WAL_ONLY profile: connect,
		// verify (or on first start reserve) this deployment's ledger-ID
		// namespace, and open the provider on the core's metadata store.
		digest, err := readSecret(cfg.BookKeeperZKDigestFile, cfg.BookKeeperZKDigest, "bookkeeper-zk-digest-file")
		if err != nil {
			_ = wal.Close(ctx)
			return openedStorage{}, err
		}
		d, err := bkwal.Dial(ctx, bkwal.DialConfig{ZK: cfg.BookKeeperZK, ZKDigest: digest, Root: cfg.BookKeeperRoot,
			Meta: meta, WriterID: nodeID, Logger: logger.With("component", "bkwal"),
			Provider: cfg.bookKeeperConfig(bkwal.Config{Meter: mtr.Meter("github.com/nereusstream/nereus-go/stream/bkwal")}),
			Client:   cfg.bookKeeperClientConfig(bookkeeper.Config{})})
		if err != nil {
			_ = wal.Close(ctx)
			return openedStorage{}, fmt.Errorf("opening the BookKeeper WAL (--bookkeeper-zk %s): %w", cfg.BookKeeperZK, err)
		}
		undo = append(undo, d.CloseConnections)
		bkWAL = d.Provider
		logger.Info("BookKeeper WAL enabled", "zk", cfg.BookKeeperZK, "root", cfg.BookKeeperRoot)
	}
	core, err := stream.Open(ctx, cfg.coreConfig(stream.Config{Metadata: meta, ObjectWAL: wal, BookKeeperWAL: bkWAL,
		ObjectStore: objects, Lifecycle: cfg.Lifecycle.coreLifecycle(), Ownership: own, Adoption: adoptionOf(own),
		WriterID: nodeID, Logger: logger.With("component", "stream")}))
	if err != nil {
		_ = wal.Close(ctx)
		if bkWAL != nil {
			_ = bkWAL.Close(ctx)
		}
		return openedStorage{}, fmt.Errorf("opening stream core: %w", err)
	}
	if reg != nil {
		if err := reg.Register(newCoreCollector(core)); err != nil {
			logger.Warn("core metrics not registered", "err", err)
		}
		if err := reg.Register(newHealthCollector(core)); err != nil {
			logger.Warn("storage health metrics not registered", "err", err)
		}
		if err := reg.Register(newLifecycleCollector(core)); err != nil {
			logger.Warn("lifecycle metrics not registered", "err", err)
		}
		if cfg.MetricsStreamLimit > 0 {
			if err := reg.Register(newStreamCollector(core, int(cfg.MetricsStreamLimit))); err != nil {
				logger.Warn("per-stream metrics not registered", "err", err)
			}
			if err := reg.Register(newKafkaLagCollector(core, meta, nodeID, logger, int(cfg.MetricsStreamLimit))); err != nil {
				logger.Warn("Kafka consumer lag metrics not registered", "err", err)
			}
		}
	}
	closer := closerFunc(func() error {
		// The core (and with it the WAL) first: it may still write.
		errs := []error{core.Close()}
		for i := len(undo) - 1; i >= 0; i-- {
			errs = append(errs, undo[i]())
		}
		return errors.Join(errs...)
	})
	return openedStorage{Storage: core, Closer: closer, Metadata: meta, Backend: "core", Durable: true,
		ObjectStoreInfo: &objInfo, MetadataInfo: &metaInfo}, nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// adoptionOf is the core's adoption policy: the cluster node's (through
// the late binding), nil when ownership is not the cluster's.
func adoptionOf(own stream.Ownership) stream.AdoptionPolicy {
	if a, ok := own.(stream.AdoptionPolicy); ok {
		return a
	}
	return nil
}

// The Kafka front end type-asserts its Storage for stream.Views: a method
// missing here would silently turn compaction off.
var _ stream.Views = openedStorage{}
