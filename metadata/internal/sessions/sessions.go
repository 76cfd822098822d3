// Package sessions is the liveness-session table shared by the in-process
// metadata stores (memstore, boltstore): session IDs, Done channels, TTL
// expiry once a keep-alive stops, and exactly-once ending.
//
// It owns which sessions are alive. It must never touch records: ending a
// session calls the store's purge function, which deletes the session's
// ephemerals through the store's normal write path so watchers see the
// deletes in commit order.
//
// Keep-alive model: the store and its sessions live in one process, so a
// running keep-alive cannot be missed and a live session does not expire on
// its own. StopKeepAlive (a test hook, exported by the stores) stops the
// keep-alive; the session then expires ttl later, as it would on a remote
// store whose client went silent.
package sessions

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// Purge deletes every ephemeral record of a session. It is called once per
// session, after the session stopped being alive (so no new ephemeral can be
// written for it).
type Purge func(id metadata.SessionID) error

// Table holds the live sessions of one store.
type Table struct {
	mu     sync.Mutex
	live   map[metadata.SessionID]*Session
	nextID func() metadata.SessionID
	purge  Purge
	closed bool
}

// New returns a table that names sessions with nextID (called under the
// table's lock, so it needs no locking of its own) and purges ended
// sessions with purge.
func New(nextID func() metadata.SessionID, purge Purge) *Table {
	return &Table{live: map[metadata.SessionID]*Session{}, nextID: nextID, purge: purge}
}

// Session is one liveness session; it implements metadata.Session.
type Session struct {
	table *Table
	id    metadata.SessionID
	ttl   time.Duration
	done  chan struct{}
	once  sync.Once
	// ended is closed once the purge has finished (successfully or not);
	// endErr is its result. Both are written once, inside once.
	ended  chan struct{}
	endErr error
	timer  *time.Timer // armed by StopKeepAlive; guarded by table.mu
}

// New starts a session. ttl <= 0 is invalid.
func (t *Table) New(ttl time.Duration) (*Session, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: session ttl %v", metadata.ErrInvalidArgument, ttl)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, metadata.ErrClosed
	}
	s := &Session{table: t, id: t.nextID(), ttl: ttl, done: make(chan struct{}), ended: make(chan struct{})}
	t.live[s.id] = s
	return s, nil
}

// Alive reports whether id names a live session. A store must check it in
// the same critical section (or transaction) that writes an ephemeral, so
// that an ending session's purge runs after every write that saw it alive.
func (t *Table) Alive(id metadata.SessionID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.live[id]
	return ok
}

// StopKeepAlive stops the keep-alive of a live session: it expires ttl from
// now. It reports whether the session was alive.
func (t *Table) StopKeepAlive(id metadata.SessionID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.live[id]
	if !ok {
		return false
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(s.ttl, func() { _ = s.end() })
	}
	return true
}

// Expire ends a session now, as if its TTL had run out.
func (t *Table) Expire(id metadata.SessionID) {
	t.mu.Lock()
	s, ok := t.live[id]
	t.mu.Unlock()
	if ok {
		_ = s.end()
	}
}

// CloseAll ends every live session and refuses new ones. It returns the
// first purge error.
func (t *Table) CloseAll() error {
	t.mu.Lock()
	t.closed = true
	all := make([]*Session, 0, len(t.live))
	for _, s := range t.live {
		all = append(all, s)
	}
	t.mu.Unlock()
	var first error
	for _, s := range all {
		if err := s.end(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// ID implements metadata.Session.
func (s *Session) ID() metadata.SessionID { return s.id }

// Done implements metadata.Session. It closes after the session's
// ephemerals were purged (or the purge failed).
func (s *Session) Done() <-chan struct{} { return s.done }

// Close implements metadata.Session: it ends the session and deletes its
// ephemeral records. Closing an ended session returns nil (or the error of
// the purge that ended it).
func (s *Session) Close(ctx context.Context) error {
	go s.end()
	select {
	case <-s.ended:
		return s.endErr
	case <-ctx.Done():
		return fmt.Errorf("%w: session close: %w", metadata.ErrUnavailable, ctx.Err())
	}
}

// end runs once: the session stops being alive, then its ephemerals are
// purged, then Done closes. Later callers wait for the first one.
func (s *Session) end() error {
	s.once.Do(func() {
		t := s.table
		t.mu.Lock()
		delete(t.live, s.id)
		if s.timer != nil {
			s.timer.Stop()
		}
		t.mu.Unlock()
		s.endErr = t.purge(s.id)
		close(s.ended)
		close(s.done)
	})
	<-s.ended
	return s.endErr
}
