package bkwal

// PlantedBug selects one deliberately wrong decision of the provider, for
// the stream package's simulator mutation check
// (stream.TestSimulationCatchesPlantedBugs, on the simulated BookKeeper of
// stream/sim_bookkeeper_test.go): a simulator that cannot tell the real
// provider from each of these mutants would prove nothing. It is BugNone in
// every build; only tests set it, never concurrently with other tests of
// this package.
var PlantedBug Bug

// Bug is a planted bug (PlantedBug).
type Bug uint8

const (
	BugNone Bug = iota
	// BugAckBeforeQuorum reports a run durable once its entries were sent,
	// without waiting for their adds to reach the ack quorum.
	BugAckBeforeQuorum
	// BugRecoverWithoutFence takes over an earlier incarnation's ledger
	// with a plain open instead of a recovery-open: no fence, no tail
	// recovery, runs read only up to the piggybacked LAC.
	BugRecoverWithoutFence
	// BugFinalizeBeforeRelease settles a sealed ledger before the core
	// released every run written to it: a ledger whose run is about to be
	// committed is deleted as holding nothing committed.
	BugFinalizeBeforeRelease
)
