package walstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"

	"github.com/nereusstream/nereus-go/internal/filesync"
	"github.com/nereusstream/nereus-go/objectstore"
)

// maxValueBytes bounds one object (a record's length is a u32).
const maxValueBytes = 1 << 30

// Defaults of Options.
const (
	DefaultFileBytes     = 32 << 20
	DefaultPreallocBytes = 4 << 20
	DefaultCopyAfter     = time.Minute
	DefaultSealAfter     = time.Second
	// sealMinBytes: a file is sealed for its age only once this much was
	// written to it, so an idle store (a manifest copied forward, say)
	// never seals, copies and seals again.
	sealMinBytes = 1 << 20
)

// Options tune a Store; the zero value takes every default.
type Options struct {
	// FileBytes: a log file is sealed once the next record would take it
	// past this (a larger object gets a file of its own size).
	FileBytes int64
	// PreallocBytes: zeros kept synced ahead of the writer.
	PreallocBytes int64
	// CopyAfter: a sealed file older than this whose live records are
	// under half its bytes has them copied forward so it can go (one under
	// a sixteenth live, at once).
	CopyAfter time.Duration
	// SealAfter: the active file is sealed once it is this old and at
	// least 1 MiB was written to it, so that at a low write rate files stay
	// small and go soon after what they hold dies (space follows the live
	// bytes, not the file size).
	SealAfter time.Duration
	// LockTimeout: how long Open waits for another process to release
	// the directory.
	LockTimeout time.Duration
	// Logger receives reclamation failures; nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.FileBytes <= 0 {
		o.FileBytes = DefaultFileBytes
	}
	if o.PreallocBytes <= 0 {
		o.PreallocBytes = DefaultPreallocBytes
	}
	if o.CopyAfter <= 0 {
		o.CopyAfter = DefaultCopyAfter
	}
	if o.SealAfter <= 0 {
		o.SealAfter = DefaultSealAfter
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// entry is one live object: where its record is and what it holds.
// Entries are immutable once published.
type entry struct {
	key      string
	version  uint64
	modTime  int64
	size     int64
	file     *logFile
	off      int64 // the record's offset in file
	valueOff int64 // the value's offset in file
	sums     []uint32
}

func (e *entry) recLen() int64 { return recordLen(len(e.key), uint64(e.size)) }

func (e *entry) info() objectstore.ObjectInfo {
	return objectstore.ObjectInfo{Key: e.key, Size: e.size, Version: versionOf(e.version), ModTime: time.Unix(0, e.modTime)}
}

func versionOf(v uint64) objectstore.UpdateVersion {
	return objectstore.UpdateVersion{ETag: strconv.FormatUint(v, 16)}
}

func entryLess(a, b *entry) bool { return a.key < b.key }

// Store is the log-structured object store. See the package doc.
type Store struct {
	dir  string
	opts Options
	lock *os.File

	// writeMu is held by every mutation from its precondition check to
	// its index update, so a check can never be overtaken, and records
	// are written in sequence order.
	writeMu sync.Mutex
	seq     uint64   // last sequence number handed out
	active  *logFile // the file being appended to
	hdr     []byte   // reused record-header buffer

	// mu guards index and files (writers hold writeMu too).
	mu    sync.RWMutex
	index *btree.BTreeG[*entry]
	files []*logFile // ascending file number; the last is active

	flush flusher

	closed    atomic.Bool
	ctx       context.Context // ends at Close: the background work's waits
	cancel    context.CancelFunc
	reclaimCh chan struct{}
	stop      chan struct{}
	wg        sync.WaitGroup // the flusher and the reclaimer
	trims     sync.WaitGroup // sealed files being trimmed (started under writeMu)

	stats struct {
		puts, deletes, copies, filesDeleted atomic.Int64
	}
}

// Open opens (creating it if needed) the store in dir, replays its logs
// and starts a new log file.
func Open(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("walstore: %w", err)
	}
	if err := filesync.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, fmt.Errorf("walstore: %w", err)
	}
	lock, err := filesync.LockDir(dir, opts.LockTimeout)
	if err != nil {
		return nil, fmt.Errorf("walstore: %w", err)
	}
	s := &Store{dir: dir, opts: opts, lock: lock, index: btree.NewG(32, entryLess),
		reclaimCh: make(chan struct{}, 1), stop: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.flush.init()
	if err := s.recover(); err != nil {
		s.cancel()
		for _, f := range s.files {
			f.release()
		}
		_ = lock.Close()
		return nil, err
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.flush.run(s.stop) }()
	go func() { defer s.wg.Done(); s.reclaimLoop() }()
	s.kickReclaim()
	return s, nil
}

var (
	_ objectstore.ObjectStore = (*Store)(nil)
	_ objectstore.RangeReader = (*Store)(nil)
)

func (s *Store) check(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return objectstore.ErrClosed
	}
	return objectstore.CheckKey(key)
}

// lookup returns the live entry of key and takes a reference on its file
// (the caller releases it), or nil.
func (s *Store) lookup(key string) *entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.index.Get(&entry{key: key})
	if !ok {
		return nil
	}
	e.file.acquire()
	return e
}

// Head implements objectstore.ObjectStore.
func (s *Store) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := s.check(ctx, key); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	e := s.lookup(key)
	if e == nil {
		return objectstore.ObjectInfo{}, fmt.Errorf("walstore: %q: %w", key, objectstore.ErrNotFound)
	}
	e.file.release()
	return e.info(), nil
}

// Get implements objectstore.ObjectStore.
func (s *Store) Get(ctx context.Context, key string) ([]byte, objectstore.UpdateVersion, error) {
	if err := s.check(ctx, key); err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	e := s.lookup(key)
	if e == nil {
		return nil, objectstore.UpdateVersion{}, fmt.Errorf("walstore: %q: %w", key, objectstore.ErrNotFound)
	}
	defer e.file.release()
	b := make([]byte, e.size)
	if err := e.read(b, 0, true); err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	return b, versionOf(e.version), nil
}

// GetRange implements objectstore.ObjectStore.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := s.check(ctx, key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("walstore: negative offset %d: %w", offset, objectstore.ErrInvalidArgument)
	}
	e := s.lookup(key)
	if e == nil {
		return nil, fmt.Errorf("walstore: %q: %w", key, objectstore.ErrNotFound)
	}
	defer e.file.release()
	from, to := clampRange(e.size, offset, length)
	b := make([]byte, to-from)
	if err := e.readChecked(b, from); err != nil {
		return nil, err
	}
	return b, nil
}

// ReadRange implements objectstore.RangeReader.
func (s *Store) ReadRange(ctx context.Context, key string, offset int64, dst []byte, opts objectstore.ReadRangeOptions) (int, error) {
	if err := s.check(ctx, key); err != nil {
		return 0, err
	}
	if offset < 0 {
		return 0, fmt.Errorf("walstore: negative offset %d: %w", offset, objectstore.ErrInvalidArgument)
	}
	e := s.lookup(key)
	if e == nil {
		return 0, fmt.Errorf("walstore: %q: %w", key, objectstore.ErrNotFound)
	}
	defer e.file.release()
	from, to := clampRange(e.size, offset, int64(len(dst)))
	if from == to {
		return 0, nil
	}
	var err error
	if opts.CallerVerifies {
		err = e.read(dst[:to-from], from, false)
	} else {
		err = e.readChecked(dst[:to-from], from)
	}
	if err != nil {
		return 0, err
	}
	return int(to - from), nil
}

func clampRange(size, offset, length int64) (from, to int64) {
	from = min(offset, size)
	to = size
	if length >= 0 && length < to-from {
		to = from + length
	}
	return from, to
}

// scratchBlocks are the buffers a read of part of a block reads the whole
// block into, to check it.
var scratchBlocks = sync.Pool{New: func() any { b := make([]byte, blockSize); return &b }}

// readChecked reads len(dst) bytes of e's value at from into dst, every
// byte checked: the whole blocks of the range are read straight into dst
// and checked there; a block the range covers only in part is read whole
// into a scratch buffer, checked, and the part copied out, so dst never
// holds a byte that was not checked.
func (e *entry) readChecked(dst []byte, from int64) error {
	to := from + int64(len(dst))
	blockEnd := func(b int64) int64 { return min((b+1)*blockSize, e.size) }
	for pos := from; pos < to; {
		b := pos / blockSize
		start, end := b*blockSize, blockEnd(b)
		if pos == start && end <= to {
			last := b
			for blockEnd(last) < to && blockEnd(last+1) <= to {
				last++
			}
			n := blockEnd(last) - pos
			if err := e.read(dst[pos-from:pos-from+n], pos, true); err != nil {
				return err
			}
			pos += n
			continue
		}
		buf := scratchBlocks.Get().(*[]byte)
		blk := (*buf)[:end-start]
		err := e.read(blk, start, true)
		if err == nil {
			copy(dst[pos-from:], blk[pos-start:min(end, to)-start])
		}
		scratchBlocks.Put(buf)
		if err != nil {
			return err
		}
		pos = min(end, to)
	}
	return nil
}

// read reads len(b) bytes of e's value at off into b. With verify, off
// must start a block and b must end one (or the value), and every block
// is checked against its checksum.
func (e *entry) read(b []byte, off int64, verify bool) error {
	if len(b) == 0 {
		return nil
	}
	n, err := e.file.f.ReadAt(b, e.valueOff+off)
	if n < len(b) {
		return fmt.Errorf("walstore: %q: read %d of %d bytes at %d of %s: %v: %w", e.key, n, len(b), off, e.file.path, err, objectstore.ErrCorrupt)
	}
	if verify && !checkBlocks(b, int(off/blockSize), e.sums) {
		return fmt.Errorf("walstore: %q at version %x: value bytes at %d fail their checksum (%s): %w", e.key, e.version, off, e.file.path, objectstore.ErrCorrupt)
	}
	return nil
}

// Put implements objectstore.ObjectStore.
func (s *Store) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	if err := s.check(ctx, key); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	if opts.Mode == objectstore.PutUpdate && opts.Version.IsZero() {
		return objectstore.UpdateVersion{}, fmt.Errorf("walstore: PutUpdate without a version: %w", objectstore.ErrInvalidArgument)
	}
	if len(data) > maxValueBytes {
		return objectstore.UpdateVersion{}, fmt.Errorf("walstore: object of %d bytes exceeds %d: %w", len(data), maxValueBytes, objectstore.ErrInvalidArgument)
	}
	s.writeMu.Lock()
	if s.closed.Load() {
		s.writeMu.Unlock()
		return objectstore.UpdateVersion{}, objectstore.ErrClosed
	}
	cur, _ := s.index.Get(&entry{key: key}) // writeMu: no writer changes the index under us
	switch {
	case opts.Mode == objectstore.PutCreate && cur != nil:
		s.writeMu.Unlock()
		return objectstore.UpdateVersion{}, fmt.Errorf("walstore: %q: %w", key, objectstore.ErrAlreadyExists)
	case opts.Mode == objectstore.PutUpdate && (cur == nil || !versionOf(cur.version).Equal(opts.Version)):
		s.writeMu.Unlock()
		return objectstore.UpdateVersion{}, fmt.Errorf("walstore: %q: %w", key, objectstore.ErrPreconditionFailed)
	}
	e, seq, err := s.appendLocked(recPut, key, data, 0, time.Now().UnixNano())
	if err != nil {
		s.writeMu.Unlock()
		return objectstore.UpdateVersion{}, err
	}
	s.publish(e, cur)
	s.writeMu.Unlock()
	s.stats.puts.Add(1)
	if cur != nil {
		s.kickReclaim()
	}
	if opts.DeferSync || mutant == "no-flush-wait" {
		// Durable with the next flush, at the latest the one a later
		// Put without DeferSync waits for: the log is ordered.
		return versionOf(e.version), nil
	}
	if err := s.flush.wait(ctx, seq); err != nil {
		return objectstore.UpdateVersion{}, fmt.Errorf("walstore: put %q: outcome unknown: %w", key, err)
	}
	return versionOf(e.version), nil
}

// Delete implements objectstore.ObjectStore.
func (s *Store) Delete(ctx context.Context, key string, ifVersion *objectstore.UpdateVersion) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	s.writeMu.Lock()
	if s.closed.Load() {
		s.writeMu.Unlock()
		return objectstore.ErrClosed
	}
	cur, _ := s.index.Get(&entry{key: key})
	switch {
	case cur == nil:
		s.writeMu.Unlock()
		return fmt.Errorf("walstore: %q: %w", key, objectstore.ErrNotFound)
	case ifVersion != nil && !versionOf(cur.version).Equal(*ifVersion):
		s.writeMu.Unlock()
		return fmt.Errorf("walstore: %q: %w", key, objectstore.ErrPreconditionFailed)
	}
	_, seq, err := s.appendLocked(recTombstone, key, nil, 0, time.Now().UnixNano())
	if err != nil {
		s.writeMu.Unlock()
		return err
	}
	s.publish(nil, cur)
	s.writeMu.Unlock()
	s.stats.deletes.Add(1)
	s.kickReclaim()
	if err := s.flush.wait(ctx, seq); err != nil {
		return fmt.Errorf("walstore: delete %q: outcome unknown: %w", key, err)
	}
	return nil
}

// List implements objectstore.ObjectStore. It lists the index as it is
// when List is called.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[objectstore.ObjectInfo, error] {
	return func(yield func(objectstore.ObjectInfo, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(objectstore.ObjectInfo{}, err)
			return
		}
		if s.closed.Load() {
			yield(objectstore.ObjectInfo{}, objectstore.ErrClosed)
			return
		}
		var infos []objectstore.ObjectInfo
		s.mu.RLock()
		s.index.AscendGreaterOrEqual(&entry{key: prefix}, func(e *entry) bool {
			if !strings.HasPrefix(e.key, prefix) {
				return false
			}
			infos = append(infos, e.info())
			return true
		})
		s.mu.RUnlock()
		for _, info := range infos {
			if err := ctx.Err(); err != nil {
				yield(objectstore.ObjectInfo{}, err)
				return
			}
			if !yield(info, nil) {
				return
			}
		}
	}
}

// appendLocked writes one record at the end of the active log (sealing it
// first if the record does not fit) and returns the entry it makes. The
// record's sequence number is its version unless version is given (a
// copy keeps the version it copies). A failed write is sticky.
// s.writeMu must be held.
func (s *Store) appendLocked(kind uint8, key string, value []byte, version uint64, modTime int64) (*entry, uint64, error) {
	if err := s.flush.failure(); err != nil {
		return nil, 0, err
	}
	n := recordLen(len(key), uint64(len(value)))
	if s.active.off+n > s.active.limit && s.active.off > fileHeaderSize || s.oldLocked() {
		if err := s.sealLocked(n); err != nil {
			return nil, 0, err
		}
	}
	seq := s.seq + 1
	if version == 0 {
		version = seq
	}
	h := recordHead{kind: kind, seq: seq, synced: s.flush.durable.Load(), version: version, modTime: modTime}
	f := s.active
	f.zero.Claim(f.off + n)
	if err := s.writeRecord(f, h, key, value); err != nil {
		// A failed write (ENOSPC, EDQUOT: the file had to grow) wrote at
		// most a prefix of the record, past every record there is. Cut it
		// off and go on: nothing was sequenced, nothing earlier is at
		// stake (unlike a failed fdatasync), and a later write takes the
		// same place once there is room. A prefix a crash keeps is a torn
		// tail; a seal syncs the cut before the file can stop being the
		// newest.
		werr := fmt.Errorf("walstore: write to %s: %w", f.path, err)
		if terr := f.f.Truncate(f.off); terr != nil {
			s.flush.fail(fmt.Errorf("%w; cutting the partial record off failed too: %w", werr, terr))
			return nil, 0, s.flush.failure()
		}
		return nil, 0, werr
	}
	e := &entry{key: key, version: version, modTime: modTime, size: int64(len(value)), file: f, off: f.off,
		valueOff: f.off + n - int64(len(value))}
	if kind == recPut {
		// The checksums writeRecord just encoded into s.hdr.
		tbl := s.hdr[recordHeaderSize+len(key):]
		e.sums = make([]uint32, numBlocks(uint64(len(value))))
		for i := range e.sums {
			e.sums[i] = binary.BigEndian.Uint32(tbl[4*i:])
		}
	}
	f.off += n
	f.end.Store(f.off)
	s.seq = seq
	f.zero.Advance(f.off)
	s.flush.written(seq, f)
	crashPoint("written")
	return e, seq, nil
}

// smallRecord: a record up to this size is written with one pwrite of a
// copy; a larger one as its header (key, checksums) and then its value,
// without copying the value.
const smallRecord = 64 << 10

func (s *Store) writeRecord(f *logFile, h recordHead, key string, value []byte) error {
	if len(value) <= smallRecord {
		s.hdr = appendRecord(s.hdr[:0], h, key, value)
		_, err := f.f.WriteAt(s.hdr, f.off)
		return err
	}
	s.hdr = appendHead(s.hdr[:0], h, key, value)
	if _, err := f.f.WriteAt(s.hdr, f.off); err != nil {
		return err
	}
	_, err := f.f.WriteAt(value, f.off+int64(len(s.hdr)))
	return err
}

// publish makes e (nil: none) the live entry of its key in place of cur
// (nil: none) and keeps every file's live count. s.writeMu must be held.
func (s *Store) publish(e, cur *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur != nil {
		cur.file.live.Add(-cur.recLen())
		cur.file.liveObjects.Add(-1)
		if e == nil {
			s.index.Delete(cur)
		}
	}
	if e != nil {
		e.file.live.Add(e.recLen())
		e.file.liveObjects.Add(1)
		s.index.ReplaceOrInsert(e)
	}
}

// oldLocked reports whether the active file is due to be sealed for its
// age (Options.SealAfter). s.writeMu must be held.
func (s *Store) oldLocked() bool {
	return s.active.off >= fileHeaderSize+sealMinBytes && time.Since(s.active.created) >= s.opts.SealAfter
}

// sealLocked makes every record of the active file durable and starts the
// next one, so that only the newest file can ever hold a record that is
// not durable (recovery relies on it). need is the record that did not
// fit. s.writeMu must be held.
func (s *Store) sealLocked(need int64) error {
	old := s.active
	if mutant != "seal-no-sync" {
		if err := fdatasync(old.f); err != nil {
			s.flush.fail(fmt.Errorf("walstore: seal %s: %w", old.path, err))
			return s.flush.failure()
		}
		s.flush.markDurable(s.seq)
	}
	crashPoint("sealed")
	nf, err := createFile(s.dir, old.num+1, s.seq+1, max(s.opts.FileBytes, need+fileHeaderSize), s.opts.PreallocBytes)
	if err != nil {
		// No room for the next file (createFile removed what it made):
		// the old one stays active, durable, and the next write seals
		// again.
		return err
	}
	crashPoint("created")
	old.sealed = time.Now()
	s.mu.Lock()
	s.files = append(s.files, nf)
	s.mu.Unlock()
	s.active = nf
	// Give back the zeros preallocated past the sealed file's last record
	// (up to two chunks), off the write path. Nothing is synced: past the
	// last record a file holds zeros or nothing, and recovery takes both.
	old.acquire() // it is in s.files
	s.trims.Add(1)
	go func() {
		defer s.trims.Done()
		defer old.release()
		old.zero.Wait()
		_ = old.f.Truncate(old.off)
	}()
	s.kickReclaim()
	return nil
}

// Close makes every written record durable and closes the store. Reads in
// flight finish first on the files they hold.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.cancel()
	close(s.stop)
	s.wg.Wait()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.trims.Wait()
	err := s.flush.failure()
	if err == nil && s.flush.durable.Load() < s.seq {
		if err = fdatasync(s.active.f); err == nil {
			s.flush.markDurable(s.seq)
		}
	}
	s.flush.closeWaiters()
	s.mu.Lock()
	files := s.files
	s.files = nil
	s.mu.Unlock()
	for _, f := range files {
		f.zero.Wait()
		f.release()
	}
	if cerr := s.lock.Close(); err == nil {
		err = cerr
	}
	return err
}

// Stats is a snapshot of the store's counters.
type Stats struct {
	Files        int
	FileBytes    int64 // bytes written to the log files (records and headers)
	LiveBytes    int64 // bytes of the live objects' records
	Objects      int
	Puts         int64
	Deletes      int64
	Flushes      int64
	Copies       int64 // records copied forward out of old files
	FilesDeleted int64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{Files: len(s.files), Objects: s.index.Len(), Puts: s.stats.puts.Load(), Deletes: s.stats.deletes.Load(),
		Flushes: s.flush.flushes.Load(), Copies: s.stats.copies.Load(), FilesDeleted: s.stats.filesDeleted.Load()}
	for _, f := range s.files {
		st.FileBytes += f.written()
		st.LiveBytes += f.live.Load()
	}
	return st
}
