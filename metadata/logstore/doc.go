// Package logstore is an embedded, durable metadata.Store that is
// log-structured: every commit is one append of checksummed records to a
// log file and one fdatasync; all live records are held in memory in a
// B-tree; recovery is the newest snapshot plus a replay of the logs after
// it; compaction writes a new snapshot off the commit path. It is what
// `nereus serve --metadata log` opens in <data-dir>/metadata.log/.
//
// Why not boltstore: a bbolt commit is two serial flushes (data pages,
// then the meta page) and rewrites every B+tree page it touched, which at
// 10,000 streams is most of the head leaf pages every round. Here a commit
// writes only the records it changed, once.
//
// It owns the directory's byte layout, version issuing and the order of
// commits and change events. It must never acknowledge a write before the
// append holding it has been flushed, never issue a version or session
// epoch twice (not across restarts either), never serve state a frame whose
// checksum failed would have changed (Open fails with ErrCorrupt), and never
// delete a log before a snapshot covering it is durable and reads back.
//
// # Write path (group commit)
//
// As boltstore's: every mutating call (and a session's purge) is a request
// on one queue; one committer goroutine takes every queued request (up to
// Options.MaxBatchOps, a Batch never split), evaluates each op against the
// working tree as left by the ops before it (a failed precondition is a
// result, siblings are unaffected), encodes every change as a record into
// ONE frame, writes the frame with one pwrite and flushes it with one
// fdatasync. (A commit over 64 MiB of records is split into several frames,
// still one pwrite and one fdatasync; a crash mid-write may then keep a
// prefix of its frames — an unacknowledged commit has an unknown outcome
// per op, and the store promises no atomicity across keys.) Only then does it publish the new tree to readers, publish the
// watch events and answer the callers. A round that changed nothing on
// disk (every precondition failed, or only ephemerals were deleted) writes
// and flushes nothing.
//
// If a write or flush fails, the outcome of that commit is unknown (the
// bytes may be on disk) and the file's tail can no longer be trusted: every
// caller of that round and of every later one gets an error wrapping
// metadata.ErrUnavailable; reopening the store resolves what survived.
//
// Reads (Get, RangeScan, an all-Get Batch) load the last published tree —
// an immutable copy-on-write clone of the working tree (github.com/google/
// btree) — and never wait for the committer. A reader never sees a write
// before it is durable.
//
// # Files
//
//	LOCK                 flock'd by the open store (one process at a time)
//	snap-<gen 16 hex>    the state of every log below gen
//	log-<gen 16 hex>     commits, in order; gen counts up from 1
//	*.tmp                a snapshot never renamed into place (deleted at open)
//
// # Byte layout (format 1)
//
// All integers are big-endian; crc32c is CRC-32 with the Castagnoli
// polynomial.
//
//	file header (24 bytes, logs and snapshots):
//	  8  magic "NRSMLOG1" (log) or "NRSMSNP1" (snapshot)
//	  u32 format (=1)
//	  u64 generation (= the number in the file name)
//	  u32 crc32c(the 20 bytes before)
//	frame (one per commit; a snapshot is one frame):
//	  u32 payload length (1 .. 2^30)
//	  u64 sequence (1, 2, ... within one file)
//	  u32 crc32c(payload)
//	  u32 crc32c(the 16 bytes before)
//	  payload: records, back to back
//	record:
//	  u8  kind: 1 put, 2 delete, 3 session epoch, 4 version counter
//	  u64 version (put: the record's version > 0; delete: 0, or the version
//	      an ephemeral put issued; epoch: the epoch > 0; counter: the last
//	      issued version)
//	  u32 key length, u32 value length (only puts have values; epoch and
//	      counter records have neither)
//	  key bytes, value bytes
//
// A log is preallocated: the writer keeps a chunk (Options.PreallocBytes)
// of synced zeros ahead of itself, so a commit's fdatasync writes data
// blocks only, never the file size (logfile.go says what that saves). The
// end of a log is the first frame header that is all zeros.
//
// A snapshot is one frame holding an epoch record, a counter record and a
// put record for every persistent key, in key order.
//
// Ephemeral records are not logged as values: none survives a restart.
// An ephemeral put is logged as a delete of its key carrying the version it
// issued (so the key is absent after a restart, as it must be, and the
// version is never issued again); deleting an ephemeral logs nothing.
// Session IDs are epoch<<32 | n, as boltstore's; the epoch is a record.
//
// # Crash-safety invariants
//
//  1. A write is acknowledged only after the fdatasync of the frame holding
//     it returned. An acknowledged write survives kill -9 and power loss;
//     one that returned an error wrapping ErrUnavailable may or may not
//     have.
//  2. Only the newest log can hold a commit that was never acknowledged,
//     and only as its last frame(s) (one committer, one append in flight).
//     Open reads frames until the first one that fails its checks. If the
//     rest of the file is zeros, that is the end; if it is not and no
//     intact frame with a higher sequence starts anywhere after it, it is
//     the torn tail of that unacknowledged commit: the file is truncated
//     there and synced before anything else happens. A newest log whose
//     header is zeros or damaged with only zeros after it was being created
//     when the process died (no frame is written before its header is
//     synced): it is removed and made again. Anything else — an
//     intact frame after a damaged one, damage in an older log or in a
//     snapshot, a missing log generation, a sequence gap — fails Open with
//     ErrCorrupt: nothing is served.
//  3. Open never appends to an old log: it creates log max+1 (header and
//     zeros synced, then the directory), writes the new session epoch
//     (largest seen + 1) as its first frame and flushes it before any
//     session exists. Versions continue from the largest version in the
//     snapshot counter and every replayed record, ephemeral deletes
//     included. So neither is ever issued twice.
//  4. Compaction, once the logs are CompactRatio times the live size and at
//     least CompactMinBytes: a goroutine creates log G+1 durably; the
//     committer switches to it between two commits and hands over the
//     published tree, counter and epoch, which are exactly the state of
//     the logs below G+1; the goroutine writes snap-G+1.tmp, fdatasyncs,
//     renames it, fsyncs the directory, reads it back and checks it, and
//     only then deletes the logs and snapshots below G+1. A crash at any
//     step leaves either the old snapshot and all its logs or the new
//     snapshot (Open ignores and removes logs below the newest snapshot).
//  5. The store directory's own entry is fsync'd in its parent at every
//     open, and every file creation or rename is followed by a directory
//     fsync before it is relied on.
//
// # Format migration
//
// Open refuses a file whose format it does not know. A future format N
// must read format N-1; since Open always starts a new log and compaction
// rewrites the snapshot, a store moves to format N by writing only new
// files in it (and a snapshot in N retires the old logs).
package logstore
