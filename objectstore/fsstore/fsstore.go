//go:build unix

package fsstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Store is an objectstore.ObjectStore on a local directory. Open it with
// Open; it is safe for concurrent use by many goroutines, and several
// processes (or several Stores in one process) may open the same directory.
type Store struct {
	root       string
	objectsDir string
	storeID    string

	// closeMu: mutations (which use the lock files, the version counter
	// and the temp directory) hold it shared; Close holds it exclusively,
	// so Close waits for in-flight mutations and none start afterwards.
	// Reads need none of those resources and only check closed, so a List
	// loop body may call any method without re-entering closeMu.
	closeMu sync.RWMutex
	closed  atomic.Bool

	locks    []*shardLock
	versions *versionAllocator
	tmp      *tmpOwner
	tmpSeq   atomic.Uint64
	hk       *housekeeper // off-path temp creation and inode release (tmppool.go)
	deferred deferredDirs // directory fsyncs owed by DeferSync Puts (deferred.go)

	// durableDirs caches directories under objects/ whose entry in their
	// parent is known to be on disk (we created and synced it, or synced
	// its parent after finding it), keyed by path, valued by inode so a
	// directory removed and recreated by another process is synced again.
	dirMu       sync.Mutex
	durableDirs map[string]uint64

	staleTmp staleTmp // what Open's cleanup of dead writers' temp files did
}

var _ objectstore.ObjectStore = (*Store)(nil)

// Open opens (creating if needed) a store rooted at dir. It removes temp
// files left by processes that died mid-write.
func Open(dir string) (*Store, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fsstore: %w", err)
	}
	s := &Store{
		root:        root,
		objectsDir:  filepath.Join(root, "objects"),
		durableDirs: make(map[string]uint64),
	}
	s.deferred.root = s.objectsDir
	created := false
	for _, d := range []string{root, s.objectsDir, s.metaDir(), s.locksDir(), s.tmpRoot()} {
		err := os.Mkdir(d, 0o755)
		switch {
		case err == nil:
			created = true
		case !os.IsExist(err):
			return nil, fmt.Errorf("fsstore: open %s: %w", root, err)
		}
	}
	if created {
		if err := syncDir(root); err != nil {
			return nil, err
		}
		if err := syncDir(filepath.Dir(root)); err != nil {
			return nil, err
		}
	}
	if s.tmp, err = claimTmp(s.tmpRoot()); err != nil {
		return nil, err
	}
	fail := func(err error) (*Store, error) {
		s.release()
		return nil, err
	}
	if s.staleTmp, err = cleanStaleTmp(s.tmpRoot(), s.tmp, []string{s.objectsDir, s.metaDir()}); err != nil {
		return fail(err)
	}
	if s.storeID, err = initStoreID(filepath.Join(s.metaDir(), "store-id"), s.tmp.dir); err != nil {
		return fail(err)
	}
	versionsPath := filepath.Join(s.metaDir(), "versions")
	if err := initVersions(versionsPath, s.tmp.dir); err != nil {
		return fail(err)
	}
	if s.versions, err = openVersions(versionsPath); err != nil {
		return fail(err)
	}
	if s.locks, err = openShardLocks(s.locksDir()); err != nil {
		return fail(err)
	}
	s.hk = startHousekeeper(s.tmp.dir, &s.tmpSeq)
	return s, nil
}

func (s *Store) metaDir() string  { return filepath.Join(s.root, "meta") }
func (s *Store) locksDir() string { return filepath.Join(s.root, "locks") }
func (s *Store) tmpRoot() string  { return filepath.Join(s.root, "tmp") }

// Root returns the directory the store lives in.
func (s *Store) Root() string { return s.root }

// StaleTempDirsRemoved reports how many temp directories of dead writers
// Open removed (for tests and operators).
func (s *Store) StaleTempDirsRemoved() int { return s.staleTmp.removed }

// StaleTempFilesKept reports how many of dead writers' temp files Open
// kept because a published file names the same inode and the inode's link
// count does not cover both names — a damaged count (after a power cut on
// ext4 without a journal) that fsck repairs; unlinking the temp name would
// have freed the published file (tmp.go).
func (s *Store) StaleTempFilesKept() int { return s.staleTmp.kept }

// Close waits for in-flight operations, then releases the store's locks and
// temp directory. Later calls return objectstore.ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	// Deferred Puts become durable on a clean close too (best effort:
	// nothing acknowledged depends on it, see deferred.go).
	_ = s.deferred.syncAll()
	s.release()
	return nil
}

func (s *Store) release() {
	if s.locks != nil {
		closeShardLocks(s.locks)
	}
	if s.versions != nil {
		_ = s.versions.close()
	}
	if s.hk != nil {
		s.hk.shutdown() // before the temp directory goes
	}
	if s.tmp != nil {
		s.tmp.release()
	}
}

// enter guards a mutation against Close; the caller must call s.exit.
func (s *Store) enter() error {
	s.closeMu.RLock()
	if s.closed.Load() {
		s.closeMu.RUnlock()
		return errClosed
	}
	return nil
}

func (s *Store) exit() { s.closeMu.RUnlock() }

var errClosed = fmt.Errorf("fsstore: %w", objectstore.ErrClosed)

// checkOpen is the read path's guard.
func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return errClosed
	}
	return nil
}

func (s *Store) version(gen uint64) objectstore.UpdateVersion {
	return objectstore.UpdateVersion{ETag: fmt.Sprintf("%s-%016x", s.storeID, gen)}
}

func (s *Store) info(key string, h header) objectstore.ObjectInfo {
	return objectstore.ObjectInfo{Key: key, Size: int64(h.size), Version: s.version(h.generation), ModTime: time.Unix(0, h.modTime)}
}

func notFound(key string) error {
	return fmt.Errorf("fsstore: %q: %w", key, objectstore.ErrNotFound)
}

// openObject opens key's file and verifies its header. A missing file is
// ErrNotFound.
func (s *Store) openObject(key string) (*os.File, header, error) {
	f, err := openVerified(filepath.Join(s.objectsDir, relPath(key)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, header{}, notFound(key)
	}
	if err != nil {
		return nil, header{}, fmt.Errorf("fsstore: %q: %w", key, err)
	}
	h, err := readHeader(f, key)
	if err != nil {
		_ = f.Close()
		return nil, header{}, err
	}
	return f, h, nil
}

func readHeader(f *os.File, key string) (header, error) {
	fi, err := f.Stat()
	if err != nil {
		return header{}, fmt.Errorf("fsstore: %q: %w", key, err)
	}
	buf := make([]byte, headerSize)
	n, err := f.ReadAt(buf, 0)
	if n < headerSize {
		if err != nil && !errors.Is(err, errEOF) {
			return header{}, fmt.Errorf("fsstore: %q: read header: %w", key, err)
		}
		return header{}, corruptf(key, "file shorter than its header (%d bytes)", n)
	}
	return decodeHeader(key, buf, fi.Size())
}

// Get implements objectstore.ObjectStore. Every block is verified; a
// mismatch returns an error wrapping objectstore.ErrCorrupt.
func (s *Store) Get(ctx context.Context, key string) ([]byte, objectstore.UpdateVersion, error) {
	if err := s.checkOpen(); err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	if err := checkKey(key); err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	f, err := openVerified(filepath.Join(s.objectsDir, relPath(key)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, objectstore.UpdateVersion{}, notFound(key)
	}
	if err != nil {
		return nil, objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: %w", key, err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: %w", key, err)
	}
	// Files are immutable while a name publishes them and a verified reader
	// holds them open (recycle.go), so one read of the whole file is a
	// consistent snapshot of one version.
	buf := make([]byte, fi.Size())
	if n, err := f.ReadAt(buf, 0); n != len(buf) {
		return nil, objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: read: %w", key, err)
	}
	h, err := decodeHeader(key, buf, fi.Size())
	if err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	table := buf[headerSize:h.dataOffset()]
	if crc(table) != h.tableCRC {
		return nil, objectstore.UpdateVersion{}, corruptf(key, "block table checksum mismatch")
	}
	data := buf[h.dataOffset():]
	if err := verifyBlocks(key, h, 0, table, data); err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	return data[:len(data):len(data)], s.version(h.generation), nil
}

// GetRange implements objectstore.ObjectStore. It reads the header, the
// block-table entries of the blocks covering the range and those blocks
// only (at most one partial block of slack on either side), and verifies
// each block it read.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("fsstore: %q: %w: negative offset %d", key, objectstore.ErrInvalidArgument, offset)
	}
	f, h, err := s.openObject(key)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	size := int64(h.size)
	if offset >= size || length == 0 {
		return []byte{}, nil
	}
	end := size
	if length > 0 && length < size-offset {
		end = offset + length
	}
	bs := int64(h.blockSize)
	b0, b1 := offset/bs, (end-1)/bs // first and last block touched
	table := make([]byte, 4*(b1-b0+1))
	if n, err := f.ReadAt(table, headerSize+4*b0); n != len(table) {
		return nil, fmt.Errorf("fsstore: %q: read block table: %w", key, err)
	}
	lo, hi := b0*bs, min((b1+1)*bs, size)
	buf := make([]byte, hi-lo)
	if n, err := f.ReadAt(buf, h.dataOffset()+lo); n != len(buf) {
		return nil, fmt.Errorf("fsstore: %q: read: %w", key, err)
	}
	if err := verifyBlocks(key, h, uint64(b0), table, buf); err != nil {
		return nil, err
	}
	return buf[offset-lo : end-lo : end-lo], nil
}

// ReadRange implements objectstore.RangeReader. With CallerVerifies it
// checks the file's header (which object, how long: a torn or truncated
// file is still ErrCorrupt) and preads the range straight into dst,
// leaving the data's check to the caller (whose own checksums cover every
// byte: one CRC pass instead of two); without it, it verifies exactly as
// GetRange does, then copies.
func (s *Store) ReadRange(ctx context.Context, key string, offset int64, dst []byte, opts objectstore.ReadRangeOptions) (int, error) {
	if !opts.CallerVerifies {
		b, err := s.GetRange(ctx, key, offset, int64(len(dst)))
		if err != nil {
			return 0, err
		}
		return copy(dst, b), nil
	}
	f, at, dst, err := s.openCallerVerifiedRange(ctx, key, offset, dst)
	if f == nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	if n, err := f.ReadAt(dst, at); n != len(dst) {
		return 0, fmt.Errorf("fsstore: %q: read: %w", key, err)
	}
	return len(dst), nil
}

// openCallerVerifiedRange is the part of ReadRange and ReadRangePieces
// with CallerVerifies before the data reads: it checks the request, opens
// the object and checks its header (a torn or truncated file is still
// ErrCorrupt), and clips dst to the object's end. It returns the open file,
// the file position of offset and the clipped dst; a nil file means there
// is nothing to read (err says why, nil for an empty range).
func (s *Store) openCallerVerifiedRange(ctx context.Context, key string, offset int64, dst []byte) (*os.File, int64, []byte, error) {
	if err := s.checkOpen(); err != nil {
		return nil, 0, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, 0, nil, err
	}
	if offset < 0 {
		return nil, 0, nil, fmt.Errorf("fsstore: %q: %w: negative offset %d", key, objectstore.ErrInvalidArgument, offset)
	}
	f, h, err := s.openObject(key)
	if err != nil {
		return nil, 0, nil, err
	}
	size := int64(h.size)
	if offset >= size || len(dst) == 0 {
		_ = f.Close()
		return nil, 0, nil, nil
	}
	return f, h.dataOffset() + offset, dst[:min(int64(len(dst)), size-offset)], nil
}

// ReadRangePieces implements objectstore.PieceReader. With CallerVerifies
// it opens the object and checks its header once, as ReadRange does, then
// preads the range piece by piece through that one descriptor: the reads
// are sequential on one open file, so the kernel's read-ahead fetches the
// pieces that follow while the caller checks the one it has. Without
// CallerVerifies it is one verified ReadRange (GetRange's block CRCs cover
// whole blocks, not pieces) and one call of filled.
func (s *Store) ReadRangePieces(ctx context.Context, key string, offset int64, dst []byte, piece int, opts objectstore.ReadRangeOptions, filled func(n int) error) (int, error) {
	if !opts.CallerVerifies || piece <= 0 || piece >= len(dst) {
		n, err := s.ReadRange(ctx, key, offset, dst, opts)
		if err == nil && n > 0 {
			err = filled(n)
		}
		return n, err
	}
	f, at, dst, err := s.openCallerVerifiedRange(ctx, key, offset, dst)
	if f == nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	return readPiecesAhead(f, at, dst, piece, key, filled)
}

// pieceReadHook, when set (only by tests), runs on readPiecesAhead's reader
// just before it reads the piece that starts at byte done of dst.
var pieceReadHook func(done int)

// readPiecesAhead preads dst from f at at, in pieces of at most piece
// bytes, on a goroutine of its own that stays one piece ahead of filled:
// while filled checks piece k, piece k+1 is being read. The device then
// works during the caller's check instead of after it (a plain sequential
// loop of preads leaves it to the kernel's read-ahead alone), and on two
// cores the copy out of the page cache runs beside the caller's CRC.
//
// The two goroutines never touch the same bytes: the reader writes only
// past the prefix it has handed over, filled looks only at that prefix, and
// each hand-off on the unbuffered channel orders a piece's writes before
// filled reads them. Because the channel is unbuffered the reader is never
// more than one piece past the prefix filled was given, so when filled
// fails at most that one further piece has been read (into dst, never
// handed over). It returns only after the reader has stopped, so dst is
// the caller's again, as the interface requires.
func readPiecesAhead(f *os.File, at int64, dst []byte, piece int, key string, filled func(n int) error) (int, error) {
	type readTo struct {
		end int
		err error
	}
	pieces := make(chan readTo)
	stop := make(chan struct{})
	go func() {
		defer close(pieces)
		for done := 0; done < len(dst); {
			select {
			case <-stop:
				return
			default:
			}
			p := dst[done:min(done+piece, len(dst))]
			if pieceReadHook != nil {
				pieceReadHook(done)
			}
			n, err := f.ReadAt(p, at+int64(done))
			done += n
			if n != len(p) { // ReadAt's err is non-nil whenever n < len(p)
				select {
				case pieces <- readTo{end: done, err: err}:
				case <-stop:
				}
				return
			}
			select {
			case pieces <- readTo{end: done}:
			case <-stop:
				return
			}
		}
	}()
	finish := func(n int, err error) (int, error) {
		close(stop)
		for range pieces { // wait for the reader: dst is the caller's once this returns
		}
		return n, err
	}
	handed := 0
	for r := range pieces {
		if r.err != nil {
			return finish(r.end, fmt.Errorf("fsstore: %q: read: %w", key, r.err))
		}
		handed = r.end
		if err := filled(handed); err != nil {
			return finish(handed, err)
		}
	}
	return handed, nil
}

// Head implements objectstore.ObjectStore. It reads and verifies only the
// header.
func (s *Store) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := s.checkOpen(); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	if err := checkKey(key); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	f, h, err := s.openObject(key)
	if err != nil {
		return objectstore.ObjectInfo{}, err
	}
	_ = f.Close()
	return s.info(key, h), nil
}

// currentFile returns the generation of key's published object, or
// exists=false. Called with the key's shard lock held, so the answer stays
// true until the lock is released. It keeps the published file open (nil
// when there is none) so that a mutation about to replace or unlink it can
// hand the last close to the housekeeper (tmppool.go).
func (s *Store) currentFile(key string) (f *os.File, gen uint64, exists bool, err error) {
	f, h, err := s.openObject(key)
	if errors.Is(err, objectstore.ErrNotFound) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	return f, h.generation, true, nil
}

// openReplaced opens the file a mutation is about to replace or unlink, or
// returns nil if there is none (or it cannot be opened: then the last close
// simply happens inside the rename or unlink, as it always did).
func openReplaced(path string) *os.File {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	return f
}

// Put implements objectstore.ObjectStore.
//
// The object is written to a temp file and fdatasynced outside any lock;
// then, under the key's shard lock, the precondition is checked against the
// published file, the temp file is renamed over the key's path and the
// directory is fsynced. Errors before the rename (including a lost
// precondition) leave the store untouched; an error after it (directory
// fsync) is returned unwrapped: the object is visible, but its durability
// is unknown.
func (s *Store) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	if err := s.enter(); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	defer s.exit()
	if err := ctx.Err(); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	if err := checkKey(key); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	switch opts.Mode {
	case objectstore.PutOverwrite, objectstore.PutCreate:
	case objectstore.PutUpdate:
		if opts.Version.IsZero() {
			return objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: %w: PutUpdate without a version", key, objectstore.ErrInvalidArgument)
		}
	default:
		return objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: %w: unknown put mode %d", key, objectstore.ErrInvalidArgument, opts.Mode)
	}

	if err := s.deferred.check(); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	// A Put without DeferSync first makes every DeferSync Put before it
	// durable: their directory fsyncs run while this Put writes its temp
	// file, and this Put renames only once they succeeded (deferred.go has
	// the ordering argument).
	deferredSynced := func() error { return nil }
	if !opts.DeferSync {
		deferredSynced = s.deferred.start()
		defer func() { _ = deferredSynced() }() // never leave the syncs running past Close
	}
	gen, err := s.versions.allocate()
	if err != nil {
		return objectstore.UpdateVersion{}, err
	}
	tmpPath, err := s.writeTemp(data, gen)
	if err != nil {
		return objectstore.UpdateVersion{}, err
	}
	if err := deferredSynced(); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	published := false
	defer func() {
		if !published {
			_ = os.Remove(tmpPath)
		}
	}()

	l := s.locks[shardOf(key)]
	if err := l.lock(ctx); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	defer l.unlock()
	if err := ctx.Err(); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	rel := relPath(key)
	final := filepath.Join(s.objectsDir, rel)
	// The inode this Put replaces: linked into the temp directory before
	// the rename and recycled once the rename is durable (recycle.go); if
	// that link cannot be made, held open so that freeing it happens off
	// this path (tmppool.go), closed by the housekeeper once the outcome is
	// settled, whatever it is.
	var replaced *os.File
	defer func() { s.hk.closeLater(replaced) }()
	retiredPath, reusable := "", false
	defer func() { s.hk.retireLater(retiredPath, reusable) }()
	switch opts.Mode {
	case objectstore.PutCreate:
		// Existence is all that matters; a corrupt object still exists.
		_, err := os.Lstat(final)
		if err == nil {
			return objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: %w", key, objectstore.ErrAlreadyExists)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: %w", key, err)
		}
	case objectstore.PutUpdate:
		// A corrupt header cannot prove the version: ErrCorrupt, not applied.
		f, curGen, exists, err := s.currentFile(key)
		replaced = f
		if err != nil {
			return objectstore.UpdateVersion{}, err
		}
		if !exists || !s.version(curGen).Equal(opts.Version) {
			return objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: %w", key, objectstore.ErrPreconditionFailed)
		}
	}
	if opts.Mode != objectstore.PutCreate {
		p := s.hk.tempPath()
		switch err := os.Link(final, p); {
		case err == nil:
			retiredPath = p
			crashPoint("retired")
			// Still named by p: closing it frees nothing (and an open
			// descriptor would fail the recycling lease check).
			if replaced != nil {
				_ = replaced.Close()
				replaced = nil
			}
		case errors.Is(err, fs.ErrNotExist):
			// Nothing to replace.
		case opts.Mode == objectstore.PutOverwrite:
			replaced = openReplaced(final)
		}
	}
	parent := filepath.Dir(final)
	for attempt := 0; ; attempt++ {
		// A directory can vanish while ensureDirs makes or syncs it, and
		// between ensureDirs and rename: a concurrent Delete prunes it as
		// soon as it is empty (pruneEmptyDirs, which holds no lock of this
		// key). Either way nothing of this Put is published yet, so it
		// recreates the directories and tries again.
		if err := s.ensureDirs(filepath.Dir(rel)); err != nil {
			if errors.Is(err, fs.ErrNotExist) && attempt < 100 {
				continue
			}
			return objectstore.UpdateVersion{}, err
		}
		err := os.Rename(tmpPath, final)
		if err == nil {
			break
		}
		if errors.Is(err, fs.ErrNotExist) && attempt < 100 {
			continue
		}
		return objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: publish: %w", key, err)
	}
	published = true
	crashPoint("renamed")
	if opts.DeferSync {
		if err := s.deferred.add(parent); err != nil {
			return objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: published, durability unknown: %v", key, err)
		}
		return s.version(gen), nil
	}
	if syncMutant == mutantSkipPublishDir {
		return s.version(gen), nil
	}
	if err := syncDir(parent); err != nil {
		// Visible but not known durable: outcome unknown, no sentinel.
		return objectstore.UpdateVersion{}, fmt.Errorf("fsstore: %q: published but directory sync failed (outcome unknown): %v", key, err)
	}
	crashPoint("published")
	reusable = true // the old inode's name is durably gone
	return s.version(gen), nil
}

// syncMutant names one fsync of the publication protocol that the
// power-cut mutant test skips, to prove the power-cut test notices
// (powercut_test.go). It is set only through export_test.go, in test
// binaries; production code never changes it.
var syncMutant mutantSync

type mutantSync uint8

const (
	mutantNone             mutantSync = iota
	mutantSkipTempSync                // writeTemp: the object file's fdatasync before the rename
	mutantSkipPublishDir              // Put: the directory fsync after the rename
	mutantSkipDeferredSync            // Put without DeferSync: the pending directories' fsyncs
)

// writeTemp writes a complete object file into this Store's temp directory
// and syncs it. The file is a recycled inode (recycle.go), or an empty one
// the housekeeper created ahead of time, or one created now when the pool
// is empty; each is used once.
func (s *Store) writeTemp(data []byte, gen uint64) (string, error) {
	prefix := encodePrefix(data, gen, time.Now().UnixNano())
	size := int64(len(prefix) + len(data))
	t, err := s.hk.take(size)
	if err != nil {
		return "", err
	}
	path, f := t.path, t.f
	err = func() error {
		if _, err := f.WriteAt(prefix, 0); err != nil {
			return err
		}
		if err := writeData(f, data, int64(len(prefix))); err != nil {
			return err
		}
		if t.size > size {
			// A recycled inode that held a longer object: cut its
			// stale tail off before the fdatasync (recycle.go, step 5).
			if err := f.Truncate(size); err != nil {
				return err
			}
		}
		crashPoint("temp-written")
		if syncMutant == mutantSkipTempSync {
			return nil
		}
		err := fdatasync(f)
		if err == nil {
			crashPoint("temp-synced")
		}
		return err
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("fsstore: write temp file: %w", err)
	}
	return path, nil
}

// ensureDirs creates the directories of rel (relative to objects/) and makes
// sure each one's entry in its parent is durable before an object is
// published into it.
func (s *Store) ensureDirs(rel string) error {
	if rel == "." {
		return nil
	}
	cur := s.objectsDir
	for _, comp := range strings.Split(rel, string(filepath.Separator)) {
		parent := cur
		cur = filepath.Join(cur, comp)
		fi, err := os.Lstat(cur)
		switch {
		case err == nil && fi.IsDir():
			ino := inode(fi)
			s.dirMu.Lock()
			known, ok := s.durableDirs[cur]
			s.dirMu.Unlock()
			if ok && known == ino {
				continue
			}
			// Created by someone else, who may not have synced its parent
			// yet: sync it ourselves before relying on it.
			if err := syncDir(parent); err != nil {
				return err
			}
			s.rememberDir(cur, ino)
		case err == nil:
			return fmt.Errorf("fsstore: %s is not a directory", cur)
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o755); err != nil && !os.IsExist(err) {
				return fmt.Errorf("fsstore: mkdir: %w", err)
			}
			if dirMadeHook != nil {
				dirMadeHook(cur)
			}
			if err := syncDir(parent); err != nil {
				return err
			}
			fi, err := os.Lstat(cur)
			if err != nil {
				return fmt.Errorf("fsstore: mkdir: %w", err)
			}
			s.rememberDir(cur, inode(fi))
		default:
			return fmt.Errorf("fsstore: stat: %w", err)
		}
	}
	return nil
}

// dirMadeHook, when set (only by tests), runs right after ensureDirs made
// a directory: where a concurrent prune can remove it before its check.
var dirMadeHook func(dir string)

func (s *Store) rememberDir(path string, ino uint64) {
	s.dirMu.Lock()
	s.durableDirs[path] = ino
	s.dirMu.Unlock()
}

func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// Delete implements objectstore.ObjectStore. Conditional deletes compare the
// version under the key's shard lock. After the unlink the directory is
// fsynced (its nearest existing ancestor if a sibling's Delete pruned it
// meanwhile, syncDirOrPruned); empty parent directories are then pruned
// (best effort).
func (s *Store) Delete(ctx context.Context, key string, ifVersion *objectstore.UpdateVersion) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKey(key); err != nil {
		return err
	}
	l := s.locks[shardOf(key)]
	if err := l.lock(ctx); err != nil {
		return err
	}
	defer l.unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	rel := relPath(key)
	path := filepath.Join(s.objectsDir, rel)
	// The inode is moved into the temp directory rather than unlinked and
	// recycled once its removal is durable (recycle.go); the descriptor a
	// conditional delete opened is closed first (it would fail the
	// recycling lease check).
	var unlinked *os.File
	defer func() { s.hk.closeLater(unlinked) }()
	retiredPath, reusable := s.hk.tempPath(), false
	if ifVersion != nil {
		f, gen, exists, err := s.currentFile(key)
		unlinked = f
		if err != nil {
			return err
		}
		if !exists {
			return notFound(key)
		}
		if !s.version(gen).Equal(*ifVersion) {
			return fmt.Errorf("fsstore: %q: %w", key, objectstore.ErrPreconditionFailed)
		}
	}
	if err := os.Rename(path, retiredPath); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return notFound(key)
		}
		return fmt.Errorf("fsstore: %q: delete: %w", key, err)
	}
	defer func() { s.hk.retireLater(retiredPath, reusable) }()
	if unlinked != nil {
		_ = unlinked.Close() // still named by retiredPath: frees nothing
		unlinked = nil
	}
	crashPoint("unlinked")
	if err := syncDirOrPruned(filepath.Dir(path), s.objectsDir); err != nil {
		return fmt.Errorf("fsstore: %q: deleted but directory sync failed (outcome unknown): %v", key, err)
	}
	reusable = true
	s.pruneEmptyDirs(filepath.Dir(rel))
	return nil
}

// pruneEmptyDirs removes now-empty directories from rel upwards. rmdir fails
// on a non-empty directory, so this never removes another object; a Put that
// races with it recreates the directory (see Put).
func (s *Store) pruneEmptyDirs(rel string) {
	for rel != "." && rel != "" {
		dir := filepath.Join(s.objectsDir, rel)
		if os.Remove(dir) != nil {
			return
		}
		s.dirMu.Lock()
		delete(s.durableDirs, dir)
		s.dirMu.Unlock()
		rel = filepath.Dir(rel)
	}
}

// List implements objectstore.ObjectStore. It walks only the directories
// that can hold keys with the prefix, reading one directory at a time and
// visiting entries in key order, and reads each listed object's header for
// its size and version. Objects deleted during the walk are skipped.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[objectstore.ObjectInfo, error] {
	return func(yield func(objectstore.ObjectInfo, error) bool) {
		if err := s.checkOpen(); err != nil {
			yield(objectstore.ObjectInfo{}, err)
			return
		}
		if err := ctx.Err(); err != nil {
			yield(objectstore.ObjectInfo{}, err)
			return
		}
		// Start at the deepest directory fully named by the prefix.
		dir, keyPrefix := s.objectsDir, ""
		if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
			for seg := range strings.SplitSeq(prefix[:i], "/") {
				if seg == "" || seg == "." || seg == ".." {
					return // no valid key has this prefix
				}
				dir = filepath.Join(dir, seg+dirSuffix)
			}
			keyPrefix = prefix[:i+1]
		}
		s.walk(ctx, dir, keyPrefix, prefix, yield)
	}
}

type listEntry struct {
	sortKey string // segment, plus "/" for a directory: orders like the keys beneath it
	name    string
	isDir   bool
}

// walk yields the objects under dir (whose keys all start with keyPrefix)
// that match prefix. It returns false once the consumer stops or an error
// was yielded.
func (s *Store) walk(ctx context.Context, dir, keyPrefix, prefix string, yield func(objectstore.ObjectInfo, error) bool) bool {
	if err := s.checkOpen(); err != nil {
		return yield(objectstore.ObjectInfo{}, err)
	}
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return yield(objectstore.ObjectInfo{}, fmt.Errorf("fsstore: list %q: %w", keyPrefix, err))
	}
	entries := make([]listEntry, 0, len(des))
	for _, de := range des {
		isDir := de.IsDir()
		seg, ok := entryName(de.Name(), isDir)
		if !ok {
			continue
		}
		e := listEntry{sortKey: seg, name: de.Name(), isDir: isDir}
		if isDir {
			e.sortKey += "/"
			full := keyPrefix + e.sortKey
			if !strings.HasPrefix(full, prefix) && !strings.HasPrefix(prefix, full) {
				continue
			}
		} else if !strings.HasPrefix(keyPrefix+seg, prefix) {
			continue
		}
		entries = append(entries, e)
	}
	// Sorting by segment (files) and segment+"/" (directories) yields global
	// key order: every key below a directory starts with its sort key, and
	// no sort key of one entry is a proper prefix of another's unless the
	// shorter is a file whose key is exactly that prefix.
	slices.SortFunc(entries, func(a, b listEntry) int { return strings.Compare(a.sortKey, b.sortKey) })
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return yield(objectstore.ObjectInfo{}, err)
		}
		path := filepath.Join(dir, e.name)
		key := keyPrefix + e.sortKey
		if e.isDir {
			if !s.walk(ctx, path, key, prefix, yield) {
				return false
			}
			continue
		}
		f, err := openVerified(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since the directory was read
		}
		if err != nil {
			// About this object only: name it, and go on if asked to
			// (ObjectStore.List).
			if !yield(objectstore.ObjectInfo{Key: key}, fmt.Errorf("fsstore: list %q: %w", key, err)) {
				return false
			}
			continue
		}
		h, err := readHeader(f, key)
		_ = f.Close()
		if err != nil {
			if !yield(objectstore.ObjectInfo{Key: key}, err) {
				return false
			}
			continue
		}
		if !yield(s.info(key, h), nil) {
			return false
		}
	}
	return true
}
