//go:build unix

package fsstore

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// cleanStaleTmp removes temp directories of owners that are gone. It returns
// how many directories it removed.
func cleanStaleTmp(tmpRoot string, self *tmpOwner) (int, error) {
	entries, err := os.ReadDir(tmpRoot)
	if err != nil {
		return 0, fmt.Errorf("fsstore: read temp dir: %w", err)
	}
	locks := make(map[string]bool)
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".lock"); ok && !e.IsDir() {
			locks[id] = true
		}
	}
	removed := 0
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
				if os.RemoveAll(filepath.Join(tmpRoot, name)) == nil {
					removed++
				}
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
			if os.RemoveAll(filepath.Join(tmpRoot, id)) == nil {
				removed++
			}
			_ = os.Remove(lockPath)
		}
		_ = f.Close()
	}
	return removed, nil
}
