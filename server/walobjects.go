package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/objectstore/walstore"
)

// walObjectPrefix is where the Object WAL keeps its segments and
// manifests (wal/<node-id>/...).
const walObjectPrefix = "wal/"

// openWALObjectStore returns the filesystem object store with the Object
// WAL's keys where --wal-object-store says: routed to the log-structured
// walstore in <data-dir>/walstore ("log"), or left in fsstore ("files").
// Either way it first moves what the other store holds, so a data dir
// switches in both directions without losing an object. close closes
// everything it returns.
func openWALObjectStore(ctx context.Context, cfg Config, files *fsstore.Store, logger *slog.Logger, reg prometheus.Registerer) (objectstore.ObjectStore, func() error, error) {
	dir := filepath.Join(cfg.DataDir, "walstore")
	if cfg.WALObjectStore == WALObjectStoreFiles {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return files, files.Close, nil
		}
		ws, err := walstore.Open(dir, walstore.Options{Logger: logger})
		if err != nil {
			return nil, nil, fmt.Errorf("opening the WAL object store %s to move its objects back: %w", dir, err)
		}
		n, err := moveObjects(ctx, ws, files, walObjectPrefix)
		if cerr := ws.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, nil, fmt.Errorf("moving the Object WAL's objects from %s to the object store (wal-object-store files): %w", dir, err)
		}
		if n > 0 {
			logger.Info("moved the Object WAL's objects from the log store into files (wal-object-store files)", "objects", n, "from", dir)
		}
		return files, files.Close, nil
	}
	ws, err := walstore.Open(dir, walstore.Options{Logger: logger})
	if err != nil {
		return nil, nil, fmt.Errorf("opening the WAL object store %s: %w", dir, err)
	}
	n, err := moveObjects(ctx, files, ws, walObjectPrefix)
	if err != nil {
		_ = ws.Close()
		return nil, nil, fmt.Errorf("moving the Object WAL's objects into %s: %w", dir, err)
	}
	if n > 0 {
		logger.Info("moved the Object WAL's objects from files into the log store", "objects", n, "to", dir)
	}
	if reg != nil {
		if err := reg.Register(newWALStoreCollector(ws)); err != nil {
			logger.Warn("WAL log store metrics not registered", "err", err)
		}
	}
	routed := objectstore.Route(files, walObjectPrefix, ws)
	return routed, routed.Close, nil
}

// moveObjects moves every object under prefix from one store to the
// other: a durable put of its bytes, then a delete of the source at the
// version it read. A crash between the two leaves both copies, and the
// next start moves it again (the put overwrites), so nothing is lost and
// nothing is left behind. Versions change: nothing durable refers to an
// Object WAL object's version (the WAL reads its manifest's at start).
func moveObjects(ctx context.Context, from, to objectstore.ObjectStore, prefix string) (int, error) {
	var keys []string
	for info, err := range from.List(ctx, prefix) {
		if err != nil {
			return 0, err
		}
		keys = append(keys, info.Key)
	}
	for i, key := range keys {
		data, v, err := from.Get(ctx, key)
		if err != nil {
			return i, fmt.Errorf("%s: %w", key, err)
		}
		if _, err := to.Put(ctx, key, data, objectstore.PutOptions{}); err != nil {
			return i, fmt.Errorf("%s: %w", key, err)
		}
		if err := from.Delete(ctx, key, &v); err != nil && !errors.Is(err, objectstore.ErrNotFound) {
			return i, fmt.Errorf("%s: %w", key, err)
		}
	}
	return len(keys), nil
}
