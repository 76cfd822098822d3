package logstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nereusstream/nereus-go/metadata"
)

// errEmptyLog: the newest log never got its header (a crash while it was
// being created).
var errEmptyLog = errors.New("logstore: empty log")

// replayState is what recovery rebuilds.
type replayState struct {
	tree    *tree
	version metadata.Version
	epoch   uint64
}

func (st *replayState) apply(r logRecord) error {
	if r.kind != recEpoch {
		st.version = max(st.version, r.version)
	}
	switch r.kind {
	case recPut:
		insert(st.tree, &entry{key: string(r.key), version: r.version, value: slices.Clone(r.value)})
	case recDelete:
		remove(st.tree, string(r.key))
	case recEpoch:
		st.epoch = max(st.epoch, uint64(r.version))
	}
	return nil
}

// listDir returns the snapshot and log generations in dir, sorted, and
// removes leftover temporary files (a snapshot that was never renamed).
func listDir(dir string) (snaps, logs []uint64, err error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, de := range des {
		name := de.Name()
		if strings.HasSuffix(name, ".tmp") {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, nil, err
			}
			continue
		}
		prefix, hex, ok := strings.Cut(name, "-")
		if !ok || len(hex) != 16 {
			continue
		}
		gen, perr := strconv.ParseUint(hex, 16, 64)
		if perr != nil || gen == 0 {
			continue
		}
		switch prefix {
		case "snap":
			snaps = append(snaps, gen)
		case "log":
			logs = append(logs, gen)
		}
	}
	slices.Sort(snaps)
	slices.Sort(logs)
	return snaps, logs, nil
}

// recover rebuilds the committed state (newest snapshot, then every log
// after it), cuts the torn tail off the newest log, starts a new log and
// makes a new session epoch durable in it.
func (s *Store) recover() error {
	snaps, logs, err := listDir(s.dir)
	if err != nil {
		return fmt.Errorf("logstore: open %s: %w", s.dir, err)
	}
	st := replayState{tree: newTree()}
	var snapGen uint64
	if len(snaps) > 0 {
		snapGen = snaps[len(snaps)-1]
		if err := loadSnapshot(filepath.Join(s.dir, snapName(snapGen)), snapGen, &st); err != nil {
			return err
		}
	}
	// Logs before the snapshot are covered by it (a compaction that
	// stopped before deleting them).
	first := 0
	for first < len(logs) && logs[first] < snapGen {
		first++
	}
	replay := logs[first:]
	want := max(snapGen, 1)
	if len(replay) > 0 && replay[0] != want || len(replay) == 0 && snapGen > 0 {
		return fmt.Errorf("%w: %s: log %s is missing", ErrCorrupt, s.dir, logName(want))
	}
	for i, gen := range replay {
		if gen != want+uint64(i) {
			return fmt.Errorf("%w: %s: log %s is missing", ErrCorrupt, s.dir, logName(want+uint64(i)))
		}
		path := filepath.Join(s.dir, logName(gen))
		n, err := replayLog(path, gen, i == len(replay)-1, &st)
		if err == errEmptyLog {
			// Replaced below by a new log of the same generation.
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("logstore: open %s: %w", s.dir, err)
			}
			replay = replay[:i]
			break
		}
		if err != nil {
			return err
		}
		s.logBytes += n
	}
	for _, gen := range logs[:first] {
		if err := os.Remove(filepath.Join(s.dir, logName(gen))); err != nil {
			return fmt.Errorf("logstore: open %s: %w", s.dir, err)
		}
	}
	next := want
	if len(replay) > 0 {
		next = replay[len(replay)-1] + 1
	}
	epoch := st.epoch + 1
	if epoch >= 1<<31 {
		return fmt.Errorf("logstore: %s: session epoch space exhausted", s.dir)
	}
	l, err := createLog(s.dir, next, s.opts.PreallocBytes)
	if err != nil {
		return err
	}
	s.log = l
	s.work, s.version, s.sessionEpoch = st.tree, st.version, epoch
	ascend(s.work, func(e *entry) bool {
		s.live += e.liveBytes()
		return true
	})
	// The epoch is durable before any session of it exists, so no session
	// ID is issued twice, not even after a crash right after this open.
	frame := appendRecord(make([]byte, frameHeaderSize), recEpoch, metadata.Version(epoch), "", nil)
	putFrameHeader(frame, 1, frame[frameHeaderSize:])
	if err := l.append(frame, 1); err != nil {
		_ = l.close()
		return fmt.Errorf("logstore: open %s: %w", s.dir, err)
	}
	s.logBytes += int64(len(frame))
	s.statLog.Store(s.logBytes)
	s.statLive.Store(s.live)
	return nil
}

// replayLog applies one log's frames to st and returns the bytes they
// hold. In the newest log (last) a frame that fails its checks is the torn
// tail of a commit that was never acknowledged, unless an intact later
// frame follows it: then it is corruption. The torn tail is cut off (the
// file truncated and synced) so that it can never be mistaken for
// corruption once a newer log exists. In any other log, everything after
// the last frame must be zeros.
func replayLog(path string, gen uint64, last bool, st *replayState) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("logstore: %w", err)
	}
	if last && allZero(data[:min(len(data), fileHeaderSize)]) {
		// A crash while creating it, before its header was synced: it
		// never held a frame.
		return 0, errEmptyLog
	}
	hgen, err := checkFileHeader(path, logMagic, data)
	if err != nil && last && len(data) >= fileHeaderSize && allZero(data[fileHeaderSize:]) {
		// A header torn while the log was being created: no frame is
		// written before the header is synced, so it never held one.
		return 0, errEmptyLog
	}
	if err != nil {
		return 0, err
	}
	if hgen != gen {
		return 0, fmt.Errorf("%w: %s holds generation %d", ErrCorrupt, path, hgen)
	}
	off, seq := fileHeaderSize, uint64(0)
	for {
		h, payload, size, ok := decodeFrame(data[off:])
		if !ok {
			break
		}
		if h.seq != seq+1 {
			return 0, fmt.Errorf("%w: %s: frame at %d has sequence %d, want %d", ErrCorrupt, path, off, h.seq, seq+1)
		}
		if err := decodeRecords(payload, st.apply); err != nil {
			return 0, fmt.Errorf("%s: frame at %d: %w", path, off, err)
		}
		seq = h.seq
		off += size
	}
	if allZero(data[off:]) {
		if last && off < len(data) {
			// Open never appends to this log again: give back the
			// zeros preallocated past its end.
			return int64(off - fileHeaderSize), truncateTo(path, off)
		}
		return int64(off - fileHeaderSize), nil
	}
	if !last {
		return 0, fmt.Errorf("%w: %s: damaged frame at %d (not the newest log)", ErrCorrupt, path, off)
	}
	if laterFrame(data, off+1, seq) {
		return 0, fmt.Errorf("%w: %s: damaged frame at %d before intact ones", ErrCorrupt, path, off)
	}
	return int64(off - fileHeaderSize), truncateTo(path, off)
}

// truncateTo cuts a log at off (a torn tail, or preallocated zeros) and
// syncs it.
func truncateTo(path string, off int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("logstore: cut torn tail: %w", err)
	}
	err = f.Truncate(int64(off))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("logstore: cut torn tail of %s at %d: %w", path, off, err)
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

// laterFrame reports whether an intact frame with a sequence number above
// after starts anywhere in b[from:]. Runs of zeros are skipped: a frame
// header is never all zeros.
func laterFrame(b []byte, from int, after uint64) bool {
	for p := from; p+frameHeaderSize <= len(b); p++ {
		if b[p] == 0 {
			q := p
			for q < len(b) && b[q] == 0 {
				q++
			}
			if q == len(b) {
				return false
			}
			p = max(p, q-frameHeaderSize+1)
		}
		if h, _, _, ok := decodeFrame(b[p:]); ok && h.seq > after {
			return true
		}
	}
	return false
}
