package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/metadata/boltstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// openedStorage is the stream storage the process serves, with what /healthz
// reports about it.
type openedStorage struct {
	stream.Storage
	io.Closer
	// Backend names the implementation ("memory", "core").
	Backend string
	// Durable is false when acknowledged appends do not survive the process.
	Durable bool
}

// openStorage is the ONE place the process constructs its stream storage:
// the stream core over bbolt metadata (<data-dir>/metadata.db) and the Object
// WAL on a filesystem object store (<data-dir>/objects), both fsync'd. The
// node ID is the core's writer identity and names this node's WAL log, so a
// restarted process claims (and fences) its predecessor's log and sessions.
func openStorage(cfg Config, nodeID string, logger *slog.Logger, reg prometheus.Registerer) (openedStorage, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return openedStorage{}, err
	}
	meta, err := boltstore.Open(filepath.Join(cfg.DataDir, "metadata.db"), boltstore.Options{})
	if err != nil {
		return openedStorage{}, fmt.Errorf("opening metadata store: %w", err)
	}
	objects, err := fsstore.Open(filepath.Join(cfg.DataDir, "objects"))
	if err != nil {
		_ = meta.Close()
		return openedStorage{}, fmt.Errorf("opening object store: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wal, err := objectwal.Open(ctx, objectwal.Config{Store: objects, Prefix: "wal/" + nodeID, Logger: logger})
	if err != nil {
		_ = meta.Close()
		return openedStorage{}, err
	}
	core, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: wal, WriterID: nodeID,
		Logger: logger.With("component", "stream")})
	if err != nil {
		_ = wal.Close(ctx)
		_ = meta.Close()
		return openedStorage{}, fmt.Errorf("opening stream core: %w", err)
	}
	if reg != nil {
		if err := reg.Register(newCoreCollector(core)); err != nil {
			logger.Warn("core metrics not registered", "err", err)
		}
	}
	closer := closerFunc(func() error {
		return errors.Join(core.Close(), meta.Close())
	})
	return openedStorage{Storage: core, Closer: closer, Backend: "core", Durable: true}, nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
