package walstore

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/nereusstream/nereus-go/objectstore"
)

// recover rebuilds the index from every log file, oldest first, cuts the
// torn tail off the newest one and starts a new file for appends.
func (s *Store) recover() error {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("walstore: open %s: %w", s.dir, err)
	}
	var nums []uint64
	for _, de := range des {
		if n, ok := parseFileName(de.Name()); ok {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	for i := 1; i < len(nums); i++ {
		// Files go oldest first only, so the ones left are contiguous.
		if nums[i] != nums[i-1]+1 {
			return fmt.Errorf("walstore: %s: log file %s is missing: %w", s.dir, fileName(nums[i-1]+1), objectstore.ErrCorrupt)
		}
	}
	var lastSeq uint64 // the last record's sequence number so far
	for i, num := range nums {
		last := i == len(nums)-1
		f, seq, err := s.replayFile(num, last, lastSeq, i == 0)
		if err != nil {
			return err
		}
		if f == nil { // a newest file that never got its header
			nums = nums[:i]
			break
		}
		s.files = append(s.files, f)
		lastSeq = seq
	}
	next := uint64(1)
	if len(nums) > 0 {
		next = nums[len(nums)-1] + 1
	}
	f, err := createFile(s.dir, next, lastSeq+1, s.opts.FileBytes, s.opts.PreallocBytes)
	if err != nil {
		return err
	}
	s.files = append(s.files, f)
	s.active = f
	s.seq = lastSeq
	s.flush.durable.Store(lastSeq)
	return nil
}

// replayFile applies one file's records to the index and returns the
// file (opened for reads) and its last record's sequence number (prev
// when it has none). prev is the sequence number the file's records must
// follow; first says no older file is left to check that against.
//
// Only the newest file can hold records that are not durable (the writer
// syncs a file before it starts the next). In it, the first record that
// fails its checks is the torn tail of writes never acknowledged — unless
// an intact record after it says, by its synced field, that the damaged
// one was already durable when it was written: then it is corruption (of
// its header: Open fails; of its value only: the object is kept and reads
// of it fail with ErrCorrupt, as they do for a damaged value anywhere). The
// torn tail is cut off (the file truncated and synced) so that it can never
// be mistaken for corruption once a newer file exists. In any other file,
// everything after the last record must be zeros.
func (s *Store) replayFile(num uint64, last bool, prev uint64, first bool) (*logFile, uint64, error) {
	path := filepath.Join(s.dir, fileName(num))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("walstore: %w", err)
	}
	hnum, firstSeq, herr := parseFileHeader(data)
	if herr != nil && last && allZero(data[min(len(data), fileHeaderSize):]) {
		// A crash while the file was being created: nothing is written
		// to a file before its header is durable.
		if err := os.Remove(path); err != nil {
			return nil, 0, fmt.Errorf("walstore: %w", err)
		}
		return nil, prev, nil
	}
	switch {
	case herr != nil:
		return nil, 0, fmt.Errorf("walstore: %s: %v: %w", path, herr, objectstore.ErrCorrupt)
	case hnum != num:
		return nil, 0, fmt.Errorf("walstore: %s holds file %d: %w", path, hnum, objectstore.ErrCorrupt)
	case !first && firstSeq != prev+1:
		return nil, 0, fmt.Errorf("walstore: %s starts at sequence %d, want %d: %w", path, firstSeq, prev+1, objectstore.ErrCorrupt)
	}
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("walstore: %w", err)
	}
	lf := newLogFile(fh, path, num, firstSeq, fileHeaderSize, int64(len(data)), 0)
	seq := firstSeq - 1
	off := int64(fileHeaderSize)
	for {
		h, key, sums, ok := decodeHead(data[off:])
		end := off + int64(h.length)
		if ok && (h.seq != seq+1 || end > int64(len(data))) {
			ok = false
		}
		if !ok {
			break
		}
		if last && !checkBlocks(data[end-int64(h.valueLen):end], 0, sums) && !laterRecord(data, end, h.seq) {
			// An intact header over a value not all on disk: the torn
			// tail. (With a later record saying this one was durable,
			// the value is damaged on the medium instead: the object is
			// kept, and every read of it says it is corrupt. Older files
			// are checked by their reads alone.)
			break
		}
		s.replay(lf, h, key, sums, off)
		seq = h.seq
		off = end
	}
	lf.off = off
	lf.end.Store(off)
	if allZero(data[off:]) {
		if last && off < int64(len(data)) {
			// Never appended to again: give back the zeros preallocated
			// past its end.
			return lf, seq, truncateTo(lf, off)
		}
		return lf, seq, nil
	}
	if !last {
		lf.release()
		return nil, 0, fmt.Errorf("walstore: %s: damaged record at %d (not the newest file): %w", path, off, objectstore.ErrCorrupt)
	}
	if laterRecord(data, off+1, seq+1) {
		lf.release()
		return nil, 0, fmt.Errorf("walstore: %s: damaged record at %d before an intact one written after it was durable: %w", path, off, objectstore.ErrCorrupt)
	}
	return lf, seq, truncateTo(lf, off)
}

// replay applies one intact record at off of f to the index.
func (s *Store) replay(f *logFile, h recordHead, key string, sums []uint32, off int64) {
	cur, _ := s.index.Get(&entry{key: key})
	var e *entry
	if h.kind == recPut {
		e = &entry{key: key, version: h.version, modTime: h.modTime, size: int64(h.valueLen), file: f, off: off,
			valueOff: off + int64(h.length) - int64(h.valueLen), sums: sums}
	}
	s.publish(e, cur)
}

// laterRecord reports whether an intact record that claims every record
// up to seq was durable when it was written starts anywhere in b[from:].
// Runs of zeros are skipped: a record header is never all zeros.
func laterRecord(b []byte, from int64, seq uint64) bool {
	for p := from; p+recordHeaderSize <= int64(len(b)); p++ {
		if b[p] == 0 {
			q := p
			for q < int64(len(b)) && b[q] == 0 {
				q++
			}
			if q == int64(len(b)) {
				return false
			}
			p = max(p, q-recordHeaderSize+1)
		}
		// The claim first: only a record that says seq was durable
		// matters, and its fields are cheap; the checksum (up to the
		// rest of the file for hostile bytes) only then.
		if h, ok := peekHead(b[p:]); !ok || h.synced < seq || h.synced >= h.seq {
			continue
		}
		if _, _, _, ok := decodeHead(b[p:]); ok {
			return true
		}
	}
	return false
}

// truncateTo cuts a file at off (a torn tail, or preallocated zeros) and
// syncs it.
func truncateTo(f *logFile, off int64) error {
	err := f.f.Truncate(off)
	if err == nil {
		err = fdatasync(f.f)
	}
	if err != nil {
		f.release()
		return fmt.Errorf("walstore: cut %s at %d: %w", f.path, off, err)
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
