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
	// committer or zero-filled (synced once the fill finishes): the filler
	// only ever writes at or past it, so it can never overwrite a frame.
	alloc       int64
	filling     chan struct{} // non-nil while a piece is being zero-filled; closed when it is
	fillRunning bool          // a fill goroutine runs
	fillBroke   bool          // a fill failed: stop filling, appends grow the file
	wg          sync.WaitGroup
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
	l := &logFile{f: f, path: path, gen: gen, chunk: chunk, off: fileHeaderSize, alloc: fileHeaderSize}
	err = func() error {
		if _, err := f.WriteAt(fileHeader(logMagic, gen), 0); err != nil {
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
	l.maybeFill()
	return l, nil
}

// append writes n frames at the end of the log with one write and makes
// them durable with one fdatasync.
func (l *logFile) append(frame []byte, n int) error {
	end := l.off + int64(len(frame))
	l.mu.Lock()
	for end > l.alloc && l.filling != nil {
		// The frame would reach into the piece being zero-filled: wait
		// for that write rather than race it.
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
	l.seq += uint64(n)
	l.maybeFill()
	return nil
}

// fillPiece is how much one zero-filling write covers. The committer waits
// for a piece in progress only if its frame reaches into it, so pieces are
// small; the chunk's fdatasync comes once, after its last piece.
const fillPiece = 1 << 20

// maybeFill starts a zero-fill of the next chunk when less than a chunk of
// zeros is left ahead of the writer.
func (l *logFile) maybeFill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.chunk <= 0 || l.fillBroke || l.fillRunning || l.alloc-l.off >= l.chunk {
		return
	}
	l.fillRunning = true
	target := l.alloc + l.chunk
	l.wg.Add(1)
	go l.fill(target)
}

// fill zero-fills up to target, a piece at a time, then syncs. A commit
// may write into zeros not yet synced (its own fdatasync then carries the
// size too: slower, still correct); the filler never writes below alloc,
// so it never overwrites a frame.
func (l *logFile) fill(target int64) {
	defer l.wg.Done()
	zeros := make([]byte, fillPiece)
	var err error
	for err == nil {
		l.mu.Lock()
		from := l.alloc
		if from >= target {
			l.mu.Unlock()
			break
		}
		n := min(int64(fillPiece), target-from)
		done := make(chan struct{})
		l.filling = done
		l.mu.Unlock()
		_, err = l.f.WriteAt(zeros[:n], from)
		l.mu.Lock()
		if err == nil && from+n > l.alloc {
			l.alloc = from + n
		}
		l.filling = nil
		l.mu.Unlock()
		close(done)
	}
	if err == nil {
		err = fdatasync(l.f)
	}
	l.mu.Lock()
	l.fillBroke = err != nil
	l.fillRunning = false
	l.mu.Unlock()
}

// close waits for a running fill and closes the file.
func (l *logFile) close() error {
	l.wg.Wait()
	return l.f.Close()
}
