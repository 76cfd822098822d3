// Package etcdstore is the distributed metadata.Store on etcd v3: a key's
// Version is its etcd mod_revision, a session is a lease kept alive by the
// client, an ephemeral record is a key attached to that lease, and Watch is
// an etcd watch started at the revision current when Watch returns.
//
// It owns the mapping of the metadata contract onto etcd requests. It must
// never claim an outcome etcd did not report: a request that failed in
// transport (timeout, connection loss, cancelled context) returns an error
// wrapping metadata.ErrUnavailable, never a guess.
//
// # Mapping
//
//	Put(AnyVersion)        → put
//	Put(NotExists)         → txn(create_revision(k) = 0, then put, else get k)
//	Put(v)                 → txn(mod_revision(k) = v,    then put, else get k)
//	Delete(AnyVersion)     → delete (deleted = 0 → ErrKeyNotFound)
//	Delete(v)              → txn(mod_revision(k) = v,    then delete, else get k)
//	PutEphemeral(session)  → the same, with the put attached to lease = session
//	new Version            → the revision of the transaction that wrote it
//
// # Batch
//
// etcd has no transaction whose comparisons succeed or fail one by one, but
// a transaction may contain nested transactions, each with its own compare
// and its own then/else branch (etcd ≥ 3.3). A Batch is therefore sent as
// outer transactions with no compare whose then-branch holds one nested
// transaction (or plain get/put/delete) per op: one round trip per chunk,
// independent per-op outcomes. Limits shape the chunks:
//
//   - etcd rejects a transaction that writes one key twice, so the ops of a
//     Batch are split into rounds: round r holds the r-th op on each key.
//     Rounds run one after another, which is what keeps same-key ops in op
//     order; different keys in one round go into the same transactions.
//   - --max-txn-ops (default 128) bounds the ops per transaction: chunks hold
//     at most Options.MaxOpsPerTxn (default 64) ops and Options.MaxTxnBytes
//     (default 1 MiB, under etcd's 1.5 MiB request limit) of keys and
//     values. Chunks of one round are sent concurrently, at most
//     Options.MaxConcurrentTxns at a time.
//   - A transaction fails as a whole if one nested put names an expired
//     lease. Then nothing of it was applied, so the chunk is retried with
//     its ephemeral puts sent one by one: an expired session fails only its
//     own op (ErrSessionExpired), never its siblings. A chunk etcd refuses
//     as too large is split in half and retried the same way.
//
// All writes of one outer transaction share its revision, so different keys
// written by one Batch may get the same Version (the contract only promises
// per-key versions). Ops of one Batch are atomic together within a chunk;
// callers must not rely on that.
//
// # Sessions
//
// NewSession grants a lease (TTL rounded up to whole seconds; etcd raises it
// to its minimum, about 2 s with default timing) and keeps it alive. The
// session ends when Close revokes the lease (etcd deletes its keys in the
// same step), when etcd reports the lease gone, or when no keep-alive has
// succeeded for a whole TTL: then the client presumes the lease expired,
// waits (bounded) for etcd to confirm it, revokes it if etcd answers but
// still holds it, and closes Done.
package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/internal/kvcheck"
	"github.com/nereusstream/nereus-go/metadata/internal/viabatch"
)

// Options configure a Store. Zero fields take the defaults.
type Options struct {
	// Prefix namespaces every key: the metadata key k is stored at
	// Prefix+k. Use it to share one etcd cluster between deployments (or
	// tests).
	Prefix string
	// MaxOpsPerTxn bounds ops per etcd transaction (default 64; must stay
	// below the server's --max-txn-ops, default 128).
	MaxOpsPerTxn int
	// MaxTxnBytes bounds the key and value bytes per transaction (default
	// 1 MiB; the server's --max-request-bytes defaults to 1.5 MiB).
	MaxTxnBytes int
	// MaxConcurrentTxns bounds the transactions one Batch has in flight
	// (default 8).
	MaxConcurrentTxns int
	// MaxValueBytes rejects larger values with ErrInvalidArgument (default
	// 1 MiB).
	MaxValueBytes int
	// WatchBuffer is the per-watcher event buffer before a resync (default
	// 1024).
	WatchBuffer int
}

func (o Options) withDefaults() Options {
	if o.MaxOpsPerTxn <= 0 {
		o.MaxOpsPerTxn = 64
	}
	if o.MaxTxnBytes <= 0 {
		o.MaxTxnBytes = 1 << 20
	}
	if o.MaxConcurrentTxns <= 0 {
		o.MaxConcurrentTxns = 8
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = 1 << 20
	}
	return o
}

// Store is the etcd-backed store.
type Store struct {
	client     *clientv3.Client
	ownsClient bool
	opts       Options

	// ctx is cancelled by Close: it ends keep-alives and watches.
	ctx    context.Context
	cancel context.CancelFunc
	closed atomic.Bool

	mu        sync.Mutex
	sessions  map[metadata.SessionID]*session
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup // watch bridges and session monitors
}

var _ metadata.Store = (*Store)(nil)

// New returns a store on an existing client. Close does not close the
// client.
func New(client *clientv3.Client, opts Options) *Store {
	ctx, cancel := context.WithCancel(context.Background())
	return &Store{
		client:   client,
		opts:     opts.withDefaults(),
		ctx:      ctx,
		cancel:   cancel,
		sessions: map[metadata.SessionID]*session{},
	}
}

// Open dials etcd and returns a store that owns the client.
func Open(cfg clientv3.Config, opts Options) (*Store, error) {
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: dial %v: %w", cfg.Endpoints, err)
	}
	s := New(c, opts)
	s.ownsClient = true
	return s, nil
}

func (s *Store) key(k string) string { return s.opts.Prefix + k }

// mapErr classifies an error from etcd. Only errors that prove nothing was
// applied map to definite outcomes; everything else is unknown.
func (s *Store) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w: %w", metadata.ErrSessionExpired, err)
	case errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrTooManyOps),
		errors.Is(err, rpctypes.ErrDuplicateKey), errors.Is(err, rpctypes.ErrEmptyKey):
		return fmt.Errorf("%w: %w", metadata.ErrInvalidArgument, err)
	case errors.Is(err, context.Canceled) && s.closed.Load():
		return metadata.ErrClosed
	default:
		return fmt.Errorf("%w: etcd: %w", metadata.ErrUnavailable, err)
	}
}

// Get implements metadata.Store (a linearizable read).
func (s *Store) Get(ctx context.Context, key string) (metadata.Record, error) {
	if err := ctx.Err(); err != nil {
		return metadata.Record{}, err
	}
	if s.closed.Load() {
		return metadata.Record{}, metadata.ErrClosed
	}
	if err := kvcheck.ValidateOp(metadata.Op{Kind: metadata.OpGet, Key: key}, 0); err != nil {
		return metadata.Record{}, err
	}
	resp, err := s.client.Get(ctx, s.key(key))
	if err != nil {
		return metadata.Record{}, s.mapErr(err)
	}
	if len(resp.Kvs) == 0 {
		return metadata.Record{}, metadata.ErrKeyNotFound
	}
	return s.record(resp.Kvs[0].Key, resp.Kvs[0].Value, resp.Kvs[0].ModRevision, resp.Kvs[0].Lease), nil
}

func (s *Store) record(k, v []byte, rev, lease int64) metadata.Record {
	return metadata.Record{
		Key:     string(k[len(s.opts.Prefix):]),
		Value:   append([]byte{}, v...),
		Version: metadata.Version(rev),
		Session: metadata.SessionID(lease),
	}
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

// RangeScan implements metadata.Store (one linearizable range read).
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
	opts := []clientv3.OpOption{clientv3.WithRange(s.key(max)), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	resp, err := s.client.Get(ctx, s.key(min), opts...)
	if err != nil {
		return nil, s.mapErr(err)
	}
	for _, kv := range resp.Kvs {
		out = append(out, s.record(kv.Key, kv.Value, kv.ModRevision, kv.Lease))
	}
	return out, nil
}

// Batch implements metadata.Store; see the package doc for the mapping.
// If any chunk's round trip fails in transport, Batch returns an error
// (every mutating op's outcome is then unknown, as the contract says).
func (s *Store) Batch(ctx context.Context, ops []metadata.Op) ([]metadata.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, metadata.ErrClosed
	}
	results := make([]metadata.Result, len(ops))
	// Split into rounds: round r holds the r-th valid op of every key.
	var rounds [][]int
	seen := map[string]int{}
	for i, op := range ops {
		if err := kvcheck.ValidateOp(op, s.opts.MaxValueBytes); err != nil {
			results[i] = metadata.Result{Err: err}
			continue
		}
		r := seen[op.Key]
		seen[op.Key] = r + 1
		if r == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], i)
	}
	for _, round := range rounds {
		if err := s.runRound(ctx, ops, round, results); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// runRound sends one round's ops (distinct keys) in chunks, concurrently.
func (s *Store) runRound(ctx context.Context, ops []metadata.Op, idx []int, results []metadata.Result) error {
	var chunks [][]int
	var cur []int
	bytes := 0
	for _, i := range idx {
		n := len(ops[i].Key) + len(ops[i].Value)
		if len(cur) > 0 && (len(cur) >= s.opts.MaxOpsPerTxn || bytes+n > s.opts.MaxTxnBytes) {
			chunks = append(chunks, cur)
			cur, bytes = nil, 0
		}
		cur = append(cur, i)
		bytes += n
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	sem := make(chan struct{}, s.opts.MaxConcurrentTxns)
	errs := make([]error, len(chunks))
	var wg sync.WaitGroup
	for c, chunk := range chunks {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[c] = s.runChunk(ctx, ops, chunk, results)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runChunk sends one outer transaction. A transaction etcd refused as a
// whole was not applied, so it is split and retried.
func (s *Store) runChunk(ctx context.Context, ops []metadata.Op, chunk []int, results []metadata.Result) error {
	thenOps := make([]clientv3.Op, len(chunk))
	for j, i := range chunk {
		thenOps[j] = s.etcdOp(ops[i])
	}
	resp, err := s.client.Txn(ctx).Then(thenOps...).Commit()
	switch {
	case err == nil:
	case errors.Is(err, rpctypes.ErrLeaseNotFound) && len(chunk) > 1:
		// One ephemeral put named a dead lease and sank the whole
		// transaction (nothing applied). Send ephemeral puts alone.
		var plain, eph []int
		for _, i := range chunk {
			if ops[i].Kind == metadata.OpPut && ops[i].Session != 0 {
				eph = append(eph, i)
			} else {
				plain = append(plain, i)
			}
		}
		var errs []error
		if len(plain) > 0 {
			errs = append(errs, s.runChunk(ctx, ops, plain, results))
		}
		for _, i := range eph {
			errs = append(errs, s.runChunk(ctx, ops, []int{i}, results))
		}
		return errors.Join(errs...)
	case errors.Is(err, rpctypes.ErrRequestTooLarge) && len(chunk) > 1:
		half := len(chunk) / 2
		return errors.Join(s.runChunk(ctx, ops, chunk[:half], results), s.runChunk(ctx, ops, chunk[half:], results))
	default:
		mapped := s.mapErr(err)
		if c := metadata.Classify(mapped); c == metadata.NotApplied && len(chunk) == 1 {
			// A definite refusal of a single op is that op's result.
			results[chunk[0]] = metadata.Result{Err: mapped}
			return nil
		}
		return mapped
	}
	rev := metadata.Version(resp.Header.Revision)
	for j, i := range chunk {
		results[i] = s.result(ops[i], resp.Responses[j], rev)
	}
	return nil
}

// etcdOp maps one op to a request inside the outer transaction's
// then-branch.
func (s *Store) etcdOp(op metadata.Op) clientv3.Op {
	k := s.key(op.Key)
	switch op.Kind {
	case metadata.OpGet:
		return clientv3.OpGet(k)
	case metadata.OpPut:
		var popts []clientv3.OpOption
		if op.Session != 0 {
			popts = append(popts, clientv3.WithLease(clientv3.LeaseID(op.Session)))
		}
		put := clientv3.OpPut(k, string(op.Value), popts...)
		switch op.Expected {
		case metadata.AnyVersion:
			return put
		case metadata.NotExists:
			return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0)},
				[]clientv3.Op{put}, []clientv3.Op{clientv3.OpGet(k, clientv3.WithKeysOnly())})
		default:
			return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k), "=", int64(op.Expected))},
				[]clientv3.Op{put}, []clientv3.Op{clientv3.OpGet(k, clientv3.WithKeysOnly())})
		}
	default: // OpDelete
		del := clientv3.OpDelete(k)
		if op.Expected == metadata.AnyVersion {
			return del
		}
		return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k), "=", int64(op.Expected))},
			[]clientv3.Op{del}, []clientv3.Op{clientv3.OpGet(k, clientv3.WithKeysOnly())})
	}
}

// result reads one op's outcome from its response.
func (s *Store) result(op metadata.Op, r *etcdserverpb.ResponseOp, rev metadata.Version) metadata.Result {
	if nested := r.GetResponseTxn(); nested != nil {
		if nested.Succeeded {
			if op.Kind == metadata.OpPut {
				return metadata.Result{Version: rev}
			}
			return metadata.Result{}
		}
		// The else-branch read the key: absent or at another version.
		exists := false
		if len(nested.Responses) == 1 {
			if rr := nested.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
				exists = true
			}
		}
		switch {
		case op.Expected == metadata.NotExists:
			return metadata.Result{Err: fmt.Errorf("%w: key exists", metadata.ErrUnexpectedVersion)}
		case !exists:
			return metadata.Result{Err: fmt.Errorf("%w: %w (expected version %d)", metadata.ErrUnexpectedVersion, metadata.ErrKeyNotFound, op.Expected)}
		default:
			return metadata.Result{Err: fmt.Errorf("%w: expected version %d", metadata.ErrUnexpectedVersion, op.Expected)}
		}
	}
	switch op.Kind {
	case metadata.OpGet:
		rr := r.GetResponseRange()
		if rr == nil || len(rr.Kvs) == 0 {
			return metadata.Result{Err: metadata.ErrKeyNotFound}
		}
		rec := s.record(rr.Kvs[0].Key, rr.Kvs[0].Value, rr.Kvs[0].ModRevision, rr.Kvs[0].Lease)
		return metadata.Result{Record: rec, Version: rec.Version}
	case metadata.OpPut:
		return metadata.Result{Version: rev}
	default:
		if dr := r.GetResponseDeleteRange(); dr == nil || dr.Deleted == 0 {
			return metadata.Result{Err: metadata.ErrKeyNotFound}
		}
		return metadata.Result{}
	}
}

// Close implements metadata.Store: it revokes every session's lease (their
// ephemerals go with it), stops watches, and closes the client if it owns
// it.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.mu.Lock()
		all := make([]*session, 0, len(s.sessions))
		for _, ss := range s.sessions {
			all = append(all, ss)
		}
		s.mu.Unlock()
		var errs []error
		for _, ss := range all {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			errs = append(errs, ss.Close(ctx))
			cancel()
		}
		s.cancel()
		s.wg.Wait()
		if s.ownsClient {
			errs = append(errs, s.client.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
