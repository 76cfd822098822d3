package stream

import "time"

// appendStage names a stage of one committed append inside the core.
type appendStage int

const (
	// stageWAL: the run handed to the WAL provider → the provider said it
	// is durable.
	stageWAL appendStage = iota
	// stageCommit: WAL durable → the future resolved after the head CAS
	// that commits it (waiting for the stream's commit round included).
	stageCommit
	numAppendStages
)

// AppendStageNames are the label values of Stats.AppendStages, by index.
var AppendStageNames = [numAppendStages]string{"wal", "commit"}

func (m *Metrics) observeStage(s appendStage, d time.Duration) { m.stages[s].Observe(d) }
