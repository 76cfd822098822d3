// Package memstore is an in-memory metadata.Store for tests and embedding:
// per-key versions from one store-wide counter, independent batch
// operations, sessions with TTL, ephemeral records and prefix watches.
//
// It owns no durability: everything is lost with the process. It must never
// be used where a user expects metadata to survive a restart, and it must
// never be stronger than the real stores in ways callers could rely on
// (notably, Batch applies ops one by one, each on its own). For injected
// latency, errors and lost responses wrap it in metadata/faultstore.
//
// Test hooks: ExpireSession ends a session at once; StopKeepAlive stops a
// session's keep-alive so it expires after its TTL.
package memstore

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/internal/kvcheck"
	"github.com/nereusstream/nereus-go/metadata/internal/sessions"
	"github.com/nereusstream/nereus-go/metadata/internal/viabatch"
	"github.com/nereusstream/nereus-go/metadata/internal/watchhub"
)

type record struct {
	value   []byte
	version metadata.Version
	session metadata.SessionID
}

// Store is the in-memory store.
type Store struct {
	// mu guards records, version and closed. Lock order: mu before the
	// session table's lock (Alive is called under mu) and before the hub's.
	mu       sync.Mutex
	records  map[string]*record
	version  metadata.Version
	closed   bool
	sessions *sessions.Table
	hub      *watchhub.Hub
	// nextSession is only touched by the session table under its lock.
	nextSession metadata.SessionID
}

// New returns an empty store.
func New() *Store {
	s := &Store{records: map[string]*record{}, hub: watchhub.New(0)}
	s.sessions = sessions.New(func() metadata.SessionID {
		s.nextSession++
		return s.nextSession
	}, s.purgeSession)
	return s
}

var _ metadata.Store = (*Store)(nil)

// Get implements metadata.Store.
func (s *Store) Get(ctx context.Context, key string) (metadata.Record, error) {
	return viabatch.Get(ctx, s, key)
}

// Put implements metadata.Store.
func (s *Store) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	return viabatch.Put(ctx, s, key, value, expected)
}

// PutEphemeral implements metadata.Store.
func (s *Store) PutEphemeral(ctx context.Context, key string, value []byte, expected metadata.Version, sess metadata.SessionID) (metadata.Version, error) {
	return viabatch.PutEphemeral(ctx, s, key, value, expected, sess)
}

// Delete implements metadata.Store.
func (s *Store) Delete(ctx context.Context, key string, expected metadata.Version) error {
	return viabatch.Delete(ctx, s, key, expected)
}

// RangeScan implements metadata.Store.
func (s *Store) RangeScan(ctx context.Context, min, max string, limit int) ([]metadata.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := kvcheck.ValidateRange(min, max); err != nil {
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
		out = append(out, recordOf(k, s.records[k]))
	}
	return out, nil
}

func recordOf(k string, r *record) metadata.Record {
	return metadata.Record{Key: k, Value: append([]byte{}, r.value...), Version: r.version, Session: r.session}
}

// Batch implements metadata.Store. Ops apply one by one, in op order, each
// on its own.
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
	var events []metadata.Event
	for i, op := range ops {
		out[i] = s.applyLocked(op, &events)
	}
	// Published under mu, so watchers see events in commit order.
	s.hub.Publish(events...)
	return out, nil
}

func (s *Store) applyLocked(op metadata.Op, events *[]metadata.Event) metadata.Result {
	if err := kvcheck.ValidateOp(op, 0); err != nil {
		return metadata.Result{Err: err}
	}
	cur, exists := s.records[op.Key]
	var curVersion metadata.Version
	if exists {
		curVersion = cur.version
	}
	switch op.Kind {
	case metadata.OpGet:
		if !exists {
			return metadata.Result{Err: metadata.ErrKeyNotFound}
		}
		return metadata.Result{Record: recordOf(op.Key, cur), Version: cur.version}
	case metadata.OpPut:
		if err := kvcheck.CheckPut(exists, curVersion, op.Expected); err != nil {
			return metadata.Result{Err: err}
		}
		if op.Session != 0 && !s.sessions.Alive(op.Session) {
			return metadata.Result{Err: metadata.ErrSessionExpired}
		}
		s.version++
		s.records[op.Key] = &record{value: append([]byte{}, op.Value...), version: s.version, session: op.Session}
		*events = append(*events, metadata.Event{Kind: metadata.EventPut, Key: op.Key, Version: s.version})
		return metadata.Result{Version: s.version}
	default: // OpDelete; ValidateOp rejected other kinds.
		if err := kvcheck.CheckDelete(exists, curVersion, op.Expected); err != nil {
			return metadata.Result{Err: err}
		}
		delete(s.records, op.Key)
		*events = append(*events, metadata.Event{Kind: metadata.EventDelete, Key: op.Key})
		return metadata.Result{}
	}
}

// Watch implements metadata.Store.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan metadata.Event, error) {
	return s.hub.Watch(ctx, prefix)
}

// NewSession implements metadata.Store. An in-memory session never misses a
// keep-alive, so it lives until Close, ExpireSession, or ttl after
// StopKeepAlive.
func (s *Store) NewSession(ctx context.Context, ttl time.Duration) (metadata.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, metadata.ErrClosed
	}
	ss, err := s.sessions.New(ttl)
	if err != nil {
		return nil, err
	}
	return ss, nil
}

// ExpireSession ends a session at once, as if its TTL had run out (tests).
func (s *Store) ExpireSession(id metadata.SessionID) { s.sessions.Expire(id) }

// StopKeepAlive stops a session's keep-alive: it expires ttl from now, its
// ephemerals are deleted and Done closes (tests). It reports whether the
// session was alive.
func (s *Store) StopKeepAlive(id metadata.SessionID) bool { return s.sessions.StopKeepAlive(id) }

func (s *Store) purgeSession(id metadata.SessionID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var events []metadata.Event
	for k, r := range s.records {
		if r.session == id {
			delete(s.records, k)
			events = append(events, metadata.Event{Kind: metadata.EventDelete, Key: k})
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].Key < events[j].Key })
	s.hub.Publish(events...)
	return nil
}

// Close implements metadata.Store: sessions end (their ephemerals are
// deleted), watch channels close, and every later call returns
// metadata.ErrClosed. Closing twice returns nil.
func (s *Store) Close() error {
	err := s.sessions.CloseAll()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.hub.Close()
	return err
}
