// Package stream is the Nereus stream core: the one logical truth beneath
// every protocol path. It owns stream identity (name -> ID), the committed
// head of each stream and its version-CAS in the metadata store (the only
// commit point), append sessions and fencing, the commit pipeline, the offset
// and time indexes, reads, trim, seal, delete and retention.
//
// It speaks stream IDs and offsets only. It must never know about Kafka
// partitions, Pulsar ledgers or BookKeeper ledger IDs as coordinates, never
// import a protocol adapter, and never treat a WAL write, PUT or delete that
// returned OK as a commit: nothing is visible until its head CAS applied.
//
// # Records
//
// The metadata records, each single-key and checksummed (records.go has the
// byte layouts; lifecycle records — generation index, retire journal,
// reader leases, deletion queue — are described in generations.go,
// gc.go and protect.go):
//
//   - the name record (create-only) is the atomic creation point and
//     carries the immutable creation spec; the head is derived from it;
//   - the head is the commit point: bounds [Start, End), session
//     (epoch, token, writer, expiry), the producer-deduplication table, and
//     Pending — the descriptors of committed runs whose offset-index entries
//     are not yet confirmed;
//   - offset-index entries, one per committed run, keyed by the run's end
//     offset.
//
// Invariant: every committed, untrimmed run is in the head's Pending list,
// in the offset index, or — once a published generation serves its range
// (below head.GenThrough) — in that generation's lineage (a run leaves
// Pending only in a CAS issued after its index entry was confirmed; GC
// retires an index entry only below max(Start, GenThrough)). Reads locate
// data through exactly these places, so they can only ever see committed
// data, and an unknown commit outcome is settled by looking for the run's
// identity (epoch, token, commit number) there.
//
// # The append path
//
//  1. Admission (commitMachine.admit): under the stream's lock, validate the session,
//     the expected offset and the producer sequence against the projected
//     state, assign offsets, and hand the run to the WAL provider. Offsets
//     are assigned before durability so the next run's WAL write overlaps
//     this one's commit.
//  2. WAL write: the provider makes the run durable and records it as an
//     intent (for the Object WAL, a RecordMeta in the wal manifest; one
//     segment carries the runs of many streams).
//  3. Head CAS (committer.go): one commit round at a time per commit shard
//     (Config.CommitShards; a stream always uses the same shard). Each round
//     builds, for every stream of the shard with durable runs, the next head
//     (runs appended to Pending, End advanced, dedup table updated) and sends
//     all those heads in ONE metadata Batch. Ops are independent: a
//     conflict or an unknown outcome for one stream never holds back the
//     others.
//  4. Settling: applied -> the appends are committed (acknowledged for
//     *_ASYNC_OBJECT); conflict/unknown -> the owner re-reads the head
//     before anything else and decides from the proof above; a head whose
//     session is no longer ours fences the owner (ErrFenced, not committed).
//  5. Index publication: the next round puts the runs' index entries; for
//     OBJECT_WAL_SYNC_OBJECT the append is acknowledged only then. A later
//     head CAS drops confirmed runs from Pending.
//
// A WAL failure fails that run and every later run of the same stream (their
// offsets were projected past it); they were never CASed, so they are
// definitely not committed, and the provider is told to reclaim them.
//
// # Decisions and I/O
//
// Every commit decision of an owned stream is made by a commitMachine
// (commit_machine.go), a pure state machine in the shape of etcd raft's
// RawNode: events in (append admitted, WAL write done, metadata results,
// index probe results, failures, the current time), effects out
// (commitReady: WAL writes, tail-cache inserts, releases, resolutions with
// their commit certainty, probes, timers). owner.go and committer.go are
// its driver: they feed events under one lock per stream and execute
// effects outside it, through a runtime (runtime.go) that the
// deterministic simulator (simulation_test.go) replaces. A provider's
// completion callback never executes a WAL write itself (owner.go,
// flushFromProviderLocked): the provider's Write may block on capacity only
// that callback's goroutine frees.
//
// # Sessions and recovery
//
// The session lives in the head, so the commit CAS validates it for free.
// Acquiring bumps the epoch by CAS, which fences the previous writer. A
// process restarting with the same WriterID takes over its predecessor's
// sessions at once; before serving, Open asks each provider for the intents
// earlier incarnations left and settles each one (fencing the old session
// first if it is still current, so "not committed" is final).
package stream
