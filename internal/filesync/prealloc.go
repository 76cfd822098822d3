// Package filesync makes files' bytes and names durable: fdatasync,
// directory fsync, and a Filler that keeps a chunk of synced zeros ahead of
// the writer of an append-only file, so that the writer's fdatasync
// flushes data blocks only, never the file's size or block map.
//
// Why zero-fill: appending past a file's end makes every fdatasync also write the
// inode (the new size), a second journal write per commit. Writing into
// blocks that already hold synced zeros changes no metadata, so a
// commit's flush is the data alone (measured on this machine's ext4:
// 256-byte appends + fdatasync ≈ 0.47–0.77 ms growing the file against
// 0.21–0.27 ms into a zero-filled one, docs/notes/issue-15-ops.md Session
// 12). fallocate would not do: it leaves unwritten extents, whose first
// write is again a metadata change.
//
// It owns only those calls, the zero-filling goroutine and the boundary
// between what the writer may write and what the filler writes. It must
// never write a zero at or below a byte the writer claimed: the filler only ever writes
// at or past the claimed end, and a writer whose claim reaches into a
// piece being filled waits for that piece first.
package filesync

import (
	"os"
	"sync"
	"time"
)

// Piece is how much one zero-filling write covers. A writer waits for a
// piece in progress only if its write reaches into it, so pieces are
// small; the chunk's fdatasync comes once, after its last piece.
const Piece = 1 << 20

// retryFill: after a failed fill the next one waits this long (a full disk
// may have room again by then).
const retryFill = time.Second

// Filler zero-fills f ahead of its writer. The writer calls Claim before
// each write and Advance after it; Wait before closing f.
type Filler struct {
	f     *os.File
	chunk int64 // zeros kept ahead of the writer; 0: none
	limit int64 // never fill past this offset; 0: no limit
	sync  func(*os.File) error

	mu sync.Mutex
	// alloc is the end of the region that is either claimed by the writer
	// or zero-filled (synced once the fill finishes): the filler only ever
	// writes at or past it, so it can never overwrite the writer's bytes.
	alloc       int64
	filling     chan struct{} // non-nil while a piece is being zero-filled; closed when it is
	fillRunning bool          // a fill goroutine runs
	brokeAt     time.Time     // a fill failed then (disk full?): writes grow the file until retryFill has passed
	wg          sync.WaitGroup
}

// New returns a filler for f whose writer's bytes end at off, keeping
// chunk bytes of zeros ahead of it but never past limit (0: no limit).
// flush makes the zeros durable (fdatasync). No fill starts before the
// first Advance.
func New(f *os.File, off, chunk, limit int64, flush func(*os.File) error) *Filler {
	return &Filler{f: f, chunk: chunk, limit: limit, sync: flush, alloc: off}
}

// Claim reserves the bytes below end for the writer: it waits for a fill
// piece the range reaches into, and stops the filler from ever writing
// below end.
func (z *Filler) Claim(end int64) {
	z.mu.Lock()
	for end > z.alloc && z.filling != nil {
		// The write would reach into the piece being zero-filled: wait
		// for that write rather than race it.
		ch := z.filling
		z.mu.Unlock()
		<-ch
		z.mu.Lock()
	}
	if end > z.alloc {
		z.alloc = end // growing the file; the filler starts past it
	}
	z.mu.Unlock()
}

// Advance tells the filler the writer's bytes now end at off, and starts
// a zero-fill of the next chunk when less than a chunk of zeros is left
// ahead of it.
func (z *Filler) Advance(off int64) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.chunk <= 0 || z.fillRunning || z.alloc-off >= z.chunk || !z.brokeAt.IsZero() && time.Since(z.brokeAt) < retryFill {
		return
	}
	target := z.alloc + z.chunk
	if z.limit > 0 {
		target = min(target, z.limit)
	}
	if target <= z.alloc {
		return
	}
	z.fillRunning = true
	z.wg.Add(1)
	go z.fill(target)
}

// fill zero-fills up to target, a piece at a time, then syncs. A write
// may land in zeros not yet synced (its own fdatasync then carries the
// size too: slower, still correct).
func (z *Filler) fill(target int64) {
	defer z.wg.Done()
	zeros := make([]byte, min(Piece, target))
	var err error
	for err == nil {
		z.mu.Lock()
		from := z.alloc
		if from >= target {
			z.mu.Unlock()
			break
		}
		n := min(int64(len(zeros)), target-from)
		done := make(chan struct{})
		z.filling = done
		z.mu.Unlock()
		_, err = z.f.WriteAt(zeros[:n], from)
		z.mu.Lock()
		if err == nil && from+n > z.alloc {
			z.alloc = from + n
		}
		z.filling = nil
		z.mu.Unlock()
		close(done)
	}
	if err == nil {
		err = z.sync(z.f)
	}
	z.mu.Lock()
	z.brokeAt = time.Time{}
	if err != nil {
		z.brokeAt = time.Now()
	}
	z.fillRunning = false
	z.mu.Unlock()
}

// Wait waits for a running fill to finish.
func (z *Filler) Wait() { z.wg.Wait() }
