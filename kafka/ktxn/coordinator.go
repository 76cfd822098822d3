package ktxn

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/nereusstream/nereus-go/metadata"
)

const keyTxns = "kafka/txns/"

// ErrPartitionGone is returned by Storage.WriteMarker for a partition that
// no longer exists (its topic was deleted): there is nothing to mark.
var ErrPartitionGone = errors.New("kafka/ktxn: partition no longer exists")

// Storage is what the coordinator needs from the Kafka storage boundary.
type Storage interface {
	// AllocateProducerID returns a producer id never handed out before.
	AllocateProducerID(ctx context.Context) (int64, error)
	// WriteMarker appends a commit or abort marker for the producer to the
	// partition and returns once it committed. Repeating it is harmless.
	WriteMarker(ctx context.Context, tp TopicPartition, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error
	// CommitOffsets stores a group's offsets (idempotent); offsets of
	// partitions that no longer exist are dropped.
	CommitOffsets(ctx context.Context, group string, offs []Offset) error
}

// Config configures a Coordinator.
type Config struct {
	// MaxTimeout bounds transaction_timeout_ms (Kafka's
	// transaction.max.timeout.ms, default 15 minutes).
	MaxTimeout time.Duration
	// CheckInterval is how often expired transactions are aborted and
	// unfinished completions retried (default 1s; Kafka checks every 10s).
	CheckInterval time.Duration
	// Owns reports whether this broker coordinates a transactional id
	// (cluster placement; nil: every id). Requests for other ids get
	// NOT_COORDINATOR, and their records are neither completed nor expired
	// here.
	Owns func(id string) bool
	// Logger (default slog.Default()) and Now (default time.Now).
	Logger *slog.Logger
	Now    func() time.Time
}

// Coordinator is this broker's transaction coordinator. Every operation on
// one transactional id runs under that id's lock, including the marker
// writes of its completion; Verify never takes it (it reads a published
// view), so the produce path's lock order (partition index, then view) can
// never meet the completion's (id, then partition index).
type Coordinator struct {
	meta metadata.Store
	st   Storage
	cfg  Config
	log  *slog.Logger

	mu      sync.Mutex
	txns    map[string]*entry
	pending map[string]map[TopicPartition]string // group -> partition -> txn id with staged offsets

	// inflight counts completions running after their EndTxn answered.
	inflight sync.WaitGroup

	stop chan struct{}
	done chan struct{}
}

type entry struct {
	mu  sync.Mutex
	id  string
	rec Record // the current state; State "" while no record exists
	ver metadata.Version
	// lazy: rec is Complete* but the store still holds its Prepare* record
	// (markers written, offsets applied). The next transition CASes over
	// the Prepare* version, so completing costs no write on the EndTxn
	// path; the sweep writes Complete* for ids that stay idle. A crash in
	// between only repeats the (idempotent) completion.
	lazy   bool
	loaded bool
	view   atomic.Pointer[Record] // rec as published to Verify
}

// New returns a coordinator over the metadata store. Start loads the
// persisted transactions and starts the timeout loop.
func New(meta metadata.Store, st Storage, cfg Config) *Coordinator {
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 15 * time.Minute
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Owns == nil {
		cfg.Owns = func(string) bool { return true }
	}
	return &Coordinator{meta: meta, st: st, cfg: cfg, log: cfg.Logger, txns: map[string]*entry{},
		pending: map[string]map[TopicPartition]string{}, stop: make(chan struct{}), done: make(chan struct{})}
}

func txnKey(id string) string { return keyTxns + url.PathEscape(id) }

// Start loads every persisted transaction, then runs the loop that
// completes Prepare* records (an in-doubt transaction found after a crash)
// and aborts expired ones, until Close.
func (c *Coordinator) Start(ctx context.Context) error {
	recs, err := c.meta.RangeScan(ctx, keyTxns, keyTxns[:len(keyTxns)-1]+string(keyTxns[len(keyTxns)-1]+1), 0)
	if err != nil {
		close(c.done)
		return fmt.Errorf("kafka/ktxn: load transactions: %w", err)
	}
	c.adopt(recs)
	go c.loop()
	c.sweep(ctx) // finish in-doubt transactions before serving
	return nil
}

// adopt loads the owned records among recs that are not in memory.
func (c *Coordinator) adopt(recs []metadata.Record) {
	for _, r := range recs {
		var rec Record
		if err := json.Unmarshal(r.Value, &rec); err != nil || rec.V != recordVersion {
			c.log.Warn("kafka/ktxn: skipping undecodable transaction record", "key", r.Key, "err", err)
			continue
		}
		if !c.cfg.Owns(rec.TxnID) {
			continue
		}
		c.mu.Lock()
		if _, ok := c.txns[rec.TxnID]; !ok {
			e := &entry{id: rec.TxnID, rec: rec, ver: r.Version, loaded: true}
			e.view.Store(&rec)
			c.txns[rec.TxnID] = e
			c.indexPending(nil, &rec)
		}
		c.mu.Unlock()
	}
}

// Reconcile follows a placement change: transactional ids this broker no
// longer coordinates are forgotten (their next owner reads the store), and
// records of ids it now coordinates are loaded, so decided ones are
// completed and expired ones aborted here.
func (c *Coordinator) Reconcile(ctx context.Context) error {
	c.mu.Lock()
	var gone []*entry
	for id, e := range c.txns {
		if !c.cfg.Owns(id) {
			gone = append(gone, e)
			delete(c.txns, id)
		}
	}
	c.mu.Unlock()
	for _, e := range gone {
		e.mu.Lock()
		rec := e.rec
		c.mu.Lock()
		c.indexPending(&rec, nil)
		c.mu.Unlock()
		e.loaded = false
		e.view.Store(nil)
		e.mu.Unlock()
	}
	recs, err := c.meta.RangeScan(ctx, keyTxns, keyTxns[:len(keyTxns)-1]+string(keyTxns[len(keyTxns)-1]+1), 0)
	if err != nil {
		return err
	}
	c.adopt(recs)
	return nil
}

// Close stops the background loop and waits for completions in flight
// (bounded by their own timeout; an unfinished one is redone by the next
// Start).
func (c *Coordinator) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
	c.inflight.Wait()
}

func (c *Coordinator) loop() {
	defer close(c.done)
	t := time.NewTicker(c.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			c.sweep(ctx)
			cancel()
		}
	}
}

// sweep aborts expired transactions and completes decided ones.
func (c *Coordinator) sweep(ctx context.Context) {
	c.mu.Lock()
	es := make([]*entry, 0, len(c.txns))
	for _, e := range c.txns {
		if v := e.view.Load(); v != nil && (v.State == Ongoing || v.State.Preparing() || v.State == CompleteCommit || v.State == CompleteAbort) {
			es = append(es, e)
		}
	}
	c.mu.Unlock()
	now := c.cfg.Now().UnixMilli()
	for _, e := range es {
		if !c.cfg.Owns(e.id) {
			continue // Reconcile forgets it
		}
		e.mu.Lock()
		if !e.loaded {
			e.mu.Unlock()
			continue
		}
		if e.lazy && now-e.rec.UpdateMs >= c.cfg.CheckInterval.Milliseconds() {
			_ = c.persist(ctx, e, e.rec)
		}
		if e.rec.State == Ongoing {
			if next, expired := DecideTimeout(e.rec, now); expired {
				c.log.Info("kafka/ktxn: aborting expired transaction", "txn", e.id, "pid", e.rec.ProducerID, "timeoutMs", e.rec.TimeoutMs)
				if code := c.persist(ctx, e, next); code != 0 {
					e.mu.Unlock()
					continue
				}
			}
		}
		if e.rec.State.Preparing() {
			if code := c.complete(ctx, e); code != 0 {
				c.log.Warn("kafka/ktxn: completing transaction failed; will retry", "txn", e.id, "state", e.rec.State, "code", code)
			}
		}
		e.mu.Unlock()
	}
}

// lockEntry returns the id's entry, locked and loaded.
func (c *Coordinator) lockEntry(ctx context.Context, id string) (*entry, int16) {
	if !c.cfg.Owns(id) {
		return nil, kerr.NotCoordinator.Code
	}
	c.mu.Lock()
	e := c.txns[id]
	if e == nil {
		e = &entry{id: id}
		c.txns[id] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	if !e.loaded {
		if code := c.reload(ctx, e); code != 0 {
			e.mu.Unlock()
			return nil, code
		}
	}
	return e, 0
}

// reload reads the entry's record from the store. Caller holds e.mu.
func (c *Coordinator) reload(ctx context.Context, e *entry) int16 {
	r, err := c.meta.Get(ctx, txnKey(e.id))
	old := e.rec
	switch {
	case errors.Is(err, metadata.ErrKeyNotFound):
		e.rec, e.ver = Record{}, metadata.NotExists
	case err != nil:
		return kerr.CoordinatorNotAvailable.Code
	default:
		var rec Record
		if err := json.Unmarshal(r.Value, &rec); err != nil || rec.V != recordVersion {
			c.log.Error("kafka/ktxn: corrupt transaction record", "txn", e.id, "err", err)
			return kerr.CoordinatorNotAvailable.Code
		}
		e.rec, e.ver = rec, r.Version
	}
	e.loaded, e.lazy = true, false
	rec := e.rec
	e.view.Store(&rec)
	c.mu.Lock()
	c.indexPending(&old, &rec)
	c.mu.Unlock()
	return 0
}

func nonce() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// persist stores next with a CAS on the entry's version and, once the
// outcome is known to be applied, makes it the entry's state. Caller holds
// e.mu. A non-zero code means next was not (known to be) stored; the entry
// then holds whatever the store holds.
func (c *Coordinator) persist(ctx context.Context, e *entry, next Record) int16 {
	next.V, next.TxnID, next.Nonce = recordVersion, e.id, nonce()
	val, err := json.Marshal(next)
	if err != nil {
		return kerr.UnknownServerError.Code
	}
	expected := e.ver
	if e.rec.State == "" {
		expected = metadata.NotExists
	}
	v, err := c.meta.Put(ctx, txnKey(e.id), val, expected)
	switch metadata.Classify(err) {
	case metadata.Applied:
	case metadata.Unknown:
		r, gerr := c.meta.Get(ctx, txnKey(e.id))
		var cur Record
		if gerr == nil && json.Unmarshal(r.Value, &cur) == nil && cur.Nonce == next.Nonce {
			v = r.Version
			break
		}
		e.loaded = false // re-read before the next decision
		return kerr.CoordinatorNotAvailable.Code
	default:
		// Conflict: someone else wrote the record (another coordinator
		// took the id over). Re-read; the client finds the coordinator again.
		e.loaded = false
		if metadata.Classify(err) == metadata.Conflict {
			c.log.Warn("kafka/ktxn: transaction record changed under us", "txn", e.id)
			return kerr.NotCoordinator.Code
		}
		return kerr.CoordinatorNotAvailable.Code
	}
	old := e.rec
	e.rec, e.ver, e.lazy = next, v, false
	rec := next
	e.view.Store(&rec)
	c.mu.Lock()
	c.indexPending(&old, &rec)
	c.mu.Unlock()
	return 0
}

// indexPending keeps the group -> staged offsets index. Caller holds c.mu.
func (c *Coordinator) indexPending(old, cur *Record) {
	if old != nil {
		for g, offs := range old.Offsets {
			for _, o := range offs {
				tp := TopicPartition{o.Topic, o.Partition}
				if m := c.pending[g]; m != nil && m[tp] == old.TxnID {
					delete(m, tp)
					if len(m) == 0 {
						delete(c.pending, g)
					}
				}
			}
		}
	}
	if cur != nil && (cur.State == Ongoing || cur.State.Preparing()) {
		for g, offs := range cur.Offsets {
			m := c.pending[g]
			if m == nil {
				m = map[TopicPartition]string{}
				c.pending[g] = m
			}
			for _, o := range offs {
				m[TopicPartition{o.Topic, o.Partition}] = cur.TxnID
			}
		}
	}
}

// HasPendingOffsets reports whether a transaction has staged, not yet
// committed offsets for the group's partition (OffsetFetch require_stable
// answers UNSTABLE_OFFSET_COMMIT then, KIP-447).
func (c *Coordinator) HasPendingOffsets(group, topic string, partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pending[group][TopicPartition{topic, partition}]
	return ok
}

// GroupHasPendingOffsets reports whether any transaction staged offsets
// for the group.
func (c *Coordinator) GroupHasPendingOffsets(group string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending[group]) > 0
}

// complete writes the markers of a Prepare* record, applies its staged
// offsets on commit, and records Complete*. Caller holds e.mu.
func (c *Coordinator) complete(ctx context.Context, e *entry) int16 {
	r := e.rec
	commit := r.State == PrepareCommit
	var wg sync.WaitGroup
	errs := make([]error, len(r.Partitions))
	for i, tp := range r.Partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.writeMarker(ctx, tp, r.ProducerID, r.Epoch, commit)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.log.Warn("kafka/ktxn: marker not written", "txn", e.id, "partition", r.Partitions[i], "err", err)
			return kerr.ConcurrentTransactions.Code
		}
	}
	if commit {
		groups := make([]string, 0, len(r.Offsets))
		for g := range r.Offsets {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		for _, g := range groups {
			if err := c.st.CommitOffsets(ctx, g, r.Offsets[g]); err != nil {
				c.log.Warn("kafka/ktxn: staged offsets not applied", "txn", e.id, "group", g, "err", err)
				return kerr.ConcurrentTransactions.Code
			}
		}
	}
	old := e.rec
	e.rec, e.lazy = Completed(r, c.cfg.Now().UnixMilli()), true
	rec := e.rec
	e.view.Store(&rec)
	c.mu.Lock()
	c.indexPending(&old, &rec)
	c.mu.Unlock()
	return 0
}

func (c *Coordinator) writeMarker(ctx context.Context, tp TopicPartition, pid int64, epoch int16, commit bool) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = c.st.WriteMarker(ctx, tp, pid, epoch, commit, 0)
		if err == nil || errors.Is(err, ErrPartitionGone) {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(10<<attempt) * time.Millisecond)
	}
	return err
}

// InitProducerID is InitProducerId for a transactional id: it returns the
// producer id and epoch the caller is to use, fencing earlier instances.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, reqPID int64, reqEpoch int16) (int64, int16, int16) {
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return -1, -1, kerr.InvalidTransactionTimeout.Code
	}
	e, code := c.lockEntry(ctx, id)
	if code != 0 {
		return -1, -1, code
	}
	defer e.mu.Unlock()
	newPID := int64(-1)
	for attempt := 0; attempt < 4; attempt++ {
		now := c.cfg.Now().UnixMilli()
		d := DecideInit(e.rec, id, timeoutMs, reqPID, reqEpoch, newPID, now)
		switch {
		case d.Code != 0:
			return -1, -1, d.Code
		case d.NeedNewPID:
			pid, err := c.st.AllocateProducerID(ctx)
			if err != nil {
				return -1, -1, kerr.CoordinatorNotAvailable.Code
			}
			newPID = pid
		case d.CompleteFirst:
			if code := c.complete(ctx, e); code != 0 {
				return -1, -1, code
			}
		case d.AbortFirst:
			if code := c.persist(ctx, e, DecideFenceAbort(e.rec, now)); code != 0 {
				return -1, -1, code
			}
			if code := c.complete(ctx, e); code != 0 {
				return -1, -1, code
			}
		default:
			if code := c.persist(ctx, e, d.Next); code != 0 {
				return -1, -1, code
			}
			return e.rec.ProducerID, e.rec.Epoch, 0
		}
	}
	return -1, -1, kerr.ConcurrentTransactions.Code
}

// AddPartitions adds partitions to the producer's transaction.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []TopicPartition) int16 {
	e, code := c.lockEntry(ctx, id)
	if code != 0 {
		return code
	}
	defer e.mu.Unlock()
	if e.rec.State == Ongoing && e.rec.checkProducer(pid, epoch) == 0 {
		all := true
		for _, tp := range tps {
			if !e.rec.hasPartition(tp) {
				all = false
				break
			}
		}
		if all {
			return 0 // nothing new: no write
		}
	}
	next, code := DecideAddPartitions(e.rec, pid, epoch, tps, c.cfg.Now().UnixMilli())
	if code != 0 {
		return code
	}
	return c.persist(ctx, e, next)
}

// VerifyPartitions answers AddPartitionsToTxn v4+ verify_only: per
// partition, 0 if it is in the producer's ongoing transaction.
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, tps []TopicPartition) []int16 {
	out := make([]int16, len(tps))
	for i, tp := range tps {
		out[i] = c.Verify(id, pid, epoch, tp)
	}
	return out
}

// Verify is the KIP-890 check a partition leader makes before appending a
// transactional batch: the producer's transaction is ongoing with this
// epoch and includes the partition. It reads only the published view.
func (c *Coordinator) Verify(id string, pid int64, epoch int16, tp TopicPartition) int16 {
	if !c.cfg.Owns(id) {
		return kerr.NotCoordinator.Code // VerifyAt reads the store for these
	}
	c.mu.Lock()
	e := c.txns[id]
	c.mu.Unlock()
	if e == nil {
		return kerr.InvalidTxnState.Code
	}
	v := e.view.Load()
	if v == nil || v.State == "" {
		return kerr.InvalidTxnState.Code
	}
	switch {
	case v.ProducerID != pid:
		return kerr.InvalidProducerIDMapping.Code
	case epoch < v.Epoch:
		return kerr.InvalidProducerEpoch.Code
	case epoch > v.Epoch:
		return kerr.InvalidProducerEpoch.Code
	case v.State != Ongoing || !v.hasPartition(tp):
		return kerr.InvalidTxnState.Code
	}
	return 0
}

// VerifyAt is Verify for any transactional id: for ids another broker
// coordinates it reads the id's record from the metadata store (a
// linearizable read, made under the partition's index lock: a coordinator
// that decided the transaction stored Prepare* before it asked for the
// partition's marker, so the read either sees the decision or the batch is
// appended before the marker). With lazy completion a stored Prepare* may
// already be complete; either way no batch is accepted for it.
func (c *Coordinator) VerifyAt(ctx context.Context, id string, pid int64, epoch int16, tp TopicPartition) int16 {
	if c.cfg.Owns(id) {
		return c.Verify(id, pid, epoch, tp)
	}
	r, err := c.meta.Get(ctx, txnKey(id))
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return kerr.InvalidTxnState.Code
	}
	if err != nil {
		return kerr.NotEnoughReplicas.Code // retriable: the store is unreachable
	}
	var rec Record
	if err := json.Unmarshal(r.Value, &rec); err != nil || rec.V != recordVersion {
		return kerr.NotEnoughReplicas.Code
	}
	switch {
	case rec.ProducerID != pid:
		return kerr.InvalidProducerIDMapping.Code
	case epoch != rec.Epoch:
		return kerr.InvalidProducerEpoch.Code
	case rec.State != Ongoing || !rec.hasPartition(tp):
		return kerr.InvalidTxnState.Code
	}
	return 0
}

// AddGroup is AddOffsetsToTxn.
func (c *Coordinator) AddGroup(ctx context.Context, id string, pid int64, epoch int16, group string) int16 {
	e, code := c.lockEntry(ctx, id)
	if code != 0 {
		return code
	}
	defer e.mu.Unlock()
	if e.rec.State == Ongoing && e.rec.checkProducer(pid, epoch) == 0 {
		i := sort.SearchStrings(e.rec.Groups, group)
		if i < len(e.rec.Groups) && e.rec.Groups[i] == group {
			return 0
		}
	}
	next, code := DecideAddGroup(e.rec, pid, epoch, group, c.cfg.Now().UnixMilli())
	if code != 0 {
		return code
	}
	return c.persist(ctx, e, next)
}

// StageOffsets is TxnOffsetCommit: the offsets become the group's committed
// offsets when (and only when) the transaction commits.
func (c *Coordinator) StageOffsets(ctx context.Context, id string, pid int64, epoch int16, group string, offs []Offset) int16 {
	e, code := c.lockEntry(ctx, id)
	if code != 0 {
		return code
	}
	defer e.mu.Unlock()
	next, code := DecideStageOffsets(e.rec, pid, epoch, group, offs, c.cfg.Now().UnixMilli())
	if code != 0 {
		return code
	}
	return c.persist(ctx, e, next)
}

// EndTxn commits or aborts the producer's transaction. As in Kafka, it
// answers once the outcome is decided (the Prepare* record is stored): the
// markers and (on commit) the offsets are applied after the answer, by a
// completion that keeps holding the id's lock, so the producer's next
// operation (AddPartitionsToTxn of its next transaction, a retried EndTxn,
// InitProducerId) waits for it instead of seeing CONCURRENT_TRANSACTIONS.
// That takes the marker round out of EndTxn's answer (commitTransaction
// returns once the outcome is durable); the client can buffer its next
// transaction's records meanwhile, but its next AddPartitionsToTxn still
// waits for the round (kafka/txnbench: the wait moves there, the
// transactional MB/s ratio did not measurably change). A completion
// that fails leaves the Prepare* record for the sweep (every
// CheckInterval) and the next operation is answered CONCURRENT_TRANSACTIONS
// until it succeeds; a crash leaves it for the next Start. Either way the
// decided outcome is the one applied, never half of it.
//
// A retried EndTxn of a Prepare* record (a completion that failed) is
// completed synchronously, as before.
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool) int16 {
	e, code := c.lockEntry(ctx, id)
	if code != 0 {
		return code
	}
	d := DecideEnd(e.rec, pid, epoch, commit, c.cfg.Now().UnixMilli())
	if d.Code != 0 || !d.Complete {
		e.mu.Unlock()
		return d.Code
	}
	if !d.Persist {
		defer e.mu.Unlock()
		return c.complete(ctx, e)
	}
	if code := c.persist(ctx, e, d.Next); code != 0 {
		e.mu.Unlock()
		return code
	}
	c.completeAsync(e)
	return 0
}

// completeAsync completes e's Prepare* record in the background and then
// releases e.mu, which the caller holds and hands over. Close waits for it.
func (c *Coordinator) completeAsync(e *entry) {
	c.inflight.Add(1)
	go func() {
		defer c.inflight.Done()
		defer e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if code := c.complete(ctx, e); code != 0 {
			c.log.Warn("kafka/ktxn: completing transaction failed; will retry", "txn", e.id, "state", e.rec.State, "code", code)
		}
	}()
}

// Describe returns the record of a transactional id (ok false if none).
func (c *Coordinator) Describe(ctx context.Context, id string) (Record, bool, int16) {
	e, code := c.lockEntry(ctx, id)
	if code != 0 {
		return Record{}, false, code
	}
	defer e.mu.Unlock()
	if e.rec.State == "" {
		return Record{}, false, 0
	}
	return e.rec.clone(), true, 0
}

// List returns every transaction this coordinator knows, by id.
func (c *Coordinator) List() []Record {
	c.mu.Lock()
	out := make([]Record, 0, len(c.txns))
	for _, e := range c.txns {
		if v := e.view.Load(); v != nil && v.State != "" {
			out = append(out, *v)
		}
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].TxnID < out[j].TxnID })
	return out
}
