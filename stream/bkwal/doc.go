// Package bkwal is the BookKeeper WAL provider of the stream core (profile
// BOOKKEEPER_WAL_ONLY): the performance-first primary WAL, on the Go
// BookKeeper client (package bookkeeper) and the reserved ledger-ID
// namespace (package bookkeeper/namespace).
//
// It owns physical ledgers and its ledger registry only. It must never
// decide that a run is committed (the core's head CAS does), never share a
// ledger between streams or between append sessions, never split a run
// across ledgers, never write past a tainted ledger's tail, never fence a
// ledger except to take it over, and never delete a ledger that holds a run
// the core committed or might still commit.
//
// # Ledgers
//
// A writable ledger belongs to one stream and one append session (epoch,
// token). Each run (one append batch) is a contiguous range of BookKeeper
// entries in one ledger, one BookKeeper entry per protocol entry (a Kafka
// RecordBatch covering RecordCount offsets, a Pulsar entry with RecordCount
// 1). Every entry carries a small frame naming its stream, run and place in
// the run (format.go), so a ledger read back alone yields its runs.
//
// Rollover: before a run is written, the current ledger is sealed and a new
// one created when the run's session is not the ledger's, when the ledger
// is tainted, or when the run would push it past MaxLedgerEntries,
// MaxLedgerBytes or MaxLedgerAge. A run is never split. A ledger that has
// taken no run for IdleSeal (MinRollAge for a stream with a hinted time
// retention) is sealed by a physical-GC pass once everything committed in
// it is retired (idle.go), so an idle or deleted stream's last ledger is
// reclaimed too; the seal is done by the stream's lane, so it
// never races an append. A current ledger whose first committed run is
// retired, or older than half the stream's time retention (which the core
// passes on as a hint, provider.RetentionHinter), is rolled over at its
// next run (retire.go, rollage.go), so a stream with a short retention does
// not keep everything up to the size limit. Those rolls are bounded by a
// churn floor (MinRollAge, MaxRetentionRolls per second per provider) so
// many such streams cannot flood ZooKeeper with ledger creates.
//
// Physical GC (reclaim.go) deletes a settled ledger once the core's judge
// found it retired and the grace period has passed since; the report's
// NextDue names the earliest grace end, so the core's due pass deletes it
// then (DueOnly: only those ledgers, judged again).
//
// Taint: an add that failed or whose outcome is unknown (writer broken,
// fenced), an uncertain create, an ownership change, or a completion of a
// stale session taints the ledger: nothing more is written to it, it is
// sealed at its last acknowledged entry, and the stream continues in a new
// ledger. The failed runs fail (the core then fails every later run of the
// stream and never commits them).
//
// # Registry and recovery
//
// Before a ledger is created, a ledger record (stream, session, state
// ALLOCATED) is written under the writer's identity; it becomes OPEN,
// SEALED and finally SETTLED (kept: it holds committed runs) or is deleted
// together with the ledger (nothing in it was committed). A stream pointer
// names the ledger of the stream's current session; a new session (an
// ownership change) recovery-opens the ledger it names — fencing the
// previous owner at the bookies — before writing its own.
//
// Recover (called once by the core at start-up) takes over every ledger an
// earlier incarnation with the same writer identity left unsettled:
// recovery-open (fence, recover to the last entry acknowledged by the ack
// quorum, close), read it back, hand every complete run to the core's
// settle, then keep the ledger (something committed) or delete it (nothing
// did). Runs that were not complete were never reported durable, so never
// committed.
//
// # Reads
//
// Reads open ledgers without recovery (they never fence) and read exactly
// the target's entry range. A committed run was acknowledged by the ack
// quorum, so it is readable even above the piggybacked LAC of a ledger that
// is still open; every entry's frame must name the target's run, and a
// whole-run read must match the target's range checksum.
//
// # Wiring (nereus serve --bookkeeper-zk)
//
// Dial does everything a server needs: it connects to ZooKeeper (checking
// the ledgers root's LAYOUT), builds the client, opens the deployment's
// ledger-ID namespace — reserving a random free block on the very first
// start, verifying the proof on every later one — and opens the provider:
//
//	d, err := bkwal.Dial(ctx, bkwal.DialConfig{ZK: cfg.BookKeeperZK, Root: cfg.BookKeeperRoot,
//		Meta: meta, WriterID: nodeID, Logger: logger})
//	core, err := stream.Open(ctx, stream.Config{Metadata: meta, ObjectWAL: wal,
//		BookKeeperWAL: d.Provider, WriterID: nodeID})
//	// on shutdown: core.Close() (closes the provider), then d.CloseConnections()
//
// The metadata store must be the core's (the proof, the ledger registry and
// the stream pointers live next to the heads), and WriterID the core's.
//
// # Seams
//
// Everything the provider needs of BookKeeper goes through Ledgers (the
// client and the namespace by default), and every goroutine, timer, sleep,
// clock read and random draw through Runtime (the real ones by default;
// seam.go). The stream package's deterministic simulator supplies both —
// a simulated bookie cluster and simulated goroutines — and runs the real
// provider against bookie outages, fencing and crashes from a seed.
package bkwal
