package walstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/internal/filesync"
)

// logFile is one log file. Only the writer (under Store.writeMu) appends
// to the active one; every file is read concurrently by pread.
type logFile struct {
	num      uint64
	path     string
	f        *os.File
	firstSeq uint64
	limit    int64 // the writer seals the file before a record would cross it
	zero     *filesync.Filler

	off     int64        // next record's offset (writer only)
	end     atomic.Int64 // off, for readers of the counters
	created time.Time    // when this process created it (zero: found at Open)
	sealed  time.Time    // when the writer moved on (zero: active, or sealed before this process)

	live        atomic.Int64 // bytes of the live objects' records in this file
	liveObjects atomic.Int64

	// refs: one for the store's files list plus one per read in flight.
	// The file is closed when it drops to zero.
	refs      atomic.Int64
	closeOnce sync.Once
}

func fileName(num uint64) string { return fmt.Sprintf("%016x.log", num) }

func parseFileName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, ".log")
	if !ok || len(hex) != 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(hex, 16, 64)
	return n, err == nil && n > 0
}

// createFile makes a new, durable, empty log file (its header
// fdatasync'd, then the directory entry synced) and starts zero-filling
// it.
func createFile(dir string, num, firstSeq uint64, limit, chunk int64) (*logFile, error) {
	path := filepath.Join(dir, fileName(num))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		// Only an earlier failed create can have left it (Open replays
		// every file and starts past the last): it never held a record.
		if err = os.Remove(path); err == nil {
			f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("walstore: create %s: %w", path, err)
	}
	err = func() error {
		if _, err := f.WriteAt(fileHeader(num, firstSeq), 0); err != nil {
			return err
		}
		if err := fdatasync(f); err != nil {
			return err
		}
		return filesync.SyncDir(dir)
	}()
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("walstore: create %s: %w", path, err)
	}
	l := newLogFile(f, path, num, firstSeq, fileHeaderSize, limit, chunk)
	l.created = time.Now()
	l.zero.Advance(l.off)
	return l, nil
}

func newLogFile(f *os.File, path string, num, firstSeq uint64, off, limit, chunk int64) *logFile {
	l := &logFile{num: num, path: path, f: f, firstSeq: firstSeq, limit: limit, off: off,
		zero: filesync.New(f, off, chunk, limit, fdatasync)}
	l.end.Store(off)
	l.refs.Store(1)
	return l
}

func (l *logFile) written() int64 { return l.end.Load() }

// acquire takes a reference for a read. It is called only while the file
// is still in the store's list (under Store.mu), so never after the list's
// own reference is gone.
func (l *logFile) acquire() { l.refs.Add(1) }

// release drops a reference; the last one closes the file.
func (l *logFile) release() {
	if l.refs.Add(-1) == 0 {
		l.closeOnce.Do(func() {
			l.zero.Wait()
			_ = l.f.Close()
		})
	}
}

func fdatasync(f *os.File) error { return filesync.Fdatasync(f) }
