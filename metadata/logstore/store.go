package logstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/internal/filesync"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/internal/commitq"
	"github.com/nereusstream/nereus-go/metadata/internal/kvcheck"
	"github.com/nereusstream/nereus-go/metadata/internal/sessions"
	"github.com/nereusstream/nereus-go/metadata/internal/viabatch"
	"github.com/nereusstream/nereus-go/metadata/internal/watchhub"
)

// Defaults for Options fields left zero.
const (
	// DefaultMaxBatchOps bounds how many ops are coalesced from different
	// calls into one commit (as boltstore's).
	DefaultMaxBatchOps = 10000
	// DefaultMaxValueBytes bounds one value (as boltstore's).
	DefaultMaxValueBytes = 1 << 20
	// DefaultOpenTimeout bounds the wait for the directory lock.
	DefaultOpenTimeout = 5 * time.Second
	// DefaultPreallocBytes is the zero-filled chunk kept ahead of the log
	// writer.
	DefaultPreallocBytes = 4 << 20
	// DefaultCompactMinBytes: no compaction while the logs hold less.
	DefaultCompactMinBytes = 64 << 20
	// DefaultCompactRatio: compact once the logs hold this many times the
	// live (persistent) bytes.
	DefaultCompactRatio = 4
)

// Options configure a Store. Zero fields take the defaults above.
type Options struct {
	// MaxBatchDelay is how long the committer waits for more writes,
	// counted from the oldest queued write (default 0, as boltstore: writes
	// that queue during one commit form the next).
	MaxBatchDelay time.Duration
	// MaxBatchOps stops coalescing further calls into a commit once it
	// holds this many ops. A single Batch call is never split.
	MaxBatchOps int
	// MaxValueBytes rejects larger values with ErrInvalidArgument.
	MaxValueBytes int
	// WatchBuffer is the per-watcher event buffer before a resync (default
	// 1024).
	WatchBuffer int
	// OpenTimeout bounds the wait for another process's directory lock.
	OpenTimeout time.Duration
	// PreallocBytes is the chunk of zeros kept synced ahead of the log
	// writer (negative: none, every commit grows the file).
	PreallocBytes int64
	// CompactMinBytes and CompactRatio: a snapshot is written (and the
	// logs before it deleted) once the logs hold more than CompactMinBytes
	// and more than CompactRatio times the live bytes.
	CompactMinBytes int64
	CompactRatio    int64

	// testNoSync skips the commit fdatasync: the power-cut mutant
	// (export_test.go). Never set outside tests.
	testNoSync bool
}

func (o Options) withDefaults() Options {
	if o.MaxBatchDelay < 0 {
		o.MaxBatchDelay = 0
	}
	if o.MaxBatchOps <= 0 {
		o.MaxBatchOps = DefaultMaxBatchOps
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = DefaultMaxValueBytes
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = DefaultOpenTimeout
	}
	if o.PreallocBytes == 0 {
		o.PreallocBytes = DefaultPreallocBytes
	} else if o.PreallocBytes < 0 {
		o.PreallocBytes = 0
	}
	if o.CompactMinBytes <= 0 {
		o.CompactMinBytes = DefaultCompactMinBytes
	}
	if o.CompactRatio <= 0 {
		o.CompactRatio = DefaultCompactRatio
	}
	return o
}

// Store is the log-structured store.
type Store struct {
	dir  string
	lock *os.File
	opts Options
	hub  *watchhub.Hub

	sessions     *sessions.Table
	sessionEpoch uint64
	sessionN     uint32 // touched only by the session table, under its lock

	// view is the last committed (durable) state; readers load it.
	view atomic.Pointer[tree]

	// Committer-owned state.
	work     *tree            // view plus nothing: reset to view's clone after a failure
	version  metadata.Version // last issued version
	log      *logFile
	logBytes int64 // bytes in the logs since the newest snapshot
	live     int64 // snapshot size of the persistent entries
	failed   error // a write or flush failed: no further commit is attempted
	buf      []byte

	// Compaction (compact.go). compacting is set by the committer and
	// cleared by the compactor.
	compacting atomic.Bool
	nextLog    chan *logFile
	snapState  chan snapshotState
	compactWG  sync.WaitGroup
	compactErr atomic.Pointer[error]

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	queue   *commitq.Queue[*request] // the committer's requests
	stopped chan struct{}

	stats struct {
		commits, requests, ops, flushes, compactions atomic.Int64
	}
	statLog, statLive atomic.Int64
}

var _ metadata.Store = (*Store)(nil)

// request is one call waiting for the committer.
type request struct {
	ctx     context.Context
	ops     []metadata.Op
	purge   metadata.SessionID // non-zero: delete this session's ephemerals instead of ops
	results []metadata.Result
	err     error
	done    chan struct{}
}

// Open opens (creating if needed) the store directory dir: it takes the
// directory lock, loads the newest snapshot, replays the logs after it
// (cutting a torn tail off the newest), starts a new log and makes the new
// session epoch durable, all before it returns.
func Open(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("logstore: open %s: %w", dir, err)
	}
	// The directory's own entry must be durable too, or a power cut can
	// lose the whole store (found by TestPowerCutRecovery). Once per open.
	if err := filesync.SyncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
		return nil, fmt.Errorf("logstore: open %s: %w", dir, err)
	}
	lock, err := filesync.LockDir(dir, opts.OpenTimeout)
	if err != nil {
		return nil, fmt.Errorf("logstore: open %s: %w", dir, err)
	}
	s := &Store{
		dir:       dir,
		lock:      lock,
		opts:      opts,
		hub:       watchhub.New(opts.WatchBuffer),
		queue:     commitq.New(opts.MaxBatchOps, opts.MaxBatchDelay, func(r *request) int { return len(r.ops) }),
		stopped:   make(chan struct{}),
		nextLog:   make(chan *logFile, 1),
		snapState: make(chan snapshotState, 1),
	}
	if err := s.recover(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	s.view.Store(s.work.Clone())
	s.sessions = sessions.New(func() metadata.SessionID {
		s.sessionN++
		return metadata.SessionID(s.sessionEpoch<<32 | uint64(s.sessionN))
	}, s.purgeSession)
	go s.run()
	return s, nil
}

// Get implements metadata.Store.
func (s *Store) Get(ctx context.Context, key string) (metadata.Record, error) {
	return viabatch.Get(ctx, s, key)
}

// Put implements metadata.Store.
func (s *Store) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	return viabatch.Put(ctx, s, key, value, expected)
}

// PutEphemeral implements metadata.Store.
func (s *Store) PutEphemeral(ctx context.Context, key string, value []byte, expected metadata.Version, session metadata.SessionID) (metadata.Version, error) {
	return viabatch.PutEphemeral(ctx, s, key, value, expected, session)
}

// Delete implements metadata.Store.
func (s *Store) Delete(ctx context.Context, key string, expected metadata.Version) error {
	return viabatch.Delete(ctx, s, key, expected)
}

// RangeScan implements metadata.Store. It reads one committed state.
func (s *Store) RangeScan(ctx context.Context, min, max string, limit int) ([]metadata.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := kvcheck.ValidateRange(min, max); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, metadata.ErrClosed
	}
	out := []metadata.Record{}
	if min == max {
		return out, nil
	}
	s.view.Load().AscendRange(item{key: min}, item{key: max}, func(it item) bool {
		e := it.e
		if limit > 0 && len(out) >= limit {
			return false
		}
		out = append(out, e.record())
		return true
	})
	return out, nil
}

// Batch implements metadata.Store. A Batch of only Gets reads the last
// committed state; any other Batch is one write request: all its ops commit
// in one log append, in op order, each on its own.
func (s *Store) Batch(ctx context.Context, ops []metadata.Op) ([]metadata.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, metadata.ErrClosed
	}
	readOnly := true
	for _, op := range ops {
		if op.Kind != metadata.OpGet {
			readOnly = false
			break
		}
	}
	if readOnly {
		return s.read(ops), nil
	}
	r := &request{ctx: ctx, ops: ops, done: make(chan struct{})}
	if err := s.submit(r, true); err != nil {
		return nil, err
	}
	select {
	case <-r.done:
		return r.results, r.err
	case <-ctx.Done():
		// Queued or being committed: it may still commit.
		return nil, fmt.Errorf("%w: %w", metadata.ErrUnavailable, ctx.Err())
	}
}

func (s *Store) read(ops []metadata.Op) []metadata.Result {
	t := s.view.Load()
	out := make([]metadata.Result, len(ops))
	for i, op := range ops {
		if err := kvcheck.ValidateOp(op, 0); err != nil {
			out[i] = metadata.Result{Err: err}
			continue
		}
		e, ok := lookup(t, op.Key)
		if !ok {
			out[i] = metadata.Result{Err: metadata.ErrKeyNotFound}
			continue
		}
		out[i] = metadata.Result{Record: e.record(), Version: e.version}
	}
	return out
}

// submit queues a request for the committer. Public requests are refused
// once Close has begun; the session purges Close itself issues are not.
func (s *Store) submit(r *request, public bool) error {
	if !s.queue.Submit(r, public) {
		return metadata.ErrClosed
	}
	return nil
}

// Watch implements metadata.Store. Events are published by the committer
// after each commit is durable, so they arrive in commit order.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan metadata.Event, error) {
	if s.closed.Load() {
		return nil, metadata.ErrClosed
	}
	return s.hub.Watch(ctx, prefix)
}

// NewSession implements metadata.Store. Sessions live in this process; see
// package internal/sessions for the keep-alive model.
func (s *Store) NewSession(ctx context.Context, ttl time.Duration) (metadata.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
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

// StopKeepAlive stops a session's keep-alive: it expires ttl from now
// (tests). It reports whether the session was alive.
func (s *Store) StopKeepAlive(id metadata.SessionID) bool { return s.sessions.StopKeepAlive(id) }

// purgeSession deletes a session's ephemerals through the committer, so the
// deletes are ordered after every write that saw the session alive.
func (s *Store) purgeSession(id metadata.SessionID) error {
	r := &request{ctx: context.Background(), purge: id, done: make(chan struct{})}
	if err := s.submit(r, false); err != nil {
		return err
	}
	<-r.done
	return r.err
}

// Stats are cumulative committer counters.
type Stats struct {
	// Commits is the number of commit rounds, Requests the write calls
	// (and session purges) and Ops the ops they held.
	Commits, Requests, Ops int64
	// Flushes is the number of log appends (each one fdatasync); a round
	// that changed nothing durable flushes nothing.
	Flushes int64
	// Compactions is the number of snapshots written.
	Compactions int64
	// LogBytes is the size of the logs since the newest snapshot, LiveBytes
	// the size the persistent entries take in a snapshot (as of the last
	// commit round).
	LogBytes, LiveBytes int64
}

// Stats returns the committer counters.
func (s *Store) Stats() Stats {
	return Stats{
		Commits: s.stats.commits.Load(), Requests: s.stats.requests.Load(), Ops: s.stats.ops.Load(),
		Flushes: s.stats.flushes.Load(), Compactions: s.stats.compactions.Load(),
		LogBytes: s.statLog.Load(), LiveBytes: s.statLive.Load(),
	}
}

// CompactErr returns the last compaction's error (nil: none failed since).
func (s *Store) CompactErr() error {
	if p := s.compactErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Close implements metadata.Store. It refuses new calls, ends every session
// (deleting its ephemerals), commits what was already queued, waits for a
// running compaction, closes watch channels, the log and the lock.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.queue.RefusePublic()
		errSessions := s.sessions.CloseAll()
		s.queue.Stop()
		<-s.stopped
		s.compactWG.Wait()
		s.hub.Close()
		var errLog error
		select {
		case l := <-s.nextLog: // a compaction's log the committer never took
			errLog = l.close()
		default:
		}
		errLog = errors.Join(errLog, s.log.close())
		s.closeErr = errors.Join(errSessions, errLog, s.lock.Close())
	})
	return s.closeErr
}
