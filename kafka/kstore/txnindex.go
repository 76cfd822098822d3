package kstore

// Per-partition transaction index: which producers have a transaction open
// on the partition (the last stable offset is the first offset of the
// oldest), and which transactions were aborted and where (the
// aborted-transaction list a read_committed Fetch returns).
//
// Truth is the partition stream itself, as in Kafka: a transactional batch
// opens its producer's transaction on the partition, a control batch (the
// coordinator's commit or abort marker) closes it. The index is a cache of
// that truth plus a checkpoint in the metadata store:
//
//	kafka/ptxn/<stream id>              {scannedTo, open transactions}
//	kafka/ptxn/<stream id>/a/<last, 20> one aborted transaction
//
// The checkpoint says "the state of every batch before scannedTo is this";
// loading an index reads it and scans the stream from scannedTo to the end.
// A partition without a checkpoint record never had a transactional batch:
// the record is created before the first one is appended.
//
// Why the index is never ahead of the stream (what keeps uncommitted data
// invisible to read_committed):
//   - a producer's transaction is registered as open BEFORE its first batch
//     is issued, with the committed end at that moment as its first offset;
//     the batch can only commit at or after that offset, so the last stable
//     offset can never pass an uncommitted transactional batch;
//   - a transaction is closed only after its marker committed;
//   - a checkpoint's scannedTo is never beyond a marker still in flight, so
//     a marker that commits after the checkpoint is found by the next scan;
//   - aborted entries are persisted before a checkpoint that moves past
//     them.
// Transactional appends and markers of one partition are issued under the
// index's lock, so "verify with the coordinator, then issue" cannot
// interleave with "the coordinator ended the transaction, issue its marker".

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

const keyPartitionTxns = "kafka/ptxn/"

// AbortedTxn is one aborted transaction on a partition: its producer's
// batches in [First, Last] are to be skipped by read_committed consumers;
// Last is the offset of the abort marker.
type AbortedTxn struct {
	ProducerID int64 `json:"pid"`
	First      int64 `json:"first"`
	Last       int64 `json:"last"`
}

// OpenTxn is a transaction open on a partition.
type OpenTxn struct {
	ProducerID    int64 `json:"pid"`
	ProducerEpoch int16 `json:"epoch"`
	// First is a lower bound of the transaction's first offset on the
	// partition (exact when the index learned it from a scan).
	First int64 `json:"first"`
	// StartMs is when this broker first saw it (0 after a reload).
	StartMs int64 `json:"-"`
}

type txnCheckpoint struct {
	V         int       `json:"v"` // 1
	ScannedTo int64     `json:"scannedTo"`
	Open      []OpenTxn `json:"open,omitempty"`
}

// txnIndex is one partition's index. mu is held while a transactional
// batch or a marker is issued.
type txnIndex struct {
	id stream.ID

	mu      sync.Mutex
	loaded  bool
	hasRec  bool // the checkpoint record exists
	recVer  metadata.Version
	open    map[int64]OpenTxn
	aborted []AbortedTxn // sorted by Last
	// unpersisted are aborted entries not yet in the metadata store.
	unpersisted []AbortedTxn
	// markersInFlight holds, per marker issued and not yet settled, the
	// committed end when it was issued (a lower bound of its offset).
	markersInFlight map[uint64]int64
	nextMarker      uint64
	dirty           bool
	flushing        bool
	// epoch is the partition's append-session epoch the index was loaded
	// under; another epoch means the partition changed hands since.
	epoch uint64
	// own is the epoch of this broker's own append session under which
	// the index last issued a transactional batch or a marker (0: none
	// since it was loaded). Only then does this broker know every batch
	// below the committed end, so only then may it write a checkpoint.
	own uint64
	// scanned is the offset up to which the log was scanned (load, and
	// readTxnIndex's catch-up).
	scanned int64
}

// forget drops the in-memory state (it is reloaded from the checkpoint
// and the stream on next use). Caller holds x.mu.
func (x *txnIndex) forget() {
	x.loaded, x.hasRec, x.dirty = false, false, false
	x.own = 0
	x.open, x.aborted, x.unpersisted = map[int64]OpenTxn{}, nil, nil
	x.markersInFlight = map[uint64]int64{}
}

// useTxnIndex makes x safe to use here. Only the partition's leader (the
// owner of its stream) keeps transaction state: elsewhere the answer is
// ErrNotLeader and any cached state is dropped. An index loaded under
// another session epoch than epoch (the partition changed hands since, so
// another broker may have appended) is reloaded. Appends issued under an
// older session cannot commit any more (they are fenced), so nothing in
// flight is lost by the reload. Caller holds x.mu.
func (s *Store) useTxnIndex(ctx context.Context, x *txnIndex, p *Partition, epoch uint64) error {
	if s.cfg.Cluster != nil && !s.cfg.Cluster.OwnsStream(p.StreamName()) {
		x.forget()
		return fmt.Errorf("%w: the partition's transaction state is kept by its leader", ErrNotLeader)
	}
	if x.loaded && x.epoch != epoch && PlantedBug != BugIndexSurvivesTakeover {
		x.forget()
	}
	if err := s.loadTxnIndex(ctx, x); err != nil {
		return err
	}
	x.epoch = epoch
	return nil
}

// txnLeaderOnly answers ErrNotLeader (and drops any cached index) on a
// broker that does not lead p, before anything reads the stream head.
func (s *Store) txnLeaderOnly(p *Partition) error {
	if s.cfg.Cluster == nil || s.cfg.Cluster.OwnsStream(p.StreamName()) {
		return nil
	}
	x := s.txnIndexFor(p.StreamID)
	x.mu.Lock()
	x.forget()
	x.mu.Unlock()
	return fmt.Errorf("%w: the partition's transaction state is kept by its leader", ErrNotLeader)
}

// readTxnIndex makes x current for a read path (the last stable offset,
// aborted and open transactions), which never takes the session: it uses
// the index under the epoch of the partition's current session (loading
// it if needed). While that session is not the one this index issued
// transactional batches or markers under and it still names a writer —
// the previous leader still handing over, whose view or in-flight appends
// lag, or this broker's cluster node before the index used its session —
// that writer may still append transactional batches and markers the
// index never saw: it catches up with the log first. (Without it a new
// leader answered a last stable offset past a transaction the old one
// opened after the load: found by the kstore simulation, seed 281.)
// Caller holds x.mu.
func (s *Store) readTxnIndex(ctx context.Context, x *txnIndex, p *Partition) error {
	info, err := s.streams.Describe(ctx, p.StreamID)
	if err != nil {
		return err
	}
	epoch := info.Session.Epoch
	loaded := x.loaded && x.epoch == epoch
	if err := s.useTxnIndex(ctx, x, p, epoch); err != nil {
		return err
	}
	if !loaded || x.own == epoch || info.Session.WriterID == "" || PlantedBug == BugIndexIgnoresForeignSession {
		return nil // just loaded (up to date), or no one else may append
	}
	if !x.hasRec {
		// No checkpoint when loaded: the writer may have created one
		// and appended its first transactional batch since.
		x.forget()
		if err := s.loadTxnIndex(ctx, x); err != nil {
			return err
		}
		x.epoch = epoch
		return nil
	}
	if info.EndOffset <= x.scanned {
		return nil // nothing committed since the last scan
	}
	// Each entry is scanned once: the cost is one read of what was
	// committed since the last call (which the fetch reads anyway).
	var found []AbortedTxn
	to, err := s.scanTxnLog(ctx, x.id, x.scanned, func(e stream.ReadEntry) { applyScanned(x.open, &found, e) })
	if err != nil {
		return err
	}
	x.scanned = to
	if len(found) > 0 {
		x.aborted = append(x.aborted, found...)
		sort.Slice(x.aborted, func(i, j int) bool { return x.aborted[i].Last < x.aborted[j].Last })
		x.unpersisted = append(x.unpersisted, found...)
		x.dirty = true
	}
	return nil
}

// scanTxnLog calls fn for every entry of the stream from offset from to
// its committed end, and returns the offset it scanned up to.
func (s *Store) scanTxnLog(ctx context.Context, id stream.ID, from int64, fn func(stream.ReadEntry)) (int64, error) {
	start := from
	for {
		res, err := s.streams.Read(ctx, id, from, stream.ReadOptions{MaxBytes: 8 << 20, MaxEntries: 10000})
		if errors.Is(err, stream.ErrOffsetOutOfRange) && from < res.StartOffset {
			from = res.StartOffset
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("kafka/kstore: scan stream %v for transactions: %w", id, err)
		}
		for _, e := range res.Entries {
			if e.Offset >= start {
				fn(e)
			}
		}
		if res.Next <= from {
			return from, nil
		}
		if res.Next >= res.EndOffset {
			return res.Next, nil
		}
		from = res.Next
	}
}

// txnIndexes is the Store's set of partition indexes, keyed by stream id so
// that topic cache reloads keep them.
type txnIndexes struct {
	mu     sync.Mutex
	byID   map[stream.ID]*txnIndex
	closed bool
	timers sync.WaitGroup
}

// closeTxnIndexes stops scheduling checkpoints, waits for running ones and
// writes a last checkpoint of every changed index (a clean shutdown then
// needs no scan at the next start).
func (s *Store) closeTxnIndexes(ctx context.Context) {
	s.txns.mu.Lock()
	s.txns.closed = true
	xs := make([]*txnIndex, 0, len(s.txns.byID))
	for _, x := range s.txns.byID {
		xs = append(xs, x)
	}
	s.txns.mu.Unlock()
	s.txns.timers.Wait()
	for _, x := range xs {
		x.mu.Lock()
		dirty := x.dirty && x.hasRec
		x.mu.Unlock()
		if dirty {
			if err := s.flushTxnIndex(ctx, x); err != nil {
				s.log.Warn("kafka/kstore: final transaction checkpoint failed", "stream", x.id, "err", err)
			}
		}
	}
}

func (s *Store) txnIndexFor(id stream.ID) *txnIndex {
	s.txns.mu.Lock()
	defer s.txns.mu.Unlock()
	if s.txns.byID == nil {
		s.txns.byID = map[stream.ID]*txnIndex{}
	}
	x := s.txns.byID[id]
	if x == nil {
		x = &txnIndex{id: id, open: map[int64]OpenTxn{}, markersInFlight: map[uint64]int64{}}
		s.txns.byID[id] = x
	}
	return x
}

func txnCheckpointKey(id stream.ID) string { return keyPartitionTxns + id.String() }
func abortedPrefix(id stream.ID) string    { return keyPartitionTxns + id.String() + "/a/" }
func abortedKey(id stream.ID, last int64) string {
	return fmt.Sprintf("%s%020d", abortedPrefix(id), last)
}

// load reads the checkpoint and scans the stream past it. Caller holds mu.
func (s *Store) loadTxnIndex(ctx context.Context, x *txnIndex) error {
	if x.loaded {
		return nil
	}
	rec, err := s.meta.Get(ctx, txnCheckpointKey(x.id))
	if errors.Is(err, metadata.ErrKeyNotFound) {
		x.loaded = true
		return nil
	}
	if err != nil {
		return err
	}
	var cp txnCheckpoint
	if err := json.Unmarshal(rec.Value, &cp); err != nil || cp.V != 1 {
		return fmt.Errorf("kafka/kstore: corrupt transaction checkpoint of stream %v: %v", x.id, err)
	}
	prefix := abortedPrefix(x.id)
	recs, err := s.meta.RangeScan(ctx, prefix, prefixEnd(prefix), 0)
	if err != nil {
		return err
	}
	open := map[int64]OpenTxn{}
	for _, o := range cp.Open {
		open[o.ProducerID] = o
	}
	var aborted []AbortedTxn
	for _, r := range recs {
		var a AbortedTxn
		if err := json.Unmarshal(r.Value, &a); err != nil {
			return fmt.Errorf("kafka/kstore: corrupt aborted-transaction record %s: %v", r.Key, err)
		}
		aborted = append(aborted, a)
	}
	var scanned []AbortedTxn
	// Scan [scannedTo, end) for transactional batches and markers.
	to, err := s.scanTxnLog(ctx, x.id, cp.ScannedTo, func(e stream.ReadEntry) { applyScanned(open, &scanned, e) })
	if err != nil {
		return err
	}
	x.scanned = to
	known := map[int64]bool{}
	for _, a := range aborted {
		known[a.Last] = true
	}
	for _, a := range scanned {
		if !known[a.Last] {
			aborted = append(aborted, a)
			x.unpersisted = append(x.unpersisted, a)
		}
	}
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].Last < aborted[j].Last })
	x.open, x.aborted = open, aborted
	x.hasRec, x.recVer, x.loaded = true, rec.Version, true
	x.dirty = len(x.unpersisted) > 0
	return nil
}

// applyScanned folds one stored batch into the state.
func applyScanned(open map[int64]OpenTxn, aborted *[]AbortedTxn, e stream.ReadEntry) {
	h, err := kbatch.ParseHeader(e.Payload)
	if err != nil || h.Attributes&kbatch.AttrTransactional == 0 || h.ProducerID < 0 {
		return
	}
	if h.Attributes&kbatch.AttrControl == 0 {
		if _, ok := open[h.ProducerID]; !ok {
			open[h.ProducerID] = OpenTxn{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, First: e.Offset}
		}
		return
	}
	typ, err := kbatch.ControlType(e.Payload)
	if err != nil {
		return
	}
	o, ok := open[h.ProducerID]
	if !ok {
		return // a repeated marker (recovery re-sends them): no-op
	}
	delete(open, h.ProducerID)
	if typ == kbatch.ControlAbort {
		*aborted = append(*aborted, AbortedTxn{ProducerID: h.ProducerID, First: o.First, Last: e.Offset})
	}
}

// TxnVerifier is asked, under the partition's index lock, whether a
// transactional batch of producerID/epoch may be appended now (the
// coordinator's KIP-890 verification: its transaction is ongoing and
// includes this partition).
type TxnVerifier func() error

// AppendTransactional issues a transactional batch on the partition: it
// loads the partition's transaction index, verifies the producer with the
// coordinator, registers the producer's transaction as open (before the
// batch can commit) and issues the append, all under the index lock.
func (s *Store) AppendTransactional(ctx context.Context, p *Partition, pid int64, epoch int16, verify TxnVerifier,
	build func(epoch int32) stream.AppendRequest) (*Appending, error) {
	if p.proj != nil {
		return nil, notOnProjected("transactional produce")
	}
	sess, err := p.session(ctx, s) // our own epoch, before the index is checked against it
	if err != nil {
		return nil, err
	}
	x := s.txnIndexFor(p.StreamID)
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := s.useTxnIndex(ctx, x, p, sess.Epoch); err != nil {
		return nil, err
	}
	x.own = sess.Epoch
	if err := verify(); err != nil {
		return nil, err
	}
	end, _, err := s.streams.Notify(ctx, p.StreamID)
	if err != nil {
		return nil, err
	}
	if !x.hasRec {
		if err := s.createTxnCheckpoint(ctx, x, end); err != nil {
			return nil, err
		}
	}
	if _, ok := x.open[pid]; !ok {
		x.open[pid] = OpenTxn{ProducerID: pid, ProducerEpoch: epoch, First: end, StartMs: s.cfg.Now().UnixMilli()}
		x.dirty = true
	}
	return s.appendWith(sess, build), nil
}

// appendWith issues an append under exactly sess, the session the index was
// checked against (not a possibly newer one).
func (s *Store) appendWith(sess stream.Session, build func(epoch int32) stream.AppendRequest) *Appending {
	epoch := epochOf(sess)
	return &Appending{Future: s.streams.AppendAsync(sess, build(epoch)), Epoch: epoch, sess: sess, store: s}
}

// createTxnCheckpoint writes the first checkpoint of a partition (nothing
// transactional before scannedTo). Caller holds x.mu.
func (s *Store) createTxnCheckpoint(ctx context.Context, x *txnIndex, scannedTo int64) error {
	val, _ := json.Marshal(txnCheckpoint{V: 1, ScannedTo: scannedTo})
	key := txnCheckpointKey(x.id)
	v, err := s.meta.Put(ctx, key, val, metadata.NotExists)
	if err != nil {
		// Conflict or unknown: a record exists now (ours, or one written
		// by an earlier owner whose state we already loaded as absent).
		rec, gerr := s.meta.Get(ctx, key)
		if gerr != nil {
			return fmt.Errorf("kafka/kstore: create transaction checkpoint: %w", err)
		}
		v = rec.Version
	}
	x.hasRec, x.recVer = true, v
	return nil
}

// AppendMarker writes a transaction marker (commit or abort control batch)
// for producerID to the partition and waits for it to commit, then closes
// the producer's transaction in the index. Writing a marker for a producer
// with no open transaction on the partition is harmless (recovery repeats
// markers), so on an uncertain outcome the caller simply writes it again.
func (s *Store) AppendMarker(ctx context.Context, p *Partition, pid int64, epoch int16, commit bool, coordinatorEpoch int32) (int64, error) {
	m, err := s.IssueMarker(ctx, p, pid, epoch, commit, coordinatorEpoch)
	if err != nil {
		return -1, err
	}
	return m.Finish(ctx)
}

// MarkerAppending is a transaction marker in flight (IssueMarker). Finish
// must be called exactly once: until then the marker holds the partition's
// checkpoints back (they cannot pass a marker still in flight).
type MarkerAppending struct {
	app    *Appending
	x      *txnIndex
	mid    uint64
	pid    int64
	commit bool
	store  *Store
}

// Done is closed once the marker's append settled: Finish then returns
// without waiting.
func (m *MarkerAppending) Done() <-chan struct{} { return m.app.Future.Done() }

// IssueMarker is AppendMarker's first half: it issues the marker under the
// partition's index lock and returns without waiting for it to commit (a
// caller that must not block — the deterministic simulation — waits for
// Done and then calls Finish).
func (s *Store) IssueMarker(ctx context.Context, p *Partition, pid int64, epoch int16, commit bool, coordinatorEpoch int32) (*MarkerAppending, error) {
	if p.proj != nil {
		return nil, notOnProjected("transaction markers")
	}
	sess, err := p.session(ctx, s)
	if err != nil {
		return nil, err
	}
	x := s.txnIndexFor(p.StreamID)
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := s.useTxnIndex(ctx, x, p, sess.Epoch); err != nil {
		return nil, err
	}
	x.own = sess.Epoch
	end, _, err := s.streams.Notify(ctx, p.StreamID)
	if err != nil {
		return nil, err
	}
	// A producer with no open transaction here (added but never produced
	// to, or already closed) still gets its marker, as in Kafka.
	now := s.cfg.Now().UnixMilli()
	batch := kbatch.BuildControl(pid, epoch, commit, coordinatorEpoch, now)
	app := s.appendWith(sess, func(le int32) stream.AppendRequest {
		kbatch.SetLeaderEpoch(batch, le)
		return stream.AppendRequest{Entries: []stream.Entry{{Payload: batch, RecordCount: 1, Timestamp: now}}, ExpectedStart: -1}
	})
	x.nextMarker++
	mid := x.nextMarker
	if PlantedBug != BugCheckpointPassesMarker {
		x.markersInFlight[mid] = end
	}
	return &MarkerAppending{app: app, x: x, mid: mid, pid: pid, commit: commit, store: s}, nil
}

// Finish waits for the marker to commit and then closes the producer's
// transaction in the index: the marker's offset, or the append's error
// (with stream.CommitCertainty's meaning: an unknown outcome is settled by
// writing the marker again).
func (m *MarkerAppending) Finish(ctx context.Context) (int64, error) {
	s, x := m.store, m.x
	res, err := m.app.Settle(ctx)

	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.markersInFlight, m.mid)
	if err != nil {
		return -1, err
	}
	if o, ok := x.open[m.pid]; ok {
		delete(x.open, m.pid)
		if !m.commit && PlantedBug != BugAbortNotIndexed {
			a := AbortedTxn{ProducerID: m.pid, First: o.First, Last: res.Start}
			x.unpersisted = append(x.unpersisted, a)
			x.aborted = append(x.aborted, a)
			sort.Slice(x.aborted, func(i, j int) bool { return x.aborted[i].Last < x.aborted[j].Last })
		}
		x.dirty = true
	}
	s.kickTxnFlush(x)
	return res.Start, nil
}

// StableOffset returns the partition's last stable offset given its high
// watermark: the first offset of the oldest open transaction, or hwm.
func (s *Store) StableOffset(ctx context.Context, p *Partition, hwm int64) (int64, error) {
	if p.proj != nil {
		return hwm, nil // no transactions on projected topics
	}
	if err := s.txnLeaderOnly(p); err != nil {
		return -1, err
	}
	x := s.txnIndexFor(p.StreamID)
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := s.readTxnIndex(ctx, x, p); err != nil {
		return -1, err
	}
	lso := hwm
	for _, o := range x.open {
		lso = min(lso, o.First)
	}
	if PlantedBug == BugStableOffsetIgnoresOpen {
		lso = hwm
	}
	return lso, nil
}

// AbortedTxns returns the aborted transactions a read_committed fetch of
// [from, upTo) must know: those whose abort marker is at or after from and
// that began before upTo, ordered by first offset.
func (s *Store) AbortedTxns(ctx context.Context, p *Partition, from, upTo int64) ([]AbortedTxn, error) {
	if p.proj != nil {
		return nil, nil
	}
	if err := s.txnLeaderOnly(p); err != nil {
		return nil, err
	}
	x := s.txnIndexFor(p.StreamID)
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := s.readTxnIndex(ctx, x, p); err != nil {
		return nil, err
	}
	i := sort.Search(len(x.aborted), func(i int) bool { return x.aborted[i].Last >= from })
	var out []AbortedTxn
	for _, a := range x.aborted[i:] {
		if a.First < upTo {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].First < out[j].First })
	return out, nil
}

// OpenTxns returns the transactions open on the partition (DescribeProducers).
func (s *Store) OpenTxns(ctx context.Context, p *Partition) ([]OpenTxn, error) {
	if p.proj != nil {
		return nil, nil
	}
	if err := s.txnLeaderOnly(p); err != nil {
		return nil, err
	}
	x := s.txnIndexFor(p.StreamID)
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := s.readTxnIndex(ctx, x, p); err != nil {
		return nil, err
	}
	out := make([]OpenTxn, 0, len(x.open))
	for _, o := range x.open {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out, nil
}

// txnFlushDelay batches checkpoint writes: the scan after a restart covers
// at most about this much of a partition's recent history (the default of
// Config.TxnCheckpointDelay).
const txnFlushDelay = time.Second

// kickTxnFlush schedules a checkpoint of x if it changed. Caller holds x.mu.
func (s *Store) kickTxnFlush(x *txnIndex) {
	if !x.dirty || x.flushing || !x.hasRec {
		return
	}
	s.txns.mu.Lock()
	closed := s.txns.closed
	if !closed {
		s.txns.timers.Add(1)
	}
	s.txns.mu.Unlock()
	if closed {
		return
	}
	x.flushing = true
	s.rt.AfterFunc(s.cfg.TxnCheckpointDelay, func() {
		defer s.txns.timers.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.flushTxnIndex(ctx, x); err != nil {
			s.log.Warn("kafka/kstore: transaction checkpoint failed; will retry", "stream", x.id, "err", err)
		}
		x.mu.Lock()
		x.flushing = false
		s.kickTxnFlush(x)
		x.mu.Unlock()
	})
}

// flushTxnIndex persists new aborted entries, then the checkpoint. The
// metadata writes run without x.mu; the snapshot they write is taken under it.
func (s *Store) flushTxnIndex(ctx context.Context, x *txnIndex) error {
	x.mu.Lock()
	if !x.loaded || !x.hasRec {
		x.mu.Unlock()
		return nil // forgotten (the partition moved) or nothing to write
	}
	end, _, err := s.streams.Notify(ctx, x.id)
	if err != nil {
		x.mu.Unlock()
		return err
	}
	// Only while this broker's own session still holds the partition
	// (checked after reading the end, so no other writer can have
	// appended below it) does the index know every batch below end. A
	// broker that handed the partition over must not write its delayed
	// checkpoint: scannedTo would pass the new leader's transactional
	// batches it never saw, and a later load would lose their
	// transactions (found by the kstore simulation, seed 15).
	info, err := s.streams.Describe(ctx, x.id)
	if err != nil {
		x.mu.Unlock()
		return err
	}
	if (x.own == 0 || x.epoch != x.own || info.Session.Epoch != x.own) && PlantedBug != BugCheckpointAfterHandover {
		if info.Session.Epoch != x.epoch {
			x.forget() // reloaded on next use
		}
		x.dirty = false // nothing is lost: a load rebuilds it from the log
		x.mu.Unlock()
		return nil
	}
	scannedTo := end
	for _, e := range x.markersInFlight {
		scannedTo = min(scannedTo, e)
	}
	cp := txnCheckpoint{V: 1, ScannedTo: scannedTo}
	for _, o := range x.open {
		cp.Open = append(cp.Open, o)
	}
	sort.Slice(cp.Open, func(i, j int) bool { return cp.Open[i].ProducerID < cp.Open[j].ProducerID })
	newAborted := append([]AbortedTxn(nil), x.unpersisted...)
	ver := x.recVer
	x.dirty = false
	x.mu.Unlock()

	if len(newAborted) > 0 {
		ops := make([]metadata.Op, 0, len(newAborted))
		for _, a := range newAborted {
			val, _ := json.Marshal(a)
			ops = append(ops, metadata.Op{Kind: metadata.OpPut, Key: abortedKey(x.id, a.Last), Value: val, Expected: metadata.AnyVersion})
		}
		res, err := s.meta.Batch(ctx, ops)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
					break
				}
			}
		}
		if err != nil {
			s.markTxnDirty(x)
			return err
		}
	}
	val, _ := json.Marshal(cp)
	v, err := s.meta.Put(ctx, txnCheckpointKey(x.id), val, ver)
	if err != nil {
		// Unknown or conflict: re-read the version and try again later
		// (the next scan covers whatever this checkpoint would have).
		if rec, gerr := s.meta.Get(ctx, txnCheckpointKey(x.id)); gerr == nil {
			x.mu.Lock()
			x.recVer = rec.Version
			x.mu.Unlock()
		}
		s.markTxnDirty(x)
		return err
	}
	x.mu.Lock()
	x.recVer = v
	x.unpersisted = x.unpersisted[len(newAborted):]
	x.mu.Unlock()
	return nil
}

func (s *Store) markTxnDirty(x *txnIndex) {
	x.mu.Lock()
	x.dirty = true
	x.mu.Unlock()
}

// ProducerIDString is how a Kafka producer id is named as a stream
// sequence producer.
func ProducerIDString(pid int64) string { return strconv.FormatInt(pid, 10) }
