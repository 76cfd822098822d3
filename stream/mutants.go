package stream

// plantedBug selects one deliberately wrong decision in the commit
// pipeline, for the simulator's mutation check (TestSimulationCatchesPlantedBugs):
// a simulator that cannot tell the real code from each of these mutants
// would prove nothing. It is zero (no bug) in every build; only tests in
// this package set it, and never concurrently with other tests.
var plantedBug plantedBugKind

type plantedBugKind uint8

const (
	bugNone plantedBugKind = iota
	// bugProbeErrorIsNotCommitted folds a failed offset-index probe during
	// settlement into "not committed" (the old runCommittedLocked bug): a
	// committed append is reported as fenced and its target released.
	bugProbeErrorIsNotCommitted
	// bugAckBeforeHeadCAS acknowledges an append once its WAL write is
	// durable, before the head CAS that commits it.
	bugAckBeforeHeadCAS
	// bugUnknownIsFailure fails the appends of a head CAS whose outcome is
	// unknown instead of re-reading the head.
	bugUnknownIsFailure
	// bugUnknownIsApplied acknowledges them instead.
	bugUnknownIsApplied
	// bugReleaseUnknown tells the provider an unknown CAS's runs are
	// garbage before their outcome is known.
	bugReleaseUnknown
	// bugDedupNotProjected checks producer sequences only against the
	// committed head, so a retry admitted while its original is still in
	// flight commits twice.
	bugDedupNotProjected
	// bugSyncAckBeforeIndex acknowledges OBJECT_WAL_SYNC_OBJECT appends at
	// the head CAS, before their offset-index entry is confirmed.
	bugSyncAckBeforeIndex
	// bugRecoverWithoutFence settles a predecessor's intent as "not
	// committed" without first fencing its still-current session, so a
	// commit of that session still in flight can land afterwards.
	bugRecoverWithoutFence
	// bugGCRetiresUnmaterialized judges a committed WAL run of a
	// materialized stream retired once it is committed, as if every
	// committed range were already in a generation: GC deletes segments
	// holding unmaterialized runs.
	bugGCRetiresUnmaterialized
	// bugPublishBeforeDurable publishes a generation while its object's
	// PUT is still in flight (not yet durable).
	bugPublishBeforeDurable
	// bugGCIgnoresProtections retires sources without consulting reader
	// protections (slots and durable leases): a lease holder such as a
	// materialization task loses the bytes it is reading.
	bugGCIgnoresProtections
	bugCount
)

func (b plantedBugKind) String() string {
	return [...]string{"none", "probe-error-is-not-committed", "ack-before-head-cas", "unknown-is-failure",
		"unknown-is-applied", "release-unknown", "dedup-not-projected", "sync-ack-before-index",
		"recover-without-fence", "gc-retires-unmaterialized", "publish-before-durable", "gc-ignores-protections"}[b]
}
