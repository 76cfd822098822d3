package logstore

import (
	"fmt"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/internal/kvcheck"
)

// run is the committer: the only goroutine that appends to the log and
// changes the working tree. Because it is the only writer, the order in
// which it publishes events is the commit order.
func (s *Store) run() {
	defer close(s.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		batch := s.queue.Collect(timer)
		if batch == nil {
			return
		}
		s.commit(batch)
		s.maybeCompact()
	}
}

// commit applies a batch to the working tree, appends its records as one
// frame, flushes once, and only then publishes the new state and events
// and answers the callers.
func (s *Store) commit(batch []*request) {
	if s.failed != nil {
		s.answer(batch, s.failed)
		return
	}
	w := writer{s: s, buf: append(s.buf[:0], zeroHeader[:]...), seq: s.log.seq, version: s.version, live: s.live}
	ops := 0
	for _, r := range batch {
		r.results, r.err = nil, nil
		if r.purge != 0 {
			w.purge(r.purge)
			continue
		}
		if err := r.ctx.Err(); err != nil {
			// The caller has given up; do not apply what it no longer
			// waits for. (It was told the outcome is unknown.)
			r.err = fmt.Errorf("%w: %w", metadata.ErrUnavailable, err)
			continue
		}
		r.results = make([]metadata.Result, len(r.ops))
		for i, op := range r.ops {
			r.results[i] = w.apply(op)
		}
		ops += len(r.ops)
	}
	if w.finish() > 0 {
		if err := s.flush(w.buf, w.frames); err != nil {
			// The bytes may or may not be on disk: the outcome is unknown,
			// and the file's tail can no longer be trusted to append to.
			s.failed = fmt.Errorf("%w: logstore commit: %w", metadata.ErrUnavailable, err)
			s.work = s.view.Load().Clone()
			s.answer(batch, s.failed)
			return
		}
		s.logBytes += int64(len(w.buf))
	}
	if cap(w.buf) <= 1<<20 {
		s.buf = w.buf[:0] // reuse, unless one huge Batch grew it
	}
	s.version, s.live = w.version, w.live
	if w.changed {
		s.view.Store(s.work.Clone())
	}
	s.stats.commits.Add(1)
	s.stats.requests.Add(int64(len(batch)))
	s.stats.ops.Add(int64(ops))
	s.statLog.Store(s.logBytes)
	s.statLive.Store(s.live)
	s.hub.Publish(w.events...)
	for _, r := range batch {
		close(r.done)
	}
}

// flush appends a commit's frames (one, unless the commit was huge) with
// one write and syncs them once.
func (s *Store) flush(frames []byte, n int) error {
	s.stats.flushes.Add(1)
	if s.opts.testNoSync {
		if _, err := s.log.f.WriteAt(frames, s.log.off); err != nil {
			return err
		}
		s.log.off += int64(len(frames))
		s.log.seq += uint64(n)
		return nil
	}
	return s.log.append(frames, n)
}

func (s *Store) answer(batch []*request, err error) {
	for _, r := range batch {
		r.results, r.err = nil, err
		close(r.done)
	}
}

// frameSplit bounds one frame's payload: a commit whose records would make
// a larger frame (a Batch of many big values) is written as several frames,
// still in one write and one flush. Recovery then reads at most this much
// per frame (the format allows up to maxFramePayload).
var frameSplit = 64 << 20 // a variable only so a test can make it small

// writer applies one commit's ops to the working tree and logs them.
type writer struct {
	s       *Store
	buf     []byte           // the commit's frames; the last one still open at start
	start   int              // offset of the open frame's header in buf
	frames  int              // frames sealed
	seq     uint64           // sequence number of the last frame sealed (or in the log)
	version metadata.Version // last issued; the next put gets version+1
	live    int64
	events  []metadata.Event
	changed bool
}

// record appends one record to the open frame, sealing it first if the
// record would take it past frameSplit.
func (w *writer) record(kind byte, version metadata.Version, key string, value []byte) {
	if open := len(w.buf) - w.start - frameHeaderSize; open > 0 && open+recordHeaderSize+len(key)+len(value) > frameSplit {
		w.seal()
		w.start = len(w.buf)
		w.buf = append(w.buf, zeroHeader[:]...)
	}
	w.buf = appendRecord(w.buf, kind, version, key, value)
}

func (w *writer) seal() {
	w.seq++
	w.frames++
	putFrameHeader(w.buf[w.start:w.start+frameHeaderSize], w.seq, w.buf[w.start+frameHeaderSize:])
}

// finish seals the open frame (dropping it if empty) and returns how many
// frames the commit holds.
func (w *writer) finish() int {
	if len(w.buf)-w.start == frameHeaderSize {
		w.buf = w.buf[:w.start]
	} else {
		w.seal()
	}
	return w.frames
}

// apply runs one op; a failed precondition is its Result.
func (w *writer) apply(op metadata.Op) metadata.Result {
	if err := kvcheck.ValidateOp(op, w.s.opts.MaxValueBytes); err != nil {
		return metadata.Result{Err: err}
	}
	if len(op.Key) > maxKeyBytes {
		return metadata.Result{Err: fmt.Errorf("%w: key of %d bytes exceeds %d", metadata.ErrInvalidArgument, len(op.Key), maxKeyBytes)}
	}
	cur, exists := lookup(w.s.work, op.Key)
	var curVersion metadata.Version
	if exists {
		curVersion = cur.version
	}
	switch op.Kind {
	case metadata.OpGet:
		if !exists {
			return metadata.Result{Err: metadata.ErrKeyNotFound}
		}
		return metadata.Result{Record: cur.record(), Version: cur.version}
	case metadata.OpPut:
		if err := kvcheck.CheckPut(exists, curVersion, op.Expected); err != nil {
			return metadata.Result{Err: err}
		}
		if op.Session != 0 && !w.s.sessions.Alive(op.Session) {
			return metadata.Result{Err: metadata.ErrSessionExpired}
		}
		w.version++
		e := &entry{key: op.Key, version: w.version, session: op.Session, value: append([]byte(nil), op.Value...)}
		if op.Session == 0 {
			w.record(recPut, w.version, op.Key, op.Value)
		} else {
			// An ephemeral is logged as a delete carrying its version: on
			// disk the key is absent (no ephemeral survives a restart), and
			// the version is never issued again.
			w.record(recDelete, w.version, op.Key, nil)
		}
		if exists {
			w.live -= cur.liveBytes()
		}
		w.live += e.liveBytes()
		insert(w.s.work, e)
		w.changed = true
		w.events = append(w.events, metadata.Event{Kind: metadata.EventPut, Key: op.Key, Version: w.version})
		return metadata.Result{Version: w.version}
	default: // OpDelete; ValidateOp rejected other kinds.
		if err := kvcheck.CheckDelete(exists, curVersion, op.Expected); err != nil {
			return metadata.Result{Err: err}
		}
		w.delete(cur)
		return metadata.Result{}
	}
}

// delete removes an existing entry. Deleting an ephemeral needs no record:
// on disk its key is already absent.
func (w *writer) delete(cur *entry) {
	if cur.session == 0 {
		w.record(recDelete, 0, cur.key, nil)
	}
	w.live -= cur.liveBytes()
	remove(w.s.work, cur.key)
	w.changed = true
	w.events = append(w.events, metadata.Event{Kind: metadata.EventDelete, Key: cur.key})
}

// purge deletes every ephemeral record of a session, in key order. The
// tree is not indexed by session: a purge walks it (sessions end rarely,
// and a node holds a handful of them).
func (w *writer) purge(session metadata.SessionID) {
	var doomed []*entry
	ascend(w.s.work, func(e *entry) bool {
		if e.session == session {
			doomed = append(doomed, e)
		}
		return true
	})
	for _, e := range doomed {
		w.delete(e)
	}
}

// zeroHeader is the space a frame header takes before it is filled in.
var zeroHeader [frameHeaderSize]byte
