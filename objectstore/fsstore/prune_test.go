package fsstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
)

// TestDeleteAfterItsDirectoryWasPruned: a Delete whose directory another
// Delete pruned between this one's unlink and its directory fsync (the
// sibling's prune needs no lock of this key) still succeeds and leaves the
// key gone. CI hit it as "deleted but directory sync failed (outcome
// unknown) … no such file or directory" under TestRecycleConcurrentReaders;
// here the crash hook removes the emptied directory at that exact step.
func TestDeleteAfterItsDirectoryWasPruned(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Dir(filepath.Join(root, "objects", relPath("p/only")))
	var armed atomic.Bool
	crashHook = func(step string) { // set before Open: the housekeeper reads it
		if step == "unlinked" && armed.CompareAndSwap(true, false) {
			if err := os.Remove(dir); err != nil {
				t.Errorf("prune %s: %v", dir, err)
			}
		}
	}
	defer func() { crashHook = nil }()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := s.Put(ctx, "p/only", []byte("bytes"), objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if err := s.Delete(ctx, "p/only", nil); err != nil {
		t.Fatalf("Delete after a concurrent prune: %v", err)
	}
	if armed.Load() {
		t.Fatal("the Delete never reached its unlinked step: the test exercised nothing")
	}
	if _, _, err := s.Get(ctx, "p/only"); !isNotFound(err) {
		t.Fatalf("Get after Delete: %v, want not found", err)
	}
}

// TestSyncDirOrPruned: a vanished directory is synced through its nearest
// existing ancestor; a missing root and other errors are still errors.
func TestSyncDirOrPruned(t *testing.T) {
	root := t.TempDir()
	if err := syncDirOrPruned(filepath.Join(root, "a", "b", "c"), root); err != nil {
		t.Fatalf("pruned chain: %v", err)
	}
	gone := filepath.Join(root, "gone")
	if err := syncDirOrPruned(filepath.Join(gone, "x"), gone); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing root: %v, want not exist", err)
	}
}

// TestDeferredSyncOfPrunedDirectory: a DeferSync Put's directory fsync is
// owed until the next barrier, and a Delete of that key can prune the
// directory first. The owed sync then finds nothing to open; before
// syncDirOrPruned that failure was sticky and the store refused every
// later write until reopened.
func TestDeferredSyncOfPrunedDirectory(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, err := s.Put(ctx, "q/one", []byte("bytes"), objectstore.PutOptions{DeferSync: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "q/one", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(filepath.Join(s.objectsDir, relPath("q/one")))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the Delete did not prune the directory (%v): the test exercised nothing", err)
	}
	if err := s.deferred.syncAll(); err != nil {
		t.Fatalf("owed sync of a pruned directory: %v", err)
	}
	if _, err := s.Put(ctx, "q/two", []byte("bytes"), objectstore.PutOptions{}); err != nil {
		t.Fatalf("Put after the owed sync: %v", err)
	}
}

// TestPutIntoADirectoryPrunedAsItWasMade: a Put whose new directory a
// concurrent Delete prunes (it is empty until the rename) between its
// mkdir and the check after it recreates the directory and publishes. CI
// hit it as "fsstore: mkdir: lstat …: no such file or directory" under
// TestRecycleConcurrentReaders; here the hook removes the directory at that
// exact step.
func TestPutIntoADirectoryPrunedAsItWasMade(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	var pruned atomic.Bool
	dirMadeHook = func(dir string) {
		if pruned.CompareAndSwap(false, true) {
			if err := os.Remove(dir); err != nil {
				t.Errorf("prune %s: %v", dir, err)
			}
		}
	}
	defer func() { dirMadeHook = nil }()
	if _, err := s.Put(ctx, "q/new", []byte("bytes"), objectstore.PutOptions{}); err != nil {
		t.Fatalf("Put after its directory was pruned: %v", err)
	}
	if !pruned.Load() {
		t.Fatal("the Put made no directory: the test exercised nothing")
	}
	b, _, err := s.Get(ctx, "q/new")
	if err != nil || string(b) != "bytes" {
		t.Fatalf("Get = %q, %v; want the Put's bytes", b, err)
	}
}
