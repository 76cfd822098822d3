//go:build unix

package fsstore

import (
	"fmt"
	"sync"
)

// Deferred directory syncs (objectstore.PutOptions.DeferSync).
//
// A Put with DeferSync does everything a Put does — temp file written and
// fdatasynced, renamed over the key's path under the shard lock — except
// the directory fsync that makes the new name durable: it records the
// directory as pending instead and returns. Every Put without DeferSync
// fsyncs all directories pending when it began, concurrently with writing
// its own temp file, and renames only after they all succeeded. So the
// directory fsync of a WAL segment overlaps the manifest commit's temp-file
// write instead of preceding it, and segments sealed into one commit share
// one directory fsync.
//
// Why a reference can never outlive what it references (the ordering
// argument): let D be a DeferSync Put that returned before a plain Put M
// began. D's rename happened before D recorded its directory and returned;
// M snapshots the pending set after that, fsyncs every directory in it and
// only then renames. So when M's rename can reach the disk at all, D's
// directory entry (and, by D's fdatasync before its own rename, D's data
// and length) already has. A power cut at each point leaves:
//   - before D's rename, or after it but before M's directory syncs
//     finished: D's object may be gone (or the previous version stays), M
//     is not applied (nothing renamed): nobody was told D is durable and no
//     durable object names it;
//   - after M's directory syncs, before M's rename or before M's own
//     directory fsync: D is durable; M is either the old or the new object
//     (C1) and M's caller got no nil, so M's outcome is unknown, as for any
//     interrupted Put;
//   - after M returned nil: both durable (C2 for M, and D by the above).
//
// A sync that fails leaves its directories pending and fails M before its
// rename (not applied). It also sticks: after a failed fsync the kernel may
// have dropped the dirty state it failed to write, so a retry that
// "succeeds" proves nothing; every later Put fails until the store is
// reopened (a disk WAL stops on a write error the same way).
//
// Why not one fsync covering the segment's rename and the manifest's: the
// two are in different directories (<prefix>/seg/<run>/ and <prefix>/), and
// even in one directory the kernel may write the block holding the
// manifest's new entry back before the block holding the segment's, so a cut
// between the renames and the shared fsync could leave a durable manifest
// naming a lost segment. The reference's rename must follow the referenced
// name's fsync; this file keeps that order and only moves the fsync earlier
// in time relative to the rest of the commit.
type deferredDirs struct {
	root    string // objects/: a pruned directory's removal is synced in its nearest existing ancestor
	mu      sync.Mutex
	pending map[string]uint64 // directory -> deferred renames into it so far
	err     error             // sticky: a pending directory's fsync failed
}

// add records that a DeferSync Put renamed into dir.
func (d *deferredDirs) add(dir string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	if d.pending == nil {
		d.pending = make(map[string]uint64)
	}
	d.pending[dir]++
	return nil
}

// check returns the sticky error, if any.
func (d *deferredDirs) check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// snapshot returns the directories pending now with their rename counts,
// or nil when there are none.
func (d *deferredDirs) snapshot() (map[string]uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil || len(d.pending) == 0 {
		return nil, d.err
	}
	snap := make(map[string]uint64, len(d.pending))
	for dir, n := range d.pending {
		snap[dir] = n
	}
	return snap, nil
}

// syncSnapshot fsyncs every directory of snap (in parallel when there are
// several) and clears those no deferred Put renamed into since.
func (d *deferredDirs) syncSnapshot(snap map[string]uint64) error {
	if syncMutant == mutantSkipDeferredSync {
		return nil
	}
	errs := make(chan error, len(snap))
	for dir := range snap {
		go func() { errs <- syncDirOrPruned(dir, d.root) }()
	}
	var err error
	for range snap {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if d.err == nil {
			d.err = fmt.Errorf("fsstore: a deferred directory sync failed, refusing further writes until reopened: %w", err)
		}
		return d.err
	}
	for dir, n := range snap {
		if d.pending[dir] == n {
			delete(d.pending, dir)
		}
	}
	return nil
}

// syncAll makes every deferred Put so far durable (Close uses it).
func (d *deferredDirs) syncAll() error {
	snap, err := d.snapshot()
	if err != nil || snap == nil {
		return err
	}
	return d.syncSnapshot(snap)
}

// start begins syncing the directories pending now, for a Put without
// DeferSync; the returned wait reports the outcome. With nothing pending it
// costs nothing.
func (d *deferredDirs) start() (wait func() error) {
	snap, err := d.snapshot()
	if err != nil || snap == nil {
		return func() error { return err }
	}
	done := make(chan error, 1)
	go func() { done <- d.syncSnapshot(snap) }()
	return sync.OnceValue(func() error { return <-done })
}
