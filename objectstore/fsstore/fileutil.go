//go:build unix

package fsstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nereusstream/nereus-go/internal/filesync"
	"github.com/nereusstream/nereus-go/objectstore"
)

var errEOF = io.EOF

// syncDir fsyncs a directory so entries created, renamed or removed in it
// are durable.
func syncDir(dir string) error { return filesync.SyncDir(dir) }

// syncDirOrPruned fsyncs dir, an object directory under root (objects/). A
// directory can vanish before its fsync: pruneEmptyDirs removes one as soon
// as a Delete leaves it empty, without holding the locks of the other keys
// it held (a Delete of a sibling key, or a DeferSync Put's later directory
// sync). rmdir succeeds only on an empty directory, so every entry change
// made in dir had already happened when it was removed; syncing the nearest
// ancestor that still exists makes that removal durable, and after a crash
// the directory, with whatever its entries were, is gone. Any other error,
// and a missing root, is returned as is.
func syncDirOrPruned(dir, root string) error {
	for {
		err := syncDir(dir)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || dir == root {
			return err
		}
		if dir = filepath.Dir(dir); !strings.HasPrefix(dir, root) {
			return err // not under root: never sync outside the store
		}
	}
}

// writeFileSync writes data to a new file at path and syncs it.
func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = fdatasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

const storeIDHeader = "nereus-fsstore v1 id="

// initStoreID returns the store's random identity, creating it on first
// open (temp file, sync, link: the first creator wins and everyone reads
// its id). The id is part of every version, so versions of a store that was
// wiped and recreated at the same path never match old ones.
func initStoreID(path, tmpDir string) (string, error) {
	read := func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		id, ok := strings.CutPrefix(strings.TrimSuffix(string(b), "\n"), storeIDHeader)
		if !ok || len(id) != 16 {
			return "", fmt.Errorf("fsstore: %s: %w: malformed store id", path, objectstore.ErrCorrupt)
		}
		return id, nil
	}
	id, err := read()
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return id, err
	}
	newID, err := randomID()
	if err != nil {
		return "", err
	}
	tmp := filepath.Join(tmpDir, "store-id.init")
	if err := writeFileSync(tmp, []byte(storeIDHeader+newID+"\n")); err != nil {
		return "", fmt.Errorf("fsstore: create store id: %w", err)
	}
	defer func() { _ = os.Remove(tmp) }()
	if err := os.Link(tmp, path); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("fsstore: create store id: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return "", err
	}
	return read()
}
