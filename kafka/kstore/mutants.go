package kstore

// PlantedBug selects one deliberately wrong decision of the Kafka storage
// boundary, for the simulator's mutation check (stream's
// TestSimulationKStoreCatchesPlantedBugs, in stream/sim_kstore_test.go): a
// simulator that cannot tell the real boundary from each of these mutants
// would prove nothing. It is BugNone in every build; only tests set it,
// never concurrently with other tests of that package.
var PlantedBug Bug

// Bug is a planted bug (PlantedBug).
type Bug uint8

const (
	BugNone Bug = iota
	// BugStableOffsetIgnoresOpen answers the high watermark as the last
	// stable offset, ignoring open transactions: a read_committed consumer
	// reads a transaction's batches before its marker.
	BugStableOffsetIgnoresOpen
	// BugAbortNotIndexed closes an aborted transaction in the index
	// without recording its aborted range: read_committed consumers
	// deliver the aborted batches (until a reload's scan finds the
	// marker).
	BugAbortNotIndexed
	// BugCheckpointPassesMarker does not hold checkpoints back for
	// markers in flight: a checkpoint written after a marker committed but
	// before its transaction was closed records the transaction open and
	// scannedTo past the marker, so every later load keeps it open (the
	// last stable offset is stuck).
	BugCheckpointPassesMarker
	// BugIndexSurvivesTakeover keeps a transaction index loaded under an
	// earlier append session of the partition: a broker that leads the
	// partition again after another led it misses what the other appended
	// and marked meanwhile.
	BugIndexSurvivesTakeover
	// BugCheckpointAfterHandover lets a broker write its delayed
	// transaction checkpoint after its session on the partition was
	// taken over (the bug the simulation found in the real code): the
	// checkpoint passes the new leader's transactional batches, which a
	// later load then never sees.
	BugCheckpointAfterHandover
	// BugIndexIgnoresForeignSession answers the read paths (last stable
	// offset, aborted transactions) from an index loaded while another
	// writer's session — the previous leader still handing over — could
	// still append, without catching up with the log (the second bug the
	// simulation found in the real code).
	BugIndexIgnoresForeignSession
	// BugOffsetsDroppedOnError treats any failure to load a topic in
	// FetchOffsets as the topic being gone (the third bug the simulation
	// found): a metadata outage answers "no committed offset".
	BugOffsetsDroppedOnError
	// BugDropsSequence appends without the producer sequence (no
	// idempotence): a producer's retry of a batch whose outcome it did not
	// know is stored twice.
	BugDropsSequence
)
