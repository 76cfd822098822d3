package boltstore

import (
	"bytes"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/internal/kvcheck"
)

// run is the committer: the only goroutine that writes the file. Because it
// is the only writer, the order in which it publishes events is the commit
// order.
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
	}
}

// commit applies a batch of requests in one transaction, then publishes
// their events and answers them.
func (s *Store) commit(batch []*request) {
	var events []metadata.Event
	ops := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		// db.Update runs this once, but reset everything it captures
		// anyway: results must reflect exactly the transaction that
		// committed.
		events = events[:0]
		ops = 0
		w := writer{
			kv:       tx.Bucket(bucketKV),
			eph:      tx.Bucket(bucketEphemeral),
			maxValue: s.opts.MaxValueBytes,
			events:   &events,
			alive:    s.sessions.Alive,
		}
		meta := tx.Bucket(bucketMeta)
		last, err := decodeU64(metaVersion, meta.Get(metaVersion))
		if err != nil {
			return err
		}
		w.version = metadata.Version(last)
		for _, r := range batch {
			r.results, r.err = nil, nil
			if r.purge != 0 {
				if err := w.purge(r.purge); err != nil {
					return err
				}
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
				res, err := w.apply(op)
				if err != nil {
					return err
				}
				r.results[i] = res
			}
			ops += len(r.ops)
		}
		if uint64(w.version) != last {
			if err := meta.Put(metaVersion, encodeU64(uint64(w.version))); err != nil {
				return err
			}
		}
		if s.opts.testHookInTxn != nil {
			s.opts.testHookInTxn()
		}
		return nil
	})
	if err != nil {
		err = mapErr(err)
		if err != metadata.ErrClosed {
			err = fmt.Errorf("%w: boltstore commit: %w", metadata.ErrUnavailable, err)
		}
		for _, r := range batch {
			r.results, r.err = nil, err
		}
	} else {
		s.stats.commits.Add(1)
		s.stats.requests.Add(int64(len(batch)))
		s.stats.ops.Add(int64(ops))
		s.hub.Publish(events...)
	}
	for _, r := range batch {
		close(r.done)
	}
}

// writer applies ops inside one write transaction.
type writer struct {
	kv, eph  *bolt.Bucket
	version  metadata.Version // last issued; the next put gets version+1
	maxValue int
	events   *[]metadata.Event
	alive    func(metadata.SessionID) bool
}

// apply runs one op. A failed precondition is a Result; only a bbolt error
// (which aborts the whole transaction) is returned as error.
func (w *writer) apply(op metadata.Op) (metadata.Result, error) {
	if err := kvcheck.ValidateOp(op, w.maxValue); err != nil {
		return metadata.Result{Err: err}, nil
	}
	if len(op.Key) > maxKeyBytes {
		return metadata.Result{Err: fmt.Errorf("%w: key of %d bytes exceeds %d", metadata.ErrInvalidArgument, len(op.Key), maxKeyBytes)}, nil
	}
	key := []byte(op.Key)
	var cur header
	exists := false
	if b := w.kv.Get(key); b != nil {
		h, err := decodeRecord(key, b)
		if err != nil {
			return metadata.Result{Err: err}, nil
		}
		cur, exists = h, true
	}
	switch op.Kind {
	case metadata.OpGet:
		if !exists {
			return metadata.Result{Err: metadata.ErrKeyNotFound}, nil
		}
		return metadata.Result{Record: cur.record(op.Key), Version: cur.version}, nil
	case metadata.OpPut:
		if err := kvcheck.CheckPut(exists, cur.version, op.Expected); err != nil {
			return metadata.Result{Err: err}, nil
		}
		if op.Session != 0 && !w.alive(op.Session) {
			return metadata.Result{Err: metadata.ErrSessionExpired}, nil
		}
		if exists && cur.session != 0 && cur.session != op.Session {
			if err := w.eph.Delete(ephemeralKey(cur.session, op.Key)); err != nil {
				return metadata.Result{}, err
			}
		}
		if op.Session != 0 {
			if err := w.eph.Put(ephemeralKey(op.Session, op.Key), nil); err != nil {
				return metadata.Result{}, err
			}
		}
		w.version++
		if err := w.kv.Put(key, encodeRecord(w.version, op.Session, op.Value)); err != nil {
			return metadata.Result{}, err
		}
		*w.events = append(*w.events, metadata.Event{Kind: metadata.EventPut, Key: op.Key, Version: w.version})
		return metadata.Result{Version: w.version}, nil
	default: // OpDelete; ValidateOp rejected other kinds.
		if err := kvcheck.CheckDelete(exists, cur.version, op.Expected); err != nil {
			return metadata.Result{Err: err}, nil
		}
		if err := w.delete(key, cur); err != nil {
			return metadata.Result{}, err
		}
		return metadata.Result{}, nil
	}
}

func (w *writer) delete(key []byte, cur header) error {
	if cur.session != 0 {
		if err := w.eph.Delete(ephemeralKey(cur.session, string(key))); err != nil {
			return err
		}
	}
	if err := w.kv.Delete(key); err != nil {
		return err
	}
	*w.events = append(*w.events, metadata.Event{Kind: metadata.EventDelete, Key: string(key)})
	return nil
}

// purge deletes every ephemeral record of a session (in key order).
func (w *writer) purge(session metadata.SessionID) error {
	prefix := sessionPrefix(session)
	var keys [][]byte
	c := w.eph.Cursor()
	for k, _ := c.Seek(prefix); bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, append([]byte{}, k[8:]...))
	}
	for _, key := range keys {
		b := w.kv.Get(key)
		if b == nil {
			// Invariant 3 says this cannot happen; drop the dangling entry.
			if err := w.eph.Delete(ephemeralKey(session, string(key))); err != nil {
				return err
			}
			continue
		}
		h, err := decodeRecord(key, b)
		if err != nil {
			// The index (a separate, intact entry) proves the key was this
			// session's ephemeral; a corrupt ephemeral must not outlive it.
			h = header{session: session}
		}
		if h.session != session {
			if err := w.eph.Delete(ephemeralKey(session, string(key))); err != nil {
				return err
			}
			continue
		}
		if err := w.delete(key, h); err != nil {
			return err
		}
	}
	return nil
}
