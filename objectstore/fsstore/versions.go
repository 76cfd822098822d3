//go:build unix

package fsstore

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Versions.
//
// A version is the generation number written into an object's header. All
// generations of one store come from a single store-wide counter, so a
// generation is never handed out twice: not to two processes, not after a
// crash, and not to a key that was deleted and recreated (no per-key
// tombstones needed). Versions are never derived from content, so writing
// identical bytes again still yields a new version.
//
// The counter is persisted as a high-water mark in meta/versions. A Store
// reserves a block of versionBlock generations at a time: under an exclusive
// flock on that file it reads the mark, writes mark+versionBlock, fdatasyncs,
// and only then hands out generations from (mark, mark+versionBlock]. After a
// crash the unused rest of a block is skipped, never reused.
//
// The file holds two slots of 16 bytes (mark uint64, CRC32C uint32, 4 zero
// bytes) that normally hold the same mark. A reservation writes slot 0,
// syncs, writes slot 1, syncs: a torn write can damage only the slot being
// written while the other still holds a mark at least as high as any
// generation in use, and bit rot in one slot is covered by the other.
// Readers take the highest valid mark. Both slots invalid means the file is
// corrupt, and allocation fails rather than risk reusing generations.
const versionBlock = 1024

type versionAllocator struct {
	mu   sync.Mutex
	file *os.File
	next uint64 // next generation to hand out
	end  uint64 // last generation of the reserved block; next > end means empty
}

func openVersions(path string) (*versionAllocator, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fsstore: open version counter: %w", err)
	}
	return &versionAllocator{file: f, next: 1, end: 0}, nil
}

func (a *versionAllocator) close() error { return a.file.Close() }

// allocate returns a fresh generation, reserving a new block when needed.
func (a *versionAllocator) allocate() (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next > a.end {
		lo, hi, err := a.reserve()
		if err != nil {
			return 0, err
		}
		a.next, a.end = lo, hi
	}
	g := a.next
	a.next++
	return g, nil
}

func encodeSlot(mark uint64) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, mark)
	binary.LittleEndian.PutUint32(b[8:], crc(b[:8]))
	return b
}

func decodeSlot(b []byte) (uint64, bool) {
	if len(b) < 16 || crc(b[:8]) != binary.LittleEndian.Uint32(b[8:]) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b), true
}

// initVersions creates the counter file with two valid zero slots if it does
// not exist yet. It is written to a temp file, synced and then linked into
// place, so the file is always complete; link fails if another process won
// the race, which is fine (its file is equally valid).
func initVersions(path, tmpDir string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	tmp := filepath.Join(tmpDir, "versions.init")
	if err := writeFileSync(tmp, append(encodeSlot(0), encodeSlot(0)...)); err != nil {
		return fmt.Errorf("fsstore: init version counter: %w", err)
	}
	defer func() { _ = os.Remove(tmp) }()
	if err := os.Link(tmp, path); err != nil && !os.IsExist(err) {
		return fmt.Errorf("fsstore: init version counter: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// reserve persists a new high-water mark and returns the block [lo, hi].
func (a *versionAllocator) reserve() (lo, hi uint64, err error) {
	if err := flock(a.file, lockEx); err != nil {
		return 0, 0, fmt.Errorf("fsstore: lock version counter: %w", err)
	}
	defer func() { _ = flock(a.file, lockUn) }()

	buf := make([]byte, 32)
	if _, err := a.file.ReadAt(buf, 0); err != nil {
		return 0, 0, fmt.Errorf("fsstore: read version counter %s: %w", a.file.Name(), err)
	}
	m0, ok0 := decodeSlot(buf[0:16])
	m1, ok1 := decodeSlot(buf[16:32])
	var mark uint64
	switch {
	case !ok0 && !ok1:
		return 0, 0, fmt.Errorf("fsstore: version counter %s: %w: both slots damaged; refusing to risk reusing versions", a.file.Name(), objectstore.ErrCorrupt)
	case !ok1 || (ok0 && m0 >= m1):
		mark = m0
	default:
		mark = m1
	}
	newMark := mark + versionBlock
	for _, slot := range []int64{0, 16} {
		if _, err := a.file.WriteAt(encodeSlot(newMark), slot); err != nil {
			return 0, 0, fmt.Errorf("fsstore: write version counter: %w", err)
		}
		if err := fdatasync(a.file); err != nil {
			return 0, 0, fmt.Errorf("fsstore: sync version counter: %w", err)
		}
	}
	return mark + 1, newMark, nil
}
