package logstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// logFile is the log being appended to. Only the committer appends; the
// zero-filler goroutine it starts extends the file ahead of it.
//
// Why zero-fill: appending past a file's end makes every fdatasync also
// write the inode (the new size), a second journal write per commit.
// Writing into blocks that already hold synced zeros changes no metadata,
// so a commit's flush is the data alone (measured on this machine's ext4:
// 256-byte appends + fdatasync ≈ 0.47–0.77 ms growing the file against
// 0.21–0.27 ms into a zero-filled one, docs/notes/issue-15-ops.md Session
// 12). fallocate would not do: it leaves unwritten extents, whose first
// write is again a metadata change.
type logFile struct {
	f     *os.File
	path  string
	gen   uint64
	chunk int64

	// Committer only.
	off int64  // next frame's offset
	seq uint64 // last frame's sequence number

	mu sync.Mutex
	// alloc is the end of the region that is either written by the
	// committer or zero-filled and synced: the filler only ever writes at
	// or past it, so it can never overwrite a frame.
	alloc     int64
	filling   chan struct{} // non-nil while a fill runs; closed when it ends
	fillBroke bool          // a fill failed: stop filling, appends grow the file
	wg        sync.WaitGroup
}

func logName(gen uint64) string  { return fmt.Sprintf("log-%016x", gen) }
func snapName(gen uint64) string { return fmt.Sprintf("snap-%016x", gen) }

// createLog makes a new, durable, empty log: header, the first chunk of
// zeros, fdatasync, then the directory entry synced.
func createLog(dir string, gen uint64, chunk int64) (*logFile, error) {
	path := filepath.Join(dir, logName(gen))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	l := &logFile{f: f, path: path, gen: gen, chunk: chunk, off: fileHeaderSize}
	err = func() error {
		buf := make([]byte, fileHeaderSize+chunk)
		copy(buf, fileHeader(logMagic, gen))
		if _, err := f.WriteAt(buf, 0); err != nil {
			return err
		}
		if err := fdatasync(f); err != nil {
			return err
		}
		return syncDir(dir)
	}()
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("logstore: create %s: %w", path, err)
	}
	l.alloc = fileHeaderSize + chunk
	return l, nil
}

// append writes one frame at the end of the log and makes it durable.
func (l *logFile) append(frame []byte) error {
	end := l.off + int64(len(frame))
	l.mu.Lock()
	for end > l.alloc && l.filling != nil {
		// The frame would reach into the region being zero-filled: wait
		// for the filler rather than race it.
		ch := l.filling
		l.mu.Unlock()
		<-ch
		l.mu.Lock()
	}
	if end > l.alloc {
		l.alloc = end // growing the file; the filler starts past it
	}
	l.mu.Unlock()
	if _, err := l.f.WriteAt(frame, l.off); err != nil {
		return err
	}
	if err := fdatasync(l.f); err != nil {
		return err
	}
	l.off = end
	l.seq++
	l.maybeFill()
	return nil
}

// maybeFill starts a zero-fill of the next chunk when less than a chunk of
// zeros is left ahead of the writer.
func (l *logFile) maybeFill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.chunk <= 0 || l.fillBroke || l.filling != nil || l.alloc-l.off >= l.chunk {
		return
	}
	from := l.alloc
	done := make(chan struct{})
	l.filling = done
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		_, err := l.f.WriteAt(make([]byte, l.chunk), from)
		if err == nil {
			err = fdatasync(l.f)
		}
		l.mu.Lock()
		if err != nil {
			l.fillBroke = true
		} else if from+l.chunk > l.alloc {
			l.alloc = from + l.chunk
		}
		l.filling = nil
		l.mu.Unlock()
		close(done)
	}()
}

// close waits for a running fill and closes the file.
func (l *logFile) close() error {
	l.wg.Wait()
	return l.f.Close()
}
