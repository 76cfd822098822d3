//go:build unix

package fsstore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Temp-file ownership.
//
// Each open Store writes its temp files into its own directory tmp/<id>/ and
// holds an exclusive flock on tmp/<id>.lock for as long as it is open. The
// lock file is created (and locked) before the directory, and removed only
// by whoever holds its lock, after the directory. So at Open:
//   - a <id>.lock whose flock can be taken belongs to a dead (or closed)
//     owner: its directory is stale and is removed, then the lock file;
//   - a directory with no <id>.lock is left over from a cleanup that was
//     interrupted, and is removed;
//   - a locked <id>.lock belongs to a live process sharing the store and is
//     left alone, so concurrent processes never delete each other's
//     in-flight temp files.
// Temp files live outside objects/, so List and Get can never see them.
//
// A stale temp file that shares its inode with a published file (under
// objects/ or meta/) is removed only if the inode's link count covers both
// names (removeStale). Normally the two never share one: a temp name is
// renamed to the published one, and a retired inode's published name is
// gone before it is handed on. Two cases leave both names:
//   - a crash between a hard link and the removal of the other name (a
//     replacing Put links the published file into the temp directory
//     before its rename-over; store-id and versions are linked into meta/
//     from a temp file): the link count is right, 2, and unlinking the
//     temp name leaves 1 for the published name;
//   - a power cut on ext4 without a journal, where a rename's new entry
//     (its directory is fsynced) reaches the disk while the removal of
//     the old one (the temp directory is never fsynced) does not: both
//     names survive with an on-disk link count of 1, and unlinking the
//     temp name would free the published file's inode under its name.
// So a shared temp file whose link count is below 2 is kept (counted in
// StaleTempFilesKept): fsck repairs the count (and such a file system
// needs fsck after a power cut anyway), and a later Open then removes it.
// Processes sharing the store only ever move inodes out of objects/ into
// their own temp directories meanwhile, never into a dead owner's.

// tmpOwner is this Store's claim on its temp directory.
type tmpOwner struct {
	lockFile *os.File
	lockPath string
	dir      string
}

func randomID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// claimTmp creates and locks a fresh temp directory under tmpRoot.
func claimTmp(tmpRoot string) (*tmpOwner, error) {
	for range 16 {
		id, err := randomID()
		if err != nil {
			return nil, err
		}
		lockPath := filepath.Join(tmpRoot, id+".lock")
		f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if os.IsExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("fsstore: create temp lock: %w", err)
		}
		ok, err := tryFlock(f)
		// A concurrent cleaner may have locked and unlinked the file between
		// our create and our flock; then the lock protects nothing.
		if err != nil || !ok || !sameFile(f, lockPath) {
			_ = f.Close()
			continue
		}
		dir := filepath.Join(tmpRoot, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			_ = os.Remove(lockPath)
			_ = f.Close()
			return nil, fmt.Errorf("fsstore: create temp dir: %w", err)
		}
		return &tmpOwner{lockFile: f, lockPath: lockPath, dir: dir}, nil
	}
	return nil, fmt.Errorf("fsstore: could not claim a temp directory in %s", tmpRoot)
}

// release removes the temp directory and its lock. Called by Close.
func (o *tmpOwner) release() {
	_ = os.RemoveAll(o.dir)
	_ = os.Remove(o.lockPath)
	_ = o.lockFile.Close()
}

// staleTmp is what cleanStaleTmp did.
type staleTmp struct {
	removed int // temp directories removed
	kept    int // temp files kept: a published file needs their inode
}

// cleanStaleTmp removes temp directories of owners that are gone, except
// temp files whose inode a file in one of the published directories
// (objects/, meta/) also names and whose link count does not cover both
// names (see above).
func cleanStaleTmp(tmpRoot string, self *tmpOwner, published []string) (staleTmp, error) {
	var st staleTmp
	entries, err := os.ReadDir(tmpRoot)
	if err != nil {
		return st, fmt.Errorf("fsstore: read temp dir: %w", err)
	}
	locks := make(map[string]bool)
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".lock"); ok && !e.IsDir() {
			locks[id] = true
		}
	}
	pub := &publishedInodes{dirs: published}
	removeDir := func(dir string) {
		kept, gone := removeStale(dir, pub)
		st.kept += kept
		if gone {
			st.removed++
		}
	}
	for _, e := range entries {
		name := e.Name()
		if self != nil && filepath.Join(tmpRoot, name) == self.dir {
			continue
		}
		if e.IsDir() {
			// A directory read without its lock may still have one: a
			// directory listing is not a snapshot, and owners create the
			// lock before the directory. Re-check now that the directory is
			// known to exist.
			if _, err := os.Lstat(filepath.Join(tmpRoot, name+".lock")); !locks[name] && os.IsNotExist(err) {
				removeDir(filepath.Join(tmpRoot, name))
			}
			continue
		}
		id, ok := strings.CutSuffix(name, ".lock")
		if !ok {
			// Not ours to interpret; leave it.
			continue
		}
		if self != nil && filepath.Join(tmpRoot, name) == self.lockPath {
			continue
		}
		lockPath := filepath.Join(tmpRoot, name)
		f, err := os.OpenFile(lockPath, os.O_RDWR, 0)
		if err != nil {
			continue // removed concurrently
		}
		got, err := tryFlock(f)
		if err == nil && got && sameFile(f, lockPath) {
			removeDir(filepath.Join(tmpRoot, id))
			_ = os.Remove(lockPath) // a kept file's directory is then judged again at the next Open
		}
		_ = f.Close()
	}
	return st, nil
}

// removeStale removes the stale temp directory dir: every entry, except
// regular files whose inode a published file also names (or might: the
// published files could not be read) while its link count is below 2,
// then dir itself if nothing was kept. It returns how many files it kept. Failures leave what could not
// be removed, as os.RemoveAll did, for a later Open; gone reports that
// dir no longer exists.
func removeStale(dir string, pub *publishedInodes) (kept int, gone bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		// Removed concurrently (gone), or unreadable: left for a later Open.
		return 0, errors.Is(err, fs.ErrNotExist)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if !e.Type().IsRegular() {
			_ = os.RemoveAll(path) // the Store writes only regular files here
			continue
		}
		fi, err := os.Lstat(path)
		if err != nil {
			continue
		}
		if id, ok := fileInode(fi); !ok || (pub.has(id) && linkCount(fi) < 2) {
			// Another name, published, needs this inode, and its link count
			// does not cover both (see above): unlinking would free it.
			kept++
			continue
		}
		_ = os.Remove(path)
	}
	if kept > 0 {
		return kept, false
	}
	err = os.Remove(dir)
	return 0, err == nil || errors.Is(err, fs.ErrNotExist)
}

// linkCount is the inode's link count as stat reports it (a variable so a
// test can stand in a count that does not cover every name, which only a
// damaged file system has).
var linkCount = func(fi fs.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	return uint64(st.Nlink)
}

// inodeID names an inode: device and inode number.
type inodeID struct{ dev, ino uint64 }

func fileInode(fi fs.FileInfo) (inodeID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return inodeID{}, false
	}
	return inodeID{dev: uint64(st.Dev), ino: st.Ino}, true
}

// publishedInodes is the set of inodes the regular files under dirs name,
// read on first use (one walk of objects/ and meta/, only when an Open
// finds stale temp files to judge). A walk that fails makes every inode
// count as named: nothing is removed on a guess.
type publishedInodes struct {
	dirs []string
	set  map[inodeID]bool
	err  error
}

func (p *publishedInodes) has(id inodeID) bool {
	if p.set == nil && p.err == nil {
		p.set = map[inodeID]bool{}
		for _, d := range p.dirs {
			p.err = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
				if err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						return nil // removed concurrently
					}
					return err
				}
				if !e.Type().IsRegular() {
					return nil
				}
				fi, err := e.Info()
				if err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						return nil
					}
					return err
				}
				if id, ok := fileInode(fi); ok {
					p.set[id] = true
				}
				return nil
			})
			if p.err != nil {
				break
			}
		}
	}
	return p.err != nil || p.set[id]
}
