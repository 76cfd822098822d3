package logstore

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nereusstream/nereus-go/internal/filesync"
)

// logFile is the log being appended to. Only the committer appends; a
// filesync.Filler keeps synced zeros ahead of it (see that package for
// why: a commit's fdatasync then writes data blocks only).
type logFile struct {
	f    *os.File
	path string
	gen  uint64
	zero *filesync.Filler

	// Committer only.
	off int64  // next frame's offset
	seq uint64 // last frame's sequence number
}

func logName(gen uint64) string  { return fmt.Sprintf("log-%016x", gen) }
func snapName(gen uint64) string { return fmt.Sprintf("snap-%016x", gen) }

// createLog makes a new, durable, empty log (its header fdatasync'd, then
// the directory entry synced) and starts zero-filling its first chunk in
// the background.
func createLog(dir string, gen uint64, chunk int64) (*logFile, error) {
	path := filepath.Join(dir, logName(gen))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	l := &logFile{f: f, path: path, gen: gen, off: fileHeaderSize,
		zero: filesync.New(f, fileHeaderSize, chunk, 0, fdatasync)}
	err = func() error {
		if _, err := f.WriteAt(fileHeader(logMagic, gen), 0); err != nil {
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
		return nil, fmt.Errorf("logstore: create %s: %w", path, err)
	}
	l.zero.Advance(l.off)
	return l, nil
}

// append writes n frames at the end of the log with one write and makes
// them durable with one fdatasync.
func (l *logFile) append(frame []byte, n int) error {
	end := l.off + int64(len(frame))
	l.zero.Claim(end)
	if _, err := l.f.WriteAt(frame, l.off); err != nil {
		return err
	}
	if err := fdatasync(l.f); err != nil {
		return err
	}
	l.off = end
	l.seq += uint64(n)
	l.zero.Advance(l.off)
	return nil
}

// close waits for a running fill and closes the file.
func (l *logFile) close() error {
	l.zero.Wait()
	return l.f.Close()
}

// fdatasync flushes f's data, and its size only when the size changed: the
// log is zero-filled ahead of the writer, so a commit's flush normally
// carries no inode update.
func fdatasync(f *os.File) error { return filesync.Fdatasync(f) }
