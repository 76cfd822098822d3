package stream

import (
	"log/slog"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// commitReady is the batch of effects a commitMachine produced since the
// driver last took them (etcd raft's Ready). The driver executes them
// outside any lock, in this order, before it takes the next batch of the
// same machine:
//
//  1. logs — diagnostics only;
//  2. writes — submit each run to the stream's WAL provider, in slice
//     order (offset order), reporting completion back with walDone;
//  3. committedRuns — add to the tail cache, in slice order (commit order);
//  4. headChanged — wake readers of the stream (its change channel was
//     already replaced under the lock) and local watchers;
//  5. releases — tell the provider the core settled these targets;
//  6. resolves and mutDone — settle callers' futures and mutations;
//  7. probe — run the index scan and report it back with probeResult;
//  8. kick — the machine has metadata work for the next commit round;
//     wakeAtMs — call back (kick) no later than this time;
//  9. drop — the machine is finished (fenced, deleted): forget it.
//
// Writes are ordered before everything else because WAL submission order
// is the stream's offset order; resolves come after releases and tail
// updates so that a caller woken by its future finds the core's state
// already consistent with the outcome it was told.
type commitReady struct {
	logs          []logLine
	writes        []*appendOp
	committedRuns []provider.Run
	headChanged   bool
	releases      []release
	resolves      []resolution
	mutDone       []*mutationOp
	probe         *indexProbe
	kick          bool
	materialize   bool  // appends wait for a generation: urge the materializer
	wakeAtMs      int64 // 0: no timer wanted
	drop          bool
	counters      machineCounters
}

func (r *commitReady) empty() bool {
	return len(r.logs) == 0 && len(r.writes) == 0 && len(r.committedRuns) == 0 && !r.headChanged &&
		len(r.releases) == 0 && len(r.resolves) == 0 && len(r.mutDone) == 0 && r.probe == nil &&
		!r.kick && !r.materialize && r.wakeAtMs == 0 && !r.drop && r.counters == (machineCounters{})
}

// reset clears r for reuse, dropping references so nothing is retained.
//
// Only what was used is written: a batch usually carries two or three kinds
// of effects, and rewriting every (pointer-bearing) field each time cost a
// write barrier per field whenever the Go GC was marking.
func (r *commitReady) reset() {
	truncate(&r.logs)
	truncate(&r.writes)
	truncate(&r.committedRuns)
	truncate(&r.releases)
	truncate(&r.resolves)
	truncate(&r.mutDone)
	if r.probe != nil {
		r.probe = nil
	}
	r.headChanged, r.kick, r.materialize, r.drop = false, false, false, false
	r.wakeAtMs = 0
	r.counters = machineCounters{}
}

// truncate empties *s for reuse, clearing its elements so nothing is
// retained; it writes *s only when there was something to clear (see reset).
func truncate[T any](s *[]T) {
	if len(*s) > 0 {
		clear(*s)
		*s = (*s)[:0]
	}
}

// logLine is a diagnostic the driver forwards to the logger.
type logLine struct {
	level slog.Level
	msg   string
	args  []any
}

// release settles a successfully written WAL target with the provider.
type release struct {
	target    provider.Target
	committed bool
}

// resolution settles one append's future. The certainty of the outcome is
// carried by err (see CommitCertainty): nil is committed, an error matching
// ErrCommitUnknown is maybe-committed, any other error is not committed.
type resolution struct {
	future *AppendFuture
	result AppendResult
	err    error
	// walDoneNs: when the append's WAL write completed, unix nanos (a
	// committed append's commit stage is measured from it); 0 for others.
	walDoneNs int64
}

// indexProbe asks the driver to scan the offset index for the first entry
// in [min, max) (limit 1) and report the records, or the error, back with
// probeResult. It is the proof a fenced owner needs to settle its last
// unknown commit when the run is no longer in the head's Pending list.
type indexProbe struct {
	min, max string
}

// machineCounters are metric increments the driver adds to Metrics.
type machineCounters struct {
	admitted, committed, failed, duplicates int64
	bytesCommitted                          int64
	conflicts, unknowns, fenced             int64
}
