package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nereusstream/nereus-go/metadata"
)

// session is a lease kept alive by the client.
type session struct {
	store *Store
	id    metadata.SessionID
	ttl   time.Duration // as granted (etcd may raise it to its minimum)

	kaCancel context.CancelFunc // stops the keep-alive
	closing  chan struct{}      // closed when an end has begun
	done     chan struct{}
	once     sync.Once
	endErr   error
}

// NewSession implements metadata.Store: it grants a lease of ttl (rounded
// up to whole seconds) and keeps it alive until Close.
func (s *Store) NewSession(ctx context.Context, ttl time.Duration) (metadata.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: session ttl %v", metadata.ErrInvalidArgument, ttl)
	}
	if s.closed.Load() {
		return nil, metadata.ErrClosed
	}
	secs := max(int64(math.Ceil(ttl.Seconds())), 1)
	grant, err := s.client.Grant(ctx, secs)
	if err != nil {
		return nil, s.mapErr(err)
	}
	kaCtx, kaCancel := context.WithCancel(s.ctx)
	ch, err := s.client.KeepAlive(kaCtx, grant.ID)
	if err != nil {
		kaCancel()
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = s.client.Revoke(rctx, grant.ID)
		cancel()
		return nil, s.mapErr(err)
	}
	ss := &session{
		store:    s,
		id:       metadata.SessionID(grant.ID),
		ttl:      time.Duration(grant.TTL) * time.Second,
		kaCancel: kaCancel,
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.mu.Lock()
	s.sessions[ss.id] = ss
	s.mu.Unlock()
	s.wg.Add(1)
	go ss.monitor(ch)
	return ss, nil
}

// StopKeepAlive stops a session's keep-alive (tests): etcd expires the
// lease one TTL after the last keep-alive, deleting its keys, and Done
// closes once etcd confirms it. It reports whether the session was alive.
func (s *Store) StopKeepAlive(id metadata.SessionID) bool {
	s.mu.Lock()
	ss, ok := s.sessions[id]
	s.mu.Unlock()
	if ok {
		ss.kaCancel()
	}
	return ok
}

func (ss *session) ID() metadata.SessionID { return ss.id }
func (ss *session) Done() <-chan struct{}  { return ss.done }

// Close ends the session: the lease is revoked, which deletes its
// ephemerals in the same etcd step. If the revoke's outcome is unknown,
// the error wraps metadata.ErrUnavailable; the lease then still expires
// one TTL later, as keep-alives have stopped.
func (ss *session) Close(ctx context.Context) error {
	ss.end(func() error {
		_, err := ss.store.client.Revoke(ctx, clientv3.LeaseID(ss.id))
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return ss.store.mapErr(err)
		}
		return nil
	})
	return ss.endErr
}

// end runs finish once: stop keep-alives, finish (revoke or confirm
// expiry), forget the session, close Done.
func (ss *session) end(finish func() error) {
	ss.once.Do(func() {
		close(ss.closing)
		ss.kaCancel()
		ss.endErr = finish()
		ss.store.mu.Lock()
		delete(ss.store.sessions, ss.id)
		ss.store.mu.Unlock()
		close(ss.done)
	})
}

// monitor drains keep-alive responses. The session is lost when the
// keep-alive channel closes without Close (lease gone, keep-alive stopped)
// or when no keep-alive has succeeded for a whole TTL (etcd unreachable: the
// lease has most likely expired there, and acting on it any longer would be
// unsafe).
func (ss *session) monitor(ch <-chan *clientv3.LeaseKeepAliveResponse) {
	defer ss.store.wg.Done()
	timer := time.NewTimer(ss.ttl)
	defer timer.Stop()
	for {
		select {
		case resp, ok := <-ch:
			if !ok || resp.TTL <= 0 {
				select {
				case <-ss.closing:
					return
				default:
				}
				ss.end(ss.awaitExpiry)
				return
			}
			timer.Reset(ss.ttl)
		case <-timer.C:
			ss.kaCancel()
			ss.end(ss.awaitExpiry)
			return
		case <-ss.closing:
			return
		}
	}
}

// awaitExpiry waits (bounded by a TTL plus 5 s) until etcd reports the
// lease gone, so that Done means "its ephemerals are deleted". If etcd
// still holds the lease at the bound, it is revoked; if etcd cannot be
// reached, Done closes anyway: the session must be treated as over.
func (ss *session) awaitExpiry() error {
	c := ss.store.client
	ctx, cancel := context.WithTimeout(context.Background(), ss.ttl+5*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		resp, err := c.TimeToLive(rctx, clientv3.LeaseID(ss.id))
		rcancel()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL < 0) {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := c.Revoke(rctx, clientv3.LeaseID(ss.id))
			rcancel()
			if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return fmt.Errorf("%w: session %d lost; revoke: %w", metadata.ErrUnavailable, ss.id, err)
			}
			return nil
		}
	}
}
