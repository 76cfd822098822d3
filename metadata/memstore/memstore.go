// Package memstore is an in-memory metadata.Store for tests and embedding:
// per-key versions from one store-wide counter, independent batch
// operations, sessions with TTL, ephemeral records and prefix watches.
//
// It owns no durability: everything is lost with the process. It must never
// be used where a user expects metadata to survive a restart, and it must
// never be stronger than the real stores in ways callers could rely on
// (notably, Batch applies ops one by one, each on its own).
package memstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

type record struct {
	value   []byte
	version metadata.Version
	session metadata.SessionID
}

type watcher struct {
	prefix string
	ch     chan metadata.Event
	lost   bool
}

// Store is the in-memory store.
type Store struct {
	mu          sync.Mutex
	records     map[string]*record
	version     metadata.Version
	sessions    map[metadata.SessionID]*session
	nextSession metadata.SessionID
	watchers    map[*watcher]struct{}
	closed      bool
}

// New returns an empty store.
func New() *Store {
	return &Store{
		records:  map[string]*record{},
		sessions: map[metadata.SessionID]*session{},
		watchers: map[*watcher]struct{}{},
	}
}

var _ metadata.Store = (*Store)(nil)

// Get implements metadata.Store.
func (s *Store) Get(ctx context.Context, key string) (metadata.Record, error) {
	res, err := s.Batch(ctx, []metadata.Op{{Kind: metadata.OpGet, Key: key}})
	if err != nil {
		return metadata.Record{}, err
	}
	return res[0].Record, res[0].Err
}

// Put implements metadata.Store.
func (s *Store) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	res, err := s.Batch(ctx, []metadata.Op{{Kind: metadata.OpPut, Key: key, Value: value, Expected: expected}})
	if err != nil {
		return 0, err
	}
	return res[0].Version, res[0].Err
}

// PutEphemeral implements metadata.Store.
func (s *Store) PutEphemeral(ctx context.Context, key string, value []byte, expected metadata.Version, sess metadata.SessionID) (metadata.Version, error) {
	res, err := s.Batch(ctx, []metadata.Op{{Kind: metadata.OpPut, Key: key, Value: value, Expected: expected, Session: sess}})
	if err != nil {
		return 0, err
	}
	return res[0].Version, res[0].Err
}

// Delete implements metadata.Store.
func (s *Store) Delete(ctx context.Context, key string, expected metadata.Version) error {
	res, err := s.Batch(ctx, []metadata.Op{{Kind: metadata.OpDelete, Key: key, Expected: expected}})
	if err != nil {
		return err
	}
	return res[0].Err
}

// RangeScan implements metadata.Store.
func (s *Store) RangeScan(ctx context.Context, min, max string, limit int) ([]metadata.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, metadata.ErrClosed
	}
	keys := make([]string, 0)
	for k := range s.records {
		if k >= min && k < max {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]metadata.Record, 0, len(keys))
	for _, k := range keys {
		out = append(out, s.recordOf(k, s.records[k]))
	}
	return out, nil
}

func (s *Store) recordOf(k string, r *record) metadata.Record {
	return metadata.Record{Key: k, Value: append([]byte(nil), r.value...), Version: r.version, Session: r.session}
}

// Batch implements metadata.Store. Ops apply one by one, each on its own.
func (s *Store) Batch(ctx context.Context, ops []metadata.Op) ([]metadata.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, metadata.ErrClosed
	}
	out := make([]metadata.Result, len(ops))
	for i, op := range ops {
		out[i] = s.applyLocked(op)
	}
	return out, nil
}

func (s *Store) applyLocked(op metadata.Op) metadata.Result {
	if op.Key == "" {
		return metadata.Result{Err: fmt.Errorf("%w: empty key", metadata.ErrInvalidArgument)}
	}
	cur, exists := s.records[op.Key]
	switch op.Kind {
	case metadata.OpGet:
		if !exists {
			return metadata.Result{Err: metadata.ErrKeyNotFound}
		}
		return metadata.Result{Record: s.recordOf(op.Key, cur), Version: cur.version}
	case metadata.OpPut:
		if err := checkExpected(cur, exists, op.Expected); err != nil {
			return metadata.Result{Err: err}
		}
		if op.Session != 0 {
			if _, ok := s.sessions[op.Session]; !ok {
				return metadata.Result{Err: metadata.ErrSessionExpired}
			}
		}
		s.version++
		s.records[op.Key] = &record{value: append([]byte(nil), op.Value...), version: s.version, session: op.Session}
		s.notifyLocked(metadata.Event{Kind: metadata.EventPut, Key: op.Key, Version: s.version})
		return metadata.Result{Version: s.version}
	case metadata.OpDelete:
		if !exists {
			return metadata.Result{Err: metadata.ErrKeyNotFound}
		}
		if err := checkExpected(cur, exists, op.Expected); err != nil {
			return metadata.Result{Err: err}
		}
		delete(s.records, op.Key)
		s.notifyLocked(metadata.Event{Kind: metadata.EventDelete, Key: op.Key})
		return metadata.Result{}
	}
	return metadata.Result{Err: fmt.Errorf("%w: op kind %d", metadata.ErrInvalidArgument, op.Kind)}
}

func checkExpected(cur *record, exists bool, expected metadata.Version) error {
	switch {
	case expected == metadata.AnyVersion:
		return nil
	case expected == metadata.NotExists:
		if exists {
			return fmt.Errorf("%w: key exists at version %d", metadata.ErrUnexpectedVersion, cur.version)
		}
		return nil
	case !exists:
		return fmt.Errorf("%w: %w", metadata.ErrUnexpectedVersion, metadata.ErrKeyNotFound)
	case cur.version != expected:
		return fmt.Errorf("%w: have %d, expected %d", metadata.ErrUnexpectedVersion, cur.version, expected)
	}
	return nil
}

func (s *Store) notifyLocked(ev metadata.Event) {
	for w := range s.watchers {
		if !strings.HasPrefix(ev.Key, w.prefix) || w.lost {
			continue
		}
		select {
		case w.ch <- ev:
		default:
			// The consumer is behind: tell it to resync instead of blocking
			// every writer.
			w.lost = true
			select {
			case <-w.ch:
			default:
			}
			w.ch <- metadata.Event{}
		}
	}
}

// Watch implements metadata.Store.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan metadata.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, metadata.ErrClosed
	}
	w := &watcher{prefix: prefix, ch: make(chan metadata.Event, 1024)}
	s.watchers[w] = struct{}{}
	out := make(chan metadata.Event)
	go func() {
		defer close(out)
		defer func() {
			s.mu.Lock()
			delete(s.watchers, w)
			s.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ch:
				if !ok {
					return
				}
				if ev.Key == "" {
					s.mu.Lock()
					w.lost = false
					s.mu.Unlock()
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

type session struct {
	store *Store
	id    metadata.SessionID
	done  chan struct{}
	once  sync.Once
}

func (ss *session) ID() metadata.SessionID { return ss.id }
func (ss *session) Done() <-chan struct{}  { return ss.done }
func (ss *session) Close(ctx context.Context) error {
	ss.store.endSession(ss)
	return nil
}

// NewSession implements metadata.Store. An in-memory session never misses a
// keep-alive, so it lives until Close (or ExpireSession in tests).
func (s *Store) NewSession(ctx context.Context, ttl time.Duration) (metadata.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, metadata.ErrClosed
	}
	s.nextSession++
	ss := &session{store: s, id: s.nextSession, done: make(chan struct{})}
	s.sessions[ss.id] = ss
	return ss, nil
}

// ExpireSession ends a session as if its keep-alives had stopped (tests).
func (s *Store) ExpireSession(id metadata.SessionID) {
	s.mu.Lock()
	ss, ok := s.sessions[id]
	s.mu.Unlock()
	if ok {
		s.endSession(ss)
	}
}

func (s *Store) endSession(ss *session) {
	ss.once.Do(func() {
		s.mu.Lock()
		delete(s.sessions, ss.id)
		for k, r := range s.records {
			if r.session == ss.id {
				delete(s.records, k)
				s.notifyLocked(metadata.Event{Kind: metadata.EventDelete, Key: k})
			}
		}
		s.mu.Unlock()
		close(ss.done)
	})
}

// Close implements metadata.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	sessions := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	for _, ss := range sessions {
		s.endSession(ss)
	}
	s.mu.Lock()
	s.closed = true
	for w := range s.watchers {
		close(w.ch)
		delete(s.watchers, w)
	}
	s.mu.Unlock()
	return nil
}
