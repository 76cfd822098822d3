//go:build unix

package fsstore

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// Recycled inodes.
//
// Every Put needs a temp file and every Delete (and every Put that replaces
// an object) frees an inode. On ext4 without a journal the two meet badly:
// allocating an inode scans past every inode of the block group freed in
// the last one to six minutes (find_inode_bit / recently_deleted), so under
// a steady stream of WAL segments and manifests each create costs more the
// more was deleted — 29 % of `nereus serve`'s CPU under Kafka's
// ProducerPerformance on this project's machine, all of it in that scan.
// Instead of freeing an inode that leaves the namespace, the Store moves it
// into its temp directory and the next Put writes into it: no inode is
// allocated or freed in the steady state, and an overwritten block needs no
// new block allocation (nor a discard of the old one).
//
// The protocol, and why it keeps C1–C4 and never lets a reader see a
// recycled inode's new bytes under its old name:
//
//  1. Retire (under the key's shard lock): Delete renames the object file
//     into the temp directory instead of unlinking it; a Put that replaces
//     an object first hard-links the published file into the temp
//     directory, then renames its new file over the key. Neither changes
//     what a crash can leave at the key: the key's directory entry goes
//     exactly as before (unlink vs rename-away, rename-over vs
//     link+rename-over), and the temp directory is never read.
//  2. Only once the key's directory fsync returned — the old name is gone
//     for good — is the temp name handed to the housekeeper (retired with
//     reuse=true). Before that a crash could bring the old name back, so an
//     inode whose old name is not known gone (a DeferSync Put's, a failed
//     directory fsync) is only ever freed (reuse=false). Reusing it earlier
//     could leave a published key naming bytes some later Put wrote.
//  3. Adopt (housekeeper): open the temp name read-write and take a write
//     lease (F_SETLEASE F_WRLCK), released at once: the kernel grants it
//     only if no other open file in any process refers to the inode. A
//     reader that opened the object before it was retired still holds it
//     open, so the lease fails and the inode is freed instead, after that
//     reader is done (it keeps reading the old, immutable bytes, as before).
//     Once granted, no new open can reach the inode through a public name:
//     it has none.
//  4. The one open the lease cannot see is one whose path lookup resolved
//     the old name before step 1 and completed after step 3. Every reader
//     therefore checks, after opening, that the path still names the inode
//     it opened (openVerified); if not, it opens again. A path names an
//     inode only after that inode's whole content was written and
//     fdatasynced (C1), and a reader holding it open blocks any later
//     recycling (step 3), so what a verified reader reads never changes.
//  5. Reuse (writeTemp): the object is written from offset 0, the file cut
//     to the object's length if the inode held more, then fdatasynced and
//     renamed exactly as a fresh temp file. A crash before the rename leaves
//     a temp file (removed at the next Open); after it, the published file
//     is the fully synced new object. Stale bytes past the new length never
//     survive the truncate that precedes the fdatasync, and the header's
//     length check would reject them anyway (C4).
//
// After a power cut a retired inode whose temp-directory entry was lost is
// an orphan, exactly as an inode unlinked but not yet written back would be.

// maxRecycled bounds the retired inodes kept for reuse; past it they are
// freed. The pool has to cover the gap between deletes and creates, and
// deletes come in bursts: once a generation is published, GC deletes the
// WAL segments it replaced together (at 10,000 Pulsar messages/s, ~500
// segments every ~1.6 s). With 32 kept the rest of each burst was freed and
// the creates after it paid the scan above: 12 % more server CPU, and a
// higher publish p99, than with the whole burst kept (issue-15-ops.md,
// session 18). Each kept inode holds an open descriptor, so the pool also
// stays within a sixteenth of the process's descriptor limit
// (recycleLimitFor).
const maxRecycled = 1024

// Recycling keeps disk space that a free would have returned, so it is
// bounded by size and never done when space is short: an inode larger than
// maxRecycledSize is freed (a big generation object would pin its blocks),
// the pool holds at most maxRecycledBytes, and while the file system has
// less than minFreeForRecycling available every retired inode is freed, so
// a filling disk runs exactly as without recycling (its Puts fail with
// ENOSPC instead of living off a reserve of retired inodes).
const (
	maxRecycledSize     = 4 << 20
	maxRecycledBytes    = 16 << 20
	minFreeForRecycling = 256 << 20
)

// minRecycled is the pool's size under a small descriptor limit.
const minRecycled = 32

// recycleLimitFor is the pool bound for a process allowed nofile open
// descriptors: maxRecycled, or a sixteenth of nofile when that is smaller,
// but never below minRecycled (the bound before bursts were measured).
func recycleLimitFor(nofile uint64) int {
	return int(max(minRecycled, min(maxRecycled, nofile/16)))
}

// defaultRecycleLimit is recycleLimitFor the current soft descriptor limit
// (which the Go runtime raises to the hard limit at start); minRecycled if
// it cannot be read.
func defaultRecycleLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return minRecycled
	}
	return recycleLimitFor(r.Cur)
}

// recycleLimit, when not negative, replaces defaultRecycleLimit (set only
// by tests, export_test.go: the power-cut test's "released" step needs
// inodes that are freed).
var recycleLimit = -1

// skipLeaseCheck is the recycling's mutant: set only by tests (to show that
// the test holding an old reader open sees its bytes change without the
// check). Production code never sets it.
var skipLeaseCheck bool

// retired is an inode the Store moved into its temp directory.
type retired struct {
	path  string
	reuse bool // its old name is durably gone: it may be written into
}

// retireLater hands a retired inode to the housekeeper; with the queue full
// it is freed on the spot (the old, on-path cost).
func (h *housekeeper) retireLater(path string, reuse bool) {
	if path == "" {
		return
	}
	select {
	case h.retire <- retired{path: path, reuse: reuse}:
	default:
		_ = os.Remove(path)
	}
}

// adopt puts a retired inode into the pool, or frees it when it may not or
// cannot be reused (see steps 2 and 3 above).
func (h *housekeeper) adopt(r retired) {
	h.mu.Lock()
	full := len(h.recycled) >= h.maxRecycled || h.recycledBytes >= maxRecycledBytes
	h.mu.Unlock()
	if !r.reuse || full || spaceShort(h.dir) {
		h.free1(r.path)
		return
	}
	f, err := os.OpenFile(r.path, os.O_RDWR, 0)
	if err != nil {
		h.free1(r.path)
		return
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() > maxRecycledSize || (!soleOpener(f) && !skipLeaseCheck) {
		_ = f.Close()
		h.free1(r.path)
		return
	}
	h.mu.Lock()
	h.recycled = append(h.recycled, pooledTemp{path: r.path, f: f, size: fi.Size()})
	h.recycledBytes += fi.Size()
	h.mu.Unlock()
	crashPoint("recycled")
}

// spaceShort reports whether the file system holding dir has less than
// minFreeForRecycling available (or cannot say).
func spaceShort(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return true
	}
	return st.Bavail*uint64(st.Bsize) < minFreeForRecycling
}

// free1 unlinks a retired inode that will not be reused; the inode is freed
// now or when its last reader closes it.
func (h *housekeeper) free1(path string) {
	_ = os.Remove(path)
	crashPoint("released")
}

// bestFit picks the recycled file to write an object of need bytes into:
// the smallest that holds it (its surplus is cut off), else the largest (it
// grows), so large inodes are kept for large objects. -1 when there is
// none.
func bestFit(ts []pooledTemp, need int64) int {
	best := -1
	for i, t := range ts {
		switch {
		case best < 0:
			best = i
		case t.size >= need && (ts[best].size < need || t.size < ts[best].size):
			best = i
		case t.size < need && ts[best].size < need && t.size > ts[best].size:
			best = i
		}
	}
	return best
}

// openVerified opens path for reading and checks that path still names the
// inode it opened (step 4 above), opening again if not. A missing path is
// fs.ErrNotExist, as from os.Open.
func openVerified(path string) (*os.File, error) {
	for attempt := 0; ; attempt++ {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		a, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		b, err := os.Stat(path)
		if err == nil && os.SameFile(a, b) {
			return f, nil
		}
		_ = f.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		// The name moved on between the lookup and the open (a Put or
		// Delete retired the inode): what the name holds now is the
		// answer. Each retry needs another mutation of this key to race
		// it; the bound only keeps a pathological loop finite.
		if attempt == 100 {
			return nil, errors.New("fsstore: object kept changing while being opened")
		}
	}
}
