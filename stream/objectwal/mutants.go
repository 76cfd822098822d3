package objectwal

// PlantedBug selects one deliberately wrong decision of the provider, for
// the stream package's simulator mutation check
// (stream.TestSimulationCatchesPlantedBugs): a simulator that cannot tell
// the real provider from each of these mutants would prove nothing. It is
// BugNone in every build; only tests set it, never concurrently with other
// tests of this package.
var PlantedBug Bug

// Bug is a planted bug (PlantedBug).
type Bug uint8

const (
	BugNone Bug = iota
	// BugTruncateDeletesCommitted deletes every segment truncation drops
	// from the manifest, also those holding a run the core committed
	// (instead of retaining them for physical GC).
	BugTruncateDeletesCommitted
	// BugTruncateIgnoresOutstanding drops manifest entries whose runs the
	// core has not settled yet: a segment whose run is about to be
	// committed is deleted as garbage.
	BugTruncateIgnoresOutstanding
)
