package pulsar

import (
	"time"

	"github.com/nereusstream/nereus-go/internal/latency"
)

// publishStage names a stage of one SEND on its way to its SEND_RECEIPT
// (the broker-side publish latency, split so an operator can tell the
// front end's own time from the storage's).
type publishStage int

const (
	// stageAdmit: the SEND frame read → its append handed to the stream
	// (payload checks, dedup bookkeeping, entry encoding).
	stageAdmit publishStage = iota
	// stageStorage: append handed over → the producer's receipt goroutine
	// holds its outcome (the core's and WAL's time, and the wake-up).
	stageStorage
	// stageTotal: the SEND frame read → its SEND_RECEIPT queued to the
	// connection's writer (which writes it as soon as its queue is
	// drained; no timer).
	stageTotal
	numPublishStages
)

// PublishStageNames are the label values of Server.PublishStages, by index.
var PublishStageNames = [numPublishStages]string{"admit", "storage", "total"}

// PublishStages snapshots the per-stage latencies of SENDs answered with a
// SEND_RECEIPT (duplicates included; errors not), indexed like
// PublishStageNames.
func (s *Server) PublishStages() [numPublishStages]latency.Snapshot {
	var out [numPublishStages]latency.Snapshot
	for i := range s.publish {
		out[i] = s.publish[i].Snapshot()
	}
	return out
}

func (s *Server) observePublish(st publishStage, d time.Duration) { s.publish[st].Observe(d) }
