// Package boltstore is the embedded, durable metadata.Store: one bbolt file,
// one writer goroutine that group-commits concurrent writes, MVCC readers,
// in-process sessions and watches. It is the single-node default under
// `nereus serve`.
//
// It owns the file's byte layout, version issuing, and the ordering of
// commits and change events. It must never acknowledge a write before the
// transaction holding it has been committed and synced, never reuse a
// version, and never serve a record whose checksum does not match (such a
// read fails with ErrCorrupt).
//
// # Write path (group commit)
//
// Every mutating call (Put, PutEphemeral, Delete, a Batch with a write, a
// session's purge) becomes a request on one queue. A single committer
// goroutine takes every queued request (optionally waiting up to
// Options.MaxBatchDelay, counted from the oldest one; by default it does not
// wait, because writes that arrive during one commit already form the next
// one and the disk never idles), applies them, request by request and op by
// op, in ONE bbolt read-write transaction and commits it (bbolt syncs the
// data pages, then the meta page). Only then are watch events published and
// callers answered. A
// Batch call is never split: 10,000 ops in one call are one transaction and
// one commit, whatever MaxBatchOps says (that option only stops coalescing
// further requests into a transaction).
//
// Each op's precondition is evaluated against the state left by the ops
// before it in the same transaction, and a failed precondition is a result,
// never a transaction error: siblings are unaffected. The transaction only
// fails as a whole when bbolt itself fails (I/O); then every caller in it
// gets an error wrapping metadata.ErrUnavailable (outcome unknown: resolve
// by re-reading).
//
// bbolt's own DB.Batch is deliberately not used. It may call a function
// more than once (after a sibling fails it re-runs the rest and the failing
// one alone), which would force every result to be captured idempotently and
// every conditional failure to be smuggled out of band; it counts functions,
// not ops; and its concurrent commit goroutines would make watch ordering a
// separate problem. One committer goroutine makes all three structurally
// impossible: db.Update calls the transaction function exactly once, and
// the function still resets its captured results first so that invariant
// does not depend on bbolt's internals.
//
// Reads (Get, RangeScan, an all-Get Batch) run in bbolt read transactions
// and are never blocked by a write transaction in progress (bbolt readers
// see the last committed state). A reader can briefly wait while bbolt
// grows its memory map; Options.InitialMmapSize makes that rare.
//
// # Byte layout (format 1)
//
// All integers are big-endian. crc32c is CRC-32 with the Castagnoli
// polynomial.
//
//	bucket "meta"
//	  "format"   → u32 format (=1)                     ++ u32 crc32c(previous 4 bytes)
//	  "version"  → u64 last issued record version      ++ u32 crc32c(previous 8 bytes)
//	  "sessions" → u64 last session epoch              ++ u32 crc32c(previous 8 bytes)
//	bucket "kv"
//	  user key   → u8 record format (=1)
//	               u64 version (> 0)
//	               u64 session (0: persistent; else the ephemeral's session ID)
//	               u32 crc32c(format ++ version ++ session ++ value)
//	               value bytes
//	bucket "ephemeral"
//	  u64 session ++ user key → empty (index of ephemeral records by session)
//
// Session IDs are epoch<<32 | n: epoch is meta "sessions", incremented at
// every open; n counts sessions within one open. So a session ID is never
// reused, not even across restarts.
//
// # Crash-safety invariants
//
//  1. All record, index and counter changes of one commit are in one bbolt
//     transaction. bbolt writes data pages, syncs, then writes and syncs the
//     alternate meta page; after a crash the file holds exactly a prefix of
//     the committed transactions.
//  2. meta "version" >= every version in "kv", because it is written in the
//     same transaction as the records it numbered. Versions increase across
//     restarts and are never reused (not even for a deleted and recreated
//     key).
//  3. A "kv" record has session != 0 if and only if "ephemeral" holds
//     (session, key). Every put and delete maintains both in one
//     transaction.
//  4. Sessions live only in the process that opened the store. Open deletes
//     every ephemeral record (through the index) in one transaction before
//     the store serves anything: after a restart no ephemeral survives.
//  5. A write is acknowledged only after the commit that holds it returned.
//     An acknowledged write survives a crash (kill -9); one that returned an
//     error wrapping ErrUnavailable may or may not have.
//
// # Format migration
//
// A store refuses to open a file whose "format" it does not know. A future
// format N must read format N-1 and ratchet the file forward in one
// transaction at open (rewrite "format" last); record formats are per record,
// so records may be migrated lazily as they are rewritten.
package boltstore
