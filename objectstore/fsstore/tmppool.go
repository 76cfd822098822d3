//go:build unix

package fsstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Off-path file-system work.
//
// Two pieces of a Put's file-system work are not needed for its durability
// and are moved off the caller's path by one background goroutine per open
// Store (the housekeeper):
//
//   - Creating the temp file. Creating an inode is the expensive part of a
//     small Put on some file systems (ext4 without a journal scans the
//     recently freed inodes of the block group on every allocation; ~0.5 ms
//     of CPU per create was measured on the shared CI machine). The
//     housekeeper keeps a few empty temp files created and open in this
//     Store's temp directory; writeTemp takes one and writes the object into
//     it, so a Put is write + fdatasync + rename + directory fsync.
//   - Freeing the inode a Put replaced or a Delete unlinked, when it is not
//     recycled (recycle.go: normally it is, and nothing is freed). The last close
//     of an unlinked inode frees its blocks (a synchronous discard with the
//     `discard` mount option) and its inode; without an open descriptor that
//     happens inside rename(2)/unlink(2), under the key's shard lock. Put and
//     Delete open the file they replace first and hand the descriptor to the
//     housekeeper after the directory fsync, which closes it.
//
// Why neither weakens C1–C4 (the argument the power-cut tests check, see
// powercut_test.go's crash points):
//   - A pooled file is created O_EXCL by this Store in its own temp directory
//     (C3: never listed, never read, removed with the directory at Close or
//     by the next Open after a crash) and is handed to exactly one writeTemp,
//     which writes the whole object from offset 0 and fdatasyncs it before
//     the rename, exactly as a file created on the spot. A taken file is
//     never returned to the pool: on any error it is closed and removed. The
//     durability of the temp file's own directory entry never mattered: what
//     must survive is the final name, made durable by the directory fsync
//     after the rename (C2), and the inode's data and length, made durable by
//     the fdatasync before it (C1). Creating the file earlier changes neither.
//   - Holding the replaced inode open only delays freeing storage that no key
//     names any more; the rename and the directory fsync, which are what a
//     crash can observe, are unchanged. After a crash the held inode is an
//     orphan exactly as an inode freed but not yet written back would be.
//     Readers that opened the old version keep reading it, as they already
//     could.
const tmpPoolSize = 4

// releaseQueue bounds the descriptors waiting to be closed; past it, the
// caller closes its own (the old, on-path cost) rather than wait.
const releaseQueue = 256

type housekeeper struct {
	dir string
	seq *atomic.Uint64

	mu       sync.Mutex
	free     []pooledTemp // created O_EXCL, empty, never handed out
	recycled []pooledTemp // retired inodes nobody else has open (recycle.go)
	// recycledBytes is the sum of the recycled files' sizes (disk space the
	// pool holds).
	recycledBytes int64

	misses  atomic.Int64 // temp files created on the caller's path (pool empty)
	creates atomic.Int64 // temp files created, by the housekeeper or on the spot
	reuses  atomic.Int64 // Puts written into a recycled inode

	// maxRecycled bounds h.recycled; retired inodes past it are freed.
	maxRecycled int

	kick    chan struct{} // refill wanted (capacity 1)
	release chan *os.File // replaced or unlinked inodes to close
	retire  chan retired  // inodes moved into the temp directory (recycle.go)
	stop    chan struct{}
	done    chan struct{}
}

type pooledTemp struct {
	path string
	f    *os.File
	size int64 // bytes already in the file: 0 for a created one
}

func startHousekeeper(dir string, seq *atomic.Uint64) *housekeeper {
	h := newHousekeeper(dir, seq)
	go h.run()
	return h
}

func newHousekeeper(dir string, seq *atomic.Uint64) *housekeeper {
	limit := recycleLimit
	if limit < 0 {
		limit = defaultRecycleLimit()
	}
	h := &housekeeper{
		dir:         dir,
		seq:         seq,
		kick:        make(chan struct{}, 1),
		release:     make(chan *os.File, releaseQueue),
		retire:      make(chan retired, releaseQueue),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		maxRecycled: limit,
	}
	h.kick <- struct{}{}
	return h
}

// tempPath returns a name in the Store's temp directory never used before.
func (h *housekeeper) tempPath() string {
	return filepath.Join(h.dir, fmt.Sprintf("%016x.tmp", h.seq.Add(1)))
}

// createTemp creates a fresh, empty temp file in the Store's temp directory.
func (h *housekeeper) createTemp() (pooledTemp, error) {
	path := h.tempPath()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return pooledTemp{}, fmt.Errorf("fsstore: create temp file: %w", err)
	}
	h.creates.Add(1)
	crashPoint("temp-created")
	return pooledTemp{path: path, f: f}, nil
}

// take hands out one temp file for an object file of need bytes: a
// recycled inode when there is one (the best fit, see recycle.go), else an
// empty pooled one, else one created now (the pool is refilled in the
// background either way). The file's first t.size bytes are old data the
// caller must overwrite or cut off.
func (h *housekeeper) take(need int64) (pooledTemp, error) {
	h.mu.Lock()
	if i := bestFit(h.recycled, need); i >= 0 {
		t := h.recycled[i]
		h.recycledBytes -= t.size
		last := len(h.recycled) - 1
		h.recycled[i] = h.recycled[last]
		h.recycled[last] = pooledTemp{}
		h.recycled = h.recycled[:last]
		h.mu.Unlock()
		h.reuses.Add(1)
		return t, nil
	}
	var t pooledTemp
	ok := len(h.free) > 0
	if ok {
		t = h.free[len(h.free)-1]
		h.free[len(h.free)-1] = pooledTemp{}
		h.free = h.free[:len(h.free)-1]
	}
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
	if ok {
		return t, nil
	}
	h.misses.Add(1)
	return h.createTemp()
}

// closeLater closes f off the caller's path (see the package comment on
// off-path work); f may be nil.
func (h *housekeeper) closeLater(f *os.File) {
	if f == nil {
		return
	}
	select {
	case h.release <- f:
	default:
		_ = f.Close()
	}
}

func (h *housekeeper) run() {
	defer close(h.done)
	for {
		select {
		case <-h.stop:
			return
		case f := <-h.release:
			closeReleased(f)
		case r := <-h.retire:
			h.adopt(r)
		case <-h.kick:
			h.refill()
		}
	}
}

// refill tops the pool up, closing queued descriptors in between so they do
// not wait behind a burst of creates.
func (h *housekeeper) refill() {
	for {
		select {
		case <-h.stop:
			return
		case f := <-h.release:
			closeReleased(f)
			continue
		case r := <-h.retire:
			h.adopt(r)
			continue
		default:
		}
		h.mu.Lock()
		full := len(h.free) >= tmpPoolSize
		h.mu.Unlock()
		if full {
			return
		}
		t, err := h.createTemp()
		if err != nil {
			return // take creates on the spot and reports the error there
		}
		h.mu.Lock()
		h.free = append(h.free, t)
		h.mu.Unlock()
	}
}

func closeReleased(f *os.File) {
	_ = f.Close()
	crashPoint("released")
}

// shutdown stops the goroutine and closes every descriptor it held; the
// pooled files themselves go with the temp directory (tmpOwner.release).
func (h *housekeeper) shutdown() {
	close(h.stop)
	<-h.done
drain:
	for {
		select {
		case f := <-h.release:
			_ = f.Close()
		case <-h.retire: // removed with the temp directory
		default:
			break drain
		}
	}
	h.mu.Lock()
	for _, t := range h.free {
		_ = t.f.Close()
	}
	for _, t := range h.recycled {
		_ = t.f.Close()
	}
	h.free, h.recycled, h.recycledBytes = nil, nil, 0
	h.mu.Unlock()
}

// crashHook, when set (only by export_test.go, in the power-cut test's
// writer process), is called at each named step of the publication
// protocol so the test can kill the process exactly there. Production code
// never sets it.
var crashHook func(step string)

func crashPoint(step string) {
	if crashHook != nil {
		crashHook(step)
	}
}
