//go:build unix

package fsstore

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
)

// staleWithSharedTemp leaves a dead writer's temp directory (no lock: its
// owner is gone) holding a hard link to the published object key, a
// partial temp file and an empty one; it returns the directory and the
// linked name.
func staleWithSharedTemp(t *testing.T, dir string, w *Store, key string) (stale, shared string) {
	t.Helper()
	stale = filepath.Join(dir, "tmp", "deadbeef00000003")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	shared = filepath.Join(stale, "0000000000000007.tmp")
	if err := os.Link(filepath.Join(w.objectsDir, relPath(key)), shared); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "0000000000000008.tmp"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "0000000000000009.tmp"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return stale, shared
}

func nlinkOf(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(fi.Sys().(*syscall.Stat_t).Nlink)
}

// TestStaleTempFileSharingAnInodeWithALinkCountOfTwoRemoved: a dead
// writer's temp file that names the same inode as a published object with
// a link count covering both (a crash between a replacing Put's hard link
// and its rename-over) is removed at Open like any stale temp file; the
// object keeps its bytes and a link count of 1.
func TestStaleTempFileSharingAnInodeWithALinkCountOfTwoRemoved(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir)
	put(t, w, "seg/1", []byte("published bytes"), objectstore.PutOptions{})
	stale, _ := staleWithSharedTemp(t, dir, w, "seg/1")
	s := open(t, dir)
	if got, kept := s.StaleTempDirsRemoved(), s.StaleTempFilesKept(); got != 1 || kept != 0 {
		t.Fatalf("Open removed %d stale temp dirs and kept %d files, want 1 and 0", got, kept)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temp dir survived: %v", err)
	}
	if n := nlinkOf(t, filepath.Join(s.objectsDir, relPath("seg/1"))); n != 1 {
		t.Fatalf("object's link count %d after the cleanup, want 1", n)
	}
	if data, _, err := s.Get(ctx(), "seg/1"); err != nil || string(data) != "published bytes" {
		t.Fatalf("Get after Open: %q, %v", data, err)
	}
}

// TestStaleTempFileNamingAPublishedObjectKept: after a power cut on ext4
// without a journal, a renamed temp file's old entry can survive next to
// the published name with an on-disk link count of 1; unlinking it would
// free the object under its name. Open keeps such a temp file (the count,
// which only a damaged file system has, is stood in by the linkCount hook;
// the two names are a real hard link) and removes the dead writer's other
// temp files; the object reads back. Once the object is deleted, the next
// Open removes the temp file and its directory.
func TestStaleTempFileNamingAPublishedObjectKept(t *testing.T) {
	saved := linkCount
	linkCount = func(fs.FileInfo) uint64 { return 1 } // the count fsck has not repaired yet
	t.Cleanup(func() { linkCount = saved })
	dir := t.TempDir()
	w := open(t, dir)
	put(t, w, "seg/1", []byte("published bytes"), objectstore.PutOptions{})
	stale, shared := staleWithSharedTemp(t, dir, w, "seg/1")

	s := open(t, dir)
	if got, kept := s.StaleTempDirsRemoved(), s.StaleTempFilesKept(); got != 0 || kept != 1 {
		t.Fatalf("Open removed %d stale temp dirs and kept %d files, want 0 and 1", got, kept)
	}
	names, err := os.ReadDir(stale)
	if err != nil || len(names) != 1 || names[0].Name() != filepath.Base(shared) {
		t.Fatalf("stale temp dir after Open: %v, %v; want only the file sharing the object's inode", names, err)
	}
	a, errA := os.Stat(shared)
	b, errB := os.Stat(filepath.Join(s.objectsDir, relPath("seg/1")))
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Fatalf("the kept temp file and the object no longer share an inode: %v %v", errA, errB)
	}
	if data, _, err := s.Get(ctx(), "seg/1"); err != nil || string(data) != "published bytes" {
		t.Fatalf("Get after Open: %q, %v", data, err)
	}

	// The object goes: nothing published names the inode any more, and
	// the next Open removes the temp file and its directory.
	if err := s.Delete(ctx(), "seg/1", nil); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir)
	if got, kept := s2.StaleTempDirsRemoved(), s2.StaleTempFilesKept(); got != 1 || kept != 0 {
		t.Fatalf("Open after the delete removed %d stale temp dirs and kept %d files, want 1 and 0", got, kept)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temp dir survived once no object named its file: %v", err)
	}
}
