package managedledger

// PlantedBug selects one deliberately wrong decision of the facade, for the
// simulator's mutation check (stream's TestSimulationManagedLedger
// CatchesPlantedBugs, in stream/sim_managedledger_test.go): a simulator
// that cannot tell the real facade from each of these mutants would prove
// nothing. It is BugNone in every build; only tests set it, never
// concurrently with other tests of that package.
var PlantedBug Bug

// Bug is a planted bug (PlantedBug).
type Bug uint8

const (
	BugNone Bug = iota
	// BugCursorAheadOfAck persists a cursor's mark-delete position across
	// its first gap (as if the unacknowledged offsets before the first
	// individually acknowledged range were acknowledged): after a crash or
	// takeover they are never redelivered.
	BugCursorAheadOfAck
	// BugMergeDropsLocal resolves a conflicting or unknown cursor write by
	// adopting the stored state instead of merging: the acknowledgements
	// not yet stored are dropped, and the retried write reports them
	// persisted.
	BugMergeDropsLocal
	// BugPositionOffByOne maps a position of the topic's own ledger to the
	// offset after it: a client's position reads back another entry.
	BugPositionOffByOne
	// BugDropsSequence appends without the producer sequence (no
	// deduplication): a producer's retry of a publish whose outcome it
	// did not know is stored twice.
	BugDropsSequence
)
