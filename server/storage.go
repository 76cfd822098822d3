package server

import (
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/streammem"
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

// openStorage is the ONE place the process constructs its stream storage.
//
// Until the durable stream core lands, it serves the in-memory streammem
// backend and says so loudly: /healthz reports "durable": false and the
// crash tests skip. The core's wiring replaces the body: open the metadata
// store (bbolt under cfg.DataDir) and the object store (filesystem under
// cfg.DataDir), then construct the core over them, registering its metrics
// in reg and closing both stores in its Closer.
func openStorage(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (openedStorage, error) {
	_ = reg
	logger.Warn("storage backend is in-memory (streammem): data is NOT durable and is lost when the process exits",
		"data_dir", cfg.DataDir)
	mem := streammem.New()
	return openedStorage{Storage: mem, Closer: mem, Backend: "memory", Durable: false}, nil
}
