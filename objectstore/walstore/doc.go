// Package walstore is a log-structured objectstore.ObjectStore for small,
// short-lived objects on a local disk: the Object WAL's segments and
// manifests. Every object is one record appended to a preallocated log
// file; one group fdatasync makes every record written since the last one
// durable; an in-memory B-tree maps each key to its record, read back with
// pread and checked against its checksums. `nereus serve` on the
// filesystem object store routes the keys under "wal/" to it
// (<data-dir>/walstore/) and every other key to fsstore.
//
// Why not fsstore for these: an Object WAL commit writes a segment and a
// manifest, and fsstore publishes each object with a temporary file, an
// fdatasync, a rename and a directory fsync — half of the commit's time and
// most of its CPU is that file-system work (bench/flushmodel). Here a
// commit is two appends and one fdatasync: the segment is written with
// PutOptions.DeferSync and returns once written, and the manifest's
// fdatasync covers it because the log is ordered.
//
// It owns its directory's byte layout, the index, version issuing and the
// order of records. It must never acknowledge a write before the flush
// covering it, never serve bytes that fail their checksum, never hand out
// a version twice for a key, never bring back an object that was deleted
// or overwritten, and never delete a file while an older file could
// resurrect what it cancels. It is for one process: an exclusive flock on
// the directory (fsstore lets other processes read; this store does not).
//
// # Write path
//
// A mutation holds the store's write mutex from its precondition check
// (PutCreate, PutUpdate's version, a conditional Delete) through its
// record's pwrite to its index update, so a check can never be overtaken
// and records are written in sequence order. The object is visible from
// the index update on (as fsstore's is after its rename); the call then
// waits for the flusher unless it is a DeferSync Put. The flusher has no
// timer: it fdatasyncs the active file as soon as a waiter needs something
// written that is not durable, so one flush covers every record written
// while the previous one ran. A failed fdatasync is sticky: every later
// call fails until the store is reopened (after a failed fsync the kernel
// may have dropped the dirty pages of records already written). A failed
// write is not (a full disk: the file had to grow): it sequenced nothing,
// its partial record is cut off, and the next write takes its place once
// there is room.
//
// Versions are the record's sequence number (one counter for the store,
// in hex); a copy forward keeps the version it copies.
//
// # Files
//
//	LOCK                  flock'd by the open store
//	<num 16 hex>.log      records, in sequence order; num counts up from 1
//
// A file is sealed when the next record does not fit (Options.FileBytes,
// 32 MiB) or, once 1 MiB was written to it, when it is older than
// Options.SealAfter (1 s) — so that at a low write rate files stay small
// and the store's bytes follow its live bytes. It is fdatasync'd before
// the next one is created, so only the newest file can hold a record that
// is not durable, and then cut to its last record. Each file is
// zero-filled ahead of the writer (internal/filesync), so a flush writes
// data blocks only.
//
// # Byte layout (format 1)
//
// Integers are big-endian; crc32c is CRC-32 with the Castagnoli polynomial.
//
//	file header (32 bytes):
//	  8   magic "NRWSLOG1"
//	  u32 format (=1)
//	  u64 file number (= the name)
//	  u64 first sequence number (the first record's)
//	  u32 crc32c(the 28 bytes before)
//	record:
//	  u32 length of the whole record
//	  u8  kind: 1 put, 2 tombstone
//	  u8  0
//	  u16 key length
//	  u64 sequence number (one more than the record before it)
//	  u64 synced: every record up to this sequence number was durable
//	      when this one was written
//	  u64 version (put; 0 for a tombstone)
//	  i64 modification time, Unix nanoseconds
//	  u64 value length (≤ 1 GiB)
//	  u32 crc32c(the 48 bytes before, then the key and checksum table)
//	  key bytes
//	  u32 crc32c of each 16 KiB block of the value (the last may be short)
//	  value bytes
//
// The end of a file is the first position that does not hold an intact
// record with the next sequence number.
//
// # Crash-safety invariants
//
//  1. A Put or Delete returns nil only after the fdatasync of the file
//     holding its record returned (a DeferSync Put: once a later Put that
//     waited returned, since that flush covered every earlier record).
//  2. Recovery reads every file, oldest first, and checks every record
//     header (and, in the newest file, every value block). In the newest
//     file the first record that fails is the torn tail of writes never
//     acknowledged, unless an intact record after it claims (synced) it was
//     already durable. A damaged header that is not the torn tail — in any
//     file —, a missing file or a sequence gap fails Open with ErrCorrupt:
//     nothing is served. A damaged value that is not the torn tail keeps its
//     object, and every read of it fails with ErrCorrupt. The torn tail is
//     truncated away and synced before anything else happens, and Open
//     always starts a new file.
//  3. Sequence numbers continue from the last intact record. A number
//     only a torn record carried was never acknowledged except to a
//     DeferSync Put of the process that died, so issuing it again is safe.
//  4. A file is deleted only when it is the oldest, holds no live object,
//     and every record written before the deletion is durable; its
//     deletion is made durable before the next file may go. Copies forward
//     keep their object's version and are durable before their source goes.
//
// # Format migration
//
// Open refuses a file format it does not know. Open always starts a new
// file, and old files go as their objects die or are copied forward, so a
// store moves to a new format by writing only new files in it.
package walstore
