// Package fsstore is the embedded default objectstore.ObjectStore: objects
// are files under a local directory. It owns the on-disk layout, the object
// file format (see format.go), crash-safe publication, and conditional
// writes that are atomic across goroutines and across processes sharing the
// directory. It must never serve bytes that fail their checksum, never let a
// partially written object become visible, and never hand out a version
// twice for a key.
//
// # Layout
//
//	<root>/objects/  one file per object; key "a/b/c" is objects/a.d/b.d/c.o
//	<root>/meta/     store-id (random identity), versions (counter high-water mark)
//	<root>/locks/    64 lock files; a key's mutations flock the one it hashes to
//	<root>/tmp/      per-open-Store temp directories (<id>/) and their locks (<id>.lock)
//
// Keys must be non-empty UTF-8 of at most 1024 bytes, without a leading
// slash, empty segments, "." or ".." segments, NUL, or a segment longer than
// 253 bytes; anything else is rejected with objectstore.ErrInvalidArgument
// before any I/O. The ".d"/".o" suffixes let an object "a" and objects under
// "a/" coexist, as in S3, and keep every key from naming a path outside
// objects/.
//
// # Crash safety
//
// Invariant C1: after a crash, every key holds either nothing or one
// complete object that some Put wrote, never a mix or a prefix. A Put writes
// header, checksum table and data to a fresh temp file and fdatasyncs it
// before renaming it over the key's path; rename(2) replaces the directory
// entry atomically, so the path names either the old inode or the new,
// fully synced one.
//
// Invariant C2: once Put or Delete returns nil, its effect survives a crash.
// After the rename (or unlink) the containing directory is fsynced — or,
// when a concurrent Delete pruned it as empty, its nearest existing
// ancestor, which makes that removal durable (syncDirOrPruned) — and
// every directory on the key's path was made durable in its parent before
// the object was published into it (a directory found already existing is
// treated as durable only after this Store synced its parent once). A
// directory a concurrent Delete prunes while a Put makes or publishes into
// it is made again, and the publication retried, before anything of that
// Put is visible.
// A Put with objectstore.PutOptions.DeferSync skips its own directory
// fsync and is durable once a later plain Put on this Store returns nil:
// every plain Put fsyncs the directories of the DeferSync Puts before it
// (overlapped with its own temp-file write) and renames only after they
// succeeded, so an object published by a plain Put can never name a
// DeferSync object that a crash could lose (deferred.go has the argument).
//
// Invariant C3: temp files are never visible. They live under tmp/, which
// List and Get never read. Each open Store owns tmp/<id>/ and holds an
// exclusive flock on tmp/<id>.lock; Open removes the temp directories whose
// lock nobody holds (their writer died), and never those of live processes
// — except a temp file that names the inode of a published file while the
// inode's link count does not cover both names (after a power cut on ext4
// without a journal, until fsck has run): unlinking it would free the
// published file, so it is kept (tmp.go).
// A background goroutine per Store keeps a few empty temp files created
// ahead of time there, so a Put's temp-file create (an inode allocation,
// expensive on some file systems) is off its path. An inode a Delete or a
// replacing Put takes out of the namespace is moved into the temp
// directory instead of freed and, once its removal is durable and nobody
// else has it open, the next Put is written into it (recycle.go), so in
// the steady state no inode is allocated or freed at all; inodes that are
// freed are closed by the goroutine, off the caller's path. None of this is
// a step C1 or C2 rests on (tmppool.go and recycle.go have the argument;
// the crash-point power-cut test kills a writer at every step, these
// included).
//
// Readers open an object file, then check that its path still names the
// inode they opened (an open racing a retirement reopens), so a reader
// never reads a recycled inode under its old name.
//
// Invariant C4: corrupt bytes are an error, never data. The header, the
// per-16-KiB-block CRC32C table and each data block are checksummed; the
// file length must match the header. Get verifies everything, GetRange the
// blocks it reads, Head and List the header. A mismatch returns an error
// wrapping objectstore.ErrCorrupt (distinct from ErrNotFound). The one
// exception is ReadRange (and ReadRangePieces, the same read in pieces
// through one open) with CallerVerifies: its caller has promised to
// check every byte against checksums of its own before using it (a
// generation object's entry and block CRCs), so only the header is checked
// here and each byte is still checked exactly once.
//
// # Conditional writes
//
// Invariant W1 (atomic check+publish): every mutation of a key (Put in all
// modes, Delete) checks its precondition against the published file and
// publishes (rename or unlink, then directory fsync) while holding the key's
// shard lock: an in-process semaphore plus an exclusive flock(2) on a lock
// file that is never deleted, so every goroutine and every process locks the
// same thing. No other writer of that key can act between check and publish,
// which makes PutCreate, PutUpdate and conditional Delete linearizable.
// Writing and syncing the temp file happens before the lock is taken, so
// writers of different keys (and the expensive part of writers of one key)
// run in parallel.
//
// Invariant W2 (versions never repeat): a version is the store id plus a
// generation drawn from one store-wide counter. A Store reserves blocks of
// generations by advancing a high-water mark in meta/versions under flock
// and fdatasyncing it before using any generation of the block, so no two
// processes, and no process after a crash, ever use the same generation.
// Versions are never derived from content: rewriting identical bytes, or
// deleting and recreating a key, always produces a version that never
// existed before, so a CAS against an old version fails (no ABA).
//
// # Outcomes
//
// Sentinel errors mean nothing was published. Failures while writing the
// temp file or taking the lock, and context cancellation, are also before
// publication but are returned as plain errors, so callers conservatively
// treat them as unknown (objectstore.Classify). A failed directory fsync
// after the rename or unlink is a genuinely unknown outcome: the change is
// visible but may not be durable.
//
// # Limits
//
// flock(2) semantics are required, so the directory must be on a local
// filesystem (not NFS). Processes sharing a directory must run on one host.
// The residual risk of the directory-durability cache (a directory removed
// and recreated by another process reusing the same inode number, then a
// crash before that process synced it) is accepted.
package fsstore
