package logstore

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nereusstream/nereus-go/internal/filesync"
	"github.com/nereusstream/nereus-go/metadata"
)

// snapshotState is the committed state at a log switch: everything in the
// logs before gen.
type snapshotState struct {
	gen     uint64
	tree    *tree // a published (immutable) tree
	version metadata.Version
	epoch   uint64
}

// maybeCompact runs on the committer between commits. It switches to a
// log the compactor prepared (handing it the state the old logs add up
// to), or starts a compaction once the logs are much larger than the live
// state. The commit path only ever pays for the switch itself.
func (s *Store) maybeCompact() {
	select {
	case l := <-s.nextLog:
		old := s.log
		s.log = l
		s.logBytes = 0
		s.snapState <- snapshotState{gen: l.gen, tree: s.view.Load(), version: s.version, epoch: s.sessionEpoch}
		if err := old.close(); err != nil {
			s.setCompactErr(err)
		}
		return
	default:
	}
	if s.failed != nil || s.compacting.Load() {
		return
	}
	if s.logBytes < s.opts.CompactMinBytes || s.logBytes < s.opts.CompactRatio*s.live {
		return
	}
	s.compacting.Store(true)
	s.compactWG.Add(1)
	go s.compact(s.log.gen + 1)
}

func (s *Store) setCompactErr(err error) { s.compactErr.Store(&err) }

// compact prepares the next log, waits for the committer to switch to it,
// writes the snapshot of everything before it, and only once that snapshot
// is durable and reads back intact deletes the logs and snapshots it
// replaces.
func (s *Store) compact(gen uint64) {
	defer s.compactWG.Done()
	defer s.compacting.Store(false)
	l, err := createLog(s.dir, gen, s.opts.PreallocBytes)
	if err != nil {
		s.setCompactErr(err)
		return
	}
	s.nextLog <- l
	var st snapshotState
	select {
	case st = <-s.snapState:
	case <-s.stopped:
		return // Close takes the unused log
	}
	if err := writeSnapshot(s.dir, st); err != nil {
		s.setCompactErr(err)
		return
	}
	check := replayState{tree: newTree()}
	if err := loadSnapshot(filepath.Join(s.dir, snapName(gen)), gen, &check); err != nil {
		s.setCompactErr(err)
		return
	}
	if check.tree.Len() != countPersistent(st.tree) || check.version != st.version {
		s.setCompactErr(fmt.Errorf("logstore: snapshot %s reads back %d records at version %d, wrote %d at %d",
			snapName(gen), check.tree.Len(), check.version, countPersistent(st.tree), st.version))
		return
	}
	snaps, logs, err := listDir(s.dir)
	if err != nil {
		s.setCompactErr(err)
		return
	}
	for _, g := range logs {
		if g < gen {
			if err := os.Remove(filepath.Join(s.dir, logName(g))); err != nil {
				s.setCompactErr(err)
				return
			}
		}
	}
	for _, g := range snaps {
		if g < gen {
			if err := os.Remove(filepath.Join(s.dir, snapName(g))); err != nil {
				s.setCompactErr(err)
				return
			}
		}
	}
	if err := filesync.SyncDir(s.dir); err != nil {
		s.setCompactErr(err)
		return
	}
	s.compactErr.Store(nil)
	s.stats.compactions.Add(1)
}

func countPersistent(t *tree) int {
	n := 0
	ascend(t, func(e *entry) bool {
		if e.session == 0 {
			n++
		}
		return true
	})
	return n
}

// encodeSnapshot lays out a snapshot file: header, then one frame whose
// records are the epoch, the version counter and every persistent entry in
// key order.
func encodeSnapshot(st snapshotState) []byte {
	b := fileHeader(snapMagic, st.gen)
	b = append(b, make([]byte, frameHeaderSize)...)
	b = appendRecord(b, recEpoch, metadata.Version(st.epoch), "", nil)
	b = appendRecord(b, recVersion, st.version, "", nil)
	ascend(st.tree, func(e *entry) bool {
		if e.session == 0 {
			b = appendRecord(b, recPut, e.version, e.key, e.value)
		}
		return true
	})
	putFrameHeader(b[fileHeaderSize:], 1, b[fileHeaderSize+frameHeaderSize:])
	return b
}

// writeSnapshot writes a snapshot durably: temp file, fdatasync, rename,
// directory fsync.
func writeSnapshot(dir string, st snapshotState) error {
	final := filepath.Join(dir, snapName(st.gen))
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("logstore: snapshot: %w", err)
	}
	_, err = f.Write(encodeSnapshot(st))
	if err == nil {
		err = fdatasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err == nil {
		err = filesync.SyncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("logstore: snapshot %s: %w", final, err)
	}
	return nil
}

// loadSnapshot reads a snapshot into st. A snapshot is renamed into place
// only once synced, so any damage is ErrCorrupt, never a torn tail.
func loadSnapshot(path string, gen uint64, st *replayState) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("logstore: %w", err)
	}
	hgen, err := checkFileHeader(path, snapMagic, data)
	if err != nil {
		return err
	}
	if hgen != gen {
		return fmt.Errorf("%w: %s holds generation %d", ErrCorrupt, path, hgen)
	}
	h, payload, size, ok := decodeFrame(data[fileHeaderSize:])
	if !ok || h.seq != 1 || fileHeaderSize+size != len(data) {
		return fmt.Errorf("%w: %s: damaged snapshot", ErrCorrupt, path)
	}
	if err := decodeRecords(payload, func(r logRecord) error {
		if r.kind == recDelete {
			return fmt.Errorf("%w: %s: delete record in a snapshot", ErrCorrupt, path)
		}
		return st.apply(r)
	}); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
