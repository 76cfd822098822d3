package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

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
	// DefaultMaxBatchDelay is no added delay. Measured with
	// BenchmarkCASConcurrent64 on a shared 2-core VM (commit ≈ 1.5 ms): with
	// no delay, writes that arrive during one commit form the next, so two
	// cohorts of ~32 writers alternate and the disk is never idle (≈ 60-74k
	// CAS/s, p50 ≈ 0.8-1 ms); any delay from 100 µs to 1 ms merged all 64
	// into one transaction but left the disk idle while waiting (≈ 38k
	// CAS/s, p50 ≈ 1.6 ms), and 2 ms halved throughput again. A delay can
	// still pay off where a commit is much cheaper than the gap between
	// arrivals; set MaxBatchDelay then.
	DefaultMaxBatchDelay time.Duration = 0
	// DefaultMaxBatchOps bounds how many ops are coalesced from different
	// calls into one transaction.
	DefaultMaxBatchOps = 10000
	// DefaultMaxValueBytes bounds one value (etcd's default request limit is
	// 1.5 MiB, so values that fit here fit there too).
	DefaultMaxValueBytes = 1 << 20
	// DefaultInitialMmapSize is the address space mapped at open.
	DefaultInitialMmapSize = 64 << 20
	// DefaultOpenTimeout bounds the wait for the file lock.
	DefaultOpenTimeout = 5 * time.Second
	// maxKeyBytes is bbolt's key limit minus the ephemeral index prefix.
	maxKeyBytes = bolt.MaxKeySize - 8
)

// Options configure a Store. Zero fields take the defaults above.
type Options struct {
	// MaxBatchDelay is how long the committer waits for more writes, counted
	// from the oldest queued write, before committing (default 0: commit as
	// soon as the committer is free; writes that queued during the previous
	// commit are grouped anyway). Longer groups more writes per fsync at the
	// cost of latency, and of disk idle time while waiting.
	MaxBatchDelay time.Duration
	// MaxBatchOps stops coalescing further calls into a transaction once it
	// holds this many ops (default DefaultMaxBatchOps). A single Batch call
	// is never split, whatever its size.
	MaxBatchOps int
	// MaxValueBytes rejects larger values with ErrInvalidArgument (default
	// DefaultMaxValueBytes).
	MaxValueBytes int
	// WatchBuffer is the per-watcher event buffer before a resync (default
	// 1024).
	WatchBuffer int
	// InitialMmapSize is passed to bbolt (default DefaultInitialMmapSize).
	// Readers wait while bbolt re-maps a growing file; a large initial map
	// makes that rare.
	InitialMmapSize int
	// OpenTimeout bounds the wait for another process's file lock (default
	// DefaultOpenTimeout).
	OpenTimeout time.Duration

	// testHookInTxn, if set, runs inside every write transaction before
	// commit (tests: hold a write transaction open).
	testHookInTxn func()
	// testNoSync skips bbolt's commit fsyncs: the power-cut mutant
	// (export_test.go). Never set outside tests.
	testNoSync bool
}

func (o Options) withDefaults() Options {
	if o.MaxBatchDelay < 0 {
		o.MaxBatchDelay = DefaultMaxBatchDelay
	}
	if o.MaxBatchOps <= 0 {
		o.MaxBatchOps = DefaultMaxBatchOps
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = DefaultMaxValueBytes
	}
	if o.InitialMmapSize <= 0 {
		o.InitialMmapSize = DefaultInitialMmapSize
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = DefaultOpenTimeout
	}
	return o
}

// Store is the bbolt-backed store.
type Store struct {
	db   *bolt.DB
	opts Options
	hub  *watchhub.Hub

	sessions     *sessions.Table
	sessionEpoch uint64
	sessionN     uint32 // touched only by the session table, under its lock

	// closed makes public calls fail fast with ErrClosed.
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	queue   *commitq.Queue[*request] // the committer's requests
	stopped chan struct{}

	stats struct {
		commits  atomic.Int64
		requests atomic.Int64
		ops      atomic.Int64
	}
}

var _ metadata.Store = (*Store)(nil)

// request is one call waiting for the committer.
type request struct {
	ctx   context.Context
	ops   []metadata.Op
	purge metadata.SessionID // non-zero: delete this session's ephemerals instead of ops
	// Written by the committer before done closes.
	results []metadata.Result
	err     error
	done    chan struct{}
}

// Open opens (creating if needed) the store file at path. Ephemeral records
// left by a previous process are deleted before Open returns.
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         opts.OpenTimeout,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: opts.InitialMmapSize,
		NoSync:          opts.testNoSync,
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	// bbolt fsyncs the file, never the directory holding it: a new file's
	// name is not durable until its directory is synced, and without this a
	// power cut after the first acknowledged commits could lose the whole
	// file (found by TestPowerCutRecovery on crashfs). Once per open.
	if err := syncDir(filepath.Dir(path)); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	s := &Store{
		db:      db,
		opts:    opts,
		hub:     watchhub.New(opts.WatchBuffer),
		queue:   commitq.New(opts.MaxBatchOps, opts.MaxBatchDelay, func(r *request) int { return len(r.ops) }),
		stopped: make(chan struct{}),
	}
	if err := s.recover(); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.sessions = sessions.New(func() metadata.SessionID {
		s.sessionN++
		return metadata.SessionID(s.sessionEpoch<<32 | uint64(s.sessionN))
	}, s.purgeSession)
	go s.run()
	return s, nil
}

// recover initialises a new file or checks an existing one, bumps the
// session epoch and deletes every ephemeral record, in one transaction.
func (s *Store) recover() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		kv, err := tx.CreateBucketIfNotExists(bucketKV)
		if err != nil {
			return err
		}
		eph, err := tx.CreateBucketIfNotExists(bucketEphemeral)
		if err != nil {
			return err
		}
		if f := meta.Get(metaFormat); f == nil {
			if err := meta.Put(metaFormat, encodeU32(fileFormat)); err != nil {
				return err
			}
		} else if v, err := decodeU32(metaFormat, f); err != nil {
			return err
		} else if v != fileFormat {
			return fmt.Errorf("boltstore: file format %d, this build reads %d", v, fileFormat)
		}
		if _, err := decodeU64(metaVersion, meta.Get(metaVersion)); err != nil {
			return err
		}
		epoch, err := decodeU64(metaSessions, meta.Get(metaSessions))
		if err != nil {
			return err
		}
		epoch++
		if epoch >= 1<<31 {
			return fmt.Errorf("boltstore: session epoch space exhausted")
		}
		s.sessionEpoch = epoch
		if err := meta.Put(metaSessions, encodeU64(epoch)); err != nil {
			return err
		}
		// Invariant 4: no ephemeral outlives the process that wrote it.
		var stale [][]byte
		if err := eph.ForEach(func(k, _ []byte) error {
			stale = append(stale, append([]byte{}, k...))
			return nil
		}); err != nil {
			return err
		}
		for _, ik := range stale {
			session := metadata.SessionID(int64(beUint64(ik[:8])))
			key := ik[8:]
			if b := kv.Get(key); b != nil {
				h, err := decodeRecord(key, b)
				if err != nil {
					// The intact index entry proves it was an ephemeral
					// of this session: delete it rather than keep it.
					h.session = session
				}
				if h.session == session {
					if err := kv.Delete(key); err != nil {
						return err
					}
				}
			}
			if err := eph.Delete(ik); err != nil {
				return err
			}
		}
		return nil
	})
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return v
}

// mapErr turns bbolt's "closed" errors into metadata.ErrClosed.
func mapErr(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) || errors.Is(err, bolterrors.ErrTxClosed) {
		return metadata.ErrClosed
	}
	return err
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

// RangeScan implements metadata.Store. It reads one consistent snapshot.
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
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketKV).Cursor()
		maxB := []byte(max)
		for k, v := c.Seek([]byte(min)); k != nil && bytes.Compare(k, maxB) < 0; k, v = c.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			h, err := decodeRecord(k, v)
			if err != nil {
				return err
			}
			out = append(out, h.record(string(k)))
		}
		return nil
	})
	if err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}

// Batch implements metadata.Store. A Batch of only Gets is served from one
// read snapshot; any other Batch is one write request: all its ops commit in
// one transaction, in op order, each on its own.
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
		return s.read(ops)
	}
	r := &request{ctx: ctx, ops: ops, done: make(chan struct{})}
	if err := s.submit(r, true); err != nil {
		return nil, err
	}
	select {
	case <-r.done:
		return r.results, r.err
	case <-ctx.Done():
		// Queued or in a transaction: it may still commit.
		return nil, fmt.Errorf("%w: %w", metadata.ErrUnavailable, ctx.Err())
	}
}

func (s *Store) read(ops []metadata.Op) ([]metadata.Result, error) {
	out := make([]metadata.Result, len(ops))
	err := s.db.View(func(tx *bolt.Tx) error {
		kv := tx.Bucket(bucketKV)
		for i, op := range ops {
			if err := kvcheck.ValidateOp(op, 0); err != nil {
				out[i] = metadata.Result{Err: err}
				continue
			}
			b := kv.Get([]byte(op.Key))
			if b == nil {
				out[i] = metadata.Result{Err: metadata.ErrKeyNotFound}
				continue
			}
			h, err := decodeRecord([]byte(op.Key), b)
			if err != nil {
				out[i] = metadata.Result{Err: err}
				continue
			}
			out[i] = metadata.Result{Record: h.record(op.Key), Version: h.version}
		}
		return nil
	})
	if err != nil {
		return nil, mapErr(err)
	}
	return out, nil
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
// after each commit, so they arrive in commit order.
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

// StopKeepAlive stops a session's keep-alive: it expires ttl from now, its
// ephemerals are deleted and Done closes (tests). It reports whether the
// session was alive.
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
	// Commits is the number of write transactions committed.
	Commits int64
	// Requests is the number of write calls (and session purges) they held.
	Requests int64
	// Ops is the number of ops they held.
	Ops int64
}

// Stats returns the committer counters.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.stats.commits.Load(), Requests: s.stats.requests.Load(), Ops: s.stats.ops.Load()}
}

// Close implements metadata.Store. It refuses new calls, ends every session
// (deleting its ephemerals), commits what was already queued, closes watch
// channels and the file. Closing twice returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.queue.RefusePublic()
		errSessions := s.sessions.CloseAll()
		s.queue.Stop()
		<-s.stopped
		s.hub.Close()
		s.closeErr = errors.Join(errSessions, s.db.Close())
	})
	return s.closeErr
}

// syncDir fsyncs a directory, making the entries in it durable.
func syncDir(dir string) error { return filesync.SyncDir(dir) }
