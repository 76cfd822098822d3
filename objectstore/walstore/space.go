package walstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nereusstream/nereus-go/internal/filesync"
)

// Space comes back one whole file at a time, oldest first. Files are
// sealed when full or, once 1 MiB was written to one, after
// Options.SealAfter (by the next write, or by the reclaimer when writes
// stopped), so at a low write rate they stay small and space follows the
// live bytes.
//
//   - The oldest sealed file with no live object is deleted, once every
//     record written so far is durable (what made its objects dead — a
//     tombstone, an overwrite, a copy — must survive a crash that keeps
//     the deletion), and the deletion is made durable (directory fsync)
//     before a later file may go. Only the oldest: a tombstone's file must
//     never go while an older file still holds the put it cancels, or
//     recovery would bring the object back.
//   - The oldest sealed file whose live objects are less than half its
//     bytes, sealed at least Options.CopyAfter ago — or under a sixteenth
//     of its bytes, or any oldest file while the files hold more than
//     twice the live bytes plus two files —
//     has its live objects copied forward into the active file, keeping
//     their versions (a reader's version stays valid), and is then deleted
//     as above. The Object WAL's objects die fast (a manifest at its next
//     commit, a segment once retired), so copying is rare: it is what
//     keeps an object that lives long from pinning every file after it.

func (s *Store) kickReclaim() {
	select {
	case s.reclaimCh <- struct{}{}:
	default:
	}
}

func (s *Store) reclaimLoop() {
	tick := time.NewTicker(min(max(s.opts.SealAfter, 10*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		select {
		case <-s.reclaimCh:
		case <-tick.C:
		case <-s.stop:
			return
		}
		s.sealIfOld()
		if err := s.reclaim(s.ctx); err != nil && s.ctx.Err() == nil {
			s.opts.Logger.Warn("walstore: reclaiming space failed; the files stay", "dir", s.dir, "err", err)
		}
	}
}

// sealIfOld seals the active file when it is due for its age and nothing
// is being written (a write seals it itself), so a store that went quiet
// after writing does not keep its last file's dead bytes.
func (s *Store) sealIfOld() {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed.Load() || s.flush.failure() != nil || !s.oldLocked() {
		return
	}
	if err := s.sealLocked(0); err != nil {
		s.opts.Logger.Warn("walstore: sealing the active file failed", "dir", s.dir, "err", err)
	}
}

// reclaim deletes and compacts old files until none qualifies.
func (s *Store) reclaim(ctx context.Context) error {
	for ctx.Err() == nil {
		oldest, copyIt := s.reclaimCandidate()
		switch {
		case oldest == nil:
			return nil
		case oldest.liveObjects.Load() == 0:
			if err := s.deleteOldest(ctx, oldest); err != nil {
				return err
			}
		case copyIt:
			if err := s.copyForward(ctx, oldest); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return ctx.Err()
}

// reclaimCandidate returns the oldest sealed file if it is empty or
// qualifies for copying forward (copyIt), else nil.
func (s *Store) reclaimCandidate() (oldest *logFile, copyIt bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.files) < 2 {
		return nil, false
	}
	oldest = s.files[0]
	if oldest.liveObjects.Load() == 0 {
		return oldest, false
	}
	var total, live int64
	for _, f := range s.files {
		total += f.written()
		live += f.live.Load()
	}
	stale := !oldest.sealed.IsZero() && time.Since(oldest.sealed) >= s.opts.CopyAfter || oldest.sealed.IsZero()
	olive, owritten := oldest.live.Load(), oldest.written()
	if stale && 2*olive < owritten || 16*olive < owritten || total > 2*live+2*s.opts.FileBytes {
		return oldest, true
	}
	return nil, false
}

// deleteOldest deletes f, the oldest file, which holds no live object.
func (s *Store) deleteOldest(ctx context.Context, f *logFile) error {
	// Everything that made f's objects dead is durable before f goes.
	s.writeMu.Lock()
	upTo := s.seq
	s.writeMu.Unlock()
	if mutant != "delete-no-flush" {
		if err := s.flush.wait(ctx, upTo); err != nil {
			return err
		}
	}
	s.mu.Lock()
	if len(s.files) < 2 || s.files[0] != f || f.liveObjects.Load() != 0 {
		s.mu.Unlock()
		return nil
	}
	s.files = s.files[1:]
	s.mu.Unlock()
	crashPoint("delete")
	if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		// Back at the front of the list: a later file must not go while
		// this one is still on disk (Open would find a gap), and the next
		// pass tries again.
		s.mu.Lock()
		s.files = append([]*logFile{f}, s.files...)
		s.mu.Unlock()
		return fmt.Errorf("walstore: delete %s: %w", f.path, err)
	}
	f.release()
	crashPoint("deleted")
	if err := filesync.SyncDir(s.dir); err != nil {
		return err
	}
	s.stats.filesDeleted.Add(1)
	return nil
}

// copyForward copies f's live objects into the active file. An object
// that changes meanwhile is left to its writer.
func (s *Store) copyForward(ctx context.Context, f *logFile) error {
	var live []*entry
	s.mu.RLock()
	s.index.Ascend(func(e *entry) bool {
		if e.file == f {
			live = append(live, e)
		}
		return true
	})
	f.acquire()
	s.mu.RUnlock()
	defer f.release()
	for _, e := range live {
		if err := ctx.Err(); err != nil {
			return err
		}
		value := make([]byte, e.size)
		if err := e.read(value, 0, true); err != nil {
			// Never copy bytes that fail their checksum: the object stays
			// where it is, and reading it says it is corrupt.
			return err
		}
		s.writeMu.Lock()
		if cur, ok := s.index.Get(e); !ok || cur != e || s.closed.Load() {
			s.writeMu.Unlock()
			continue
		}
		ne, _, err := s.appendLocked(recPut, e.key, value, e.version, e.modTime)
		if err != nil {
			s.writeMu.Unlock()
			return err
		}
		s.publish(ne, e)
		s.writeMu.Unlock()
		s.stats.copies.Add(1)
		crashPoint("copied")
	}
	return nil
}

// crashHook, when set by a test, is called at each named step (a
// power-cut test's writer kills itself there); mutant, when set by a
// test, skips one durability step (the power-cut test must then catch a
// loss). Both are set only through export_test.go.
var (
	crashHook func(step string)
	mutant    string
)

func crashPoint(step string) {
	if crashHook != nil {
		crashHook(step)
	}
}
