package stream

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/internal/dedup"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// commitMachine holds every commit decision of one stream whose append
// session this process holds, in the shape of etcd raft's RawNode: events
// go in through its methods (append admitted, WAL write done, the results
// of the metadata operations it asked for, an index probe result, a
// failure, the current time), and effects come out in a commitReady that
// the driver (owner.go, committer.go) takes with takeReady and executes.
//
// It has no goroutines, locks, clocks or I/O: time arrives as nowMs
// arguments, metadata results as values. The same state and the same
// events always give the same effects, which is what lets the simulator
// (simulation_test.go) replay any interleaving from a seed. The driver
// serialises calls (one lock per stream); the machine is not thread-safe.
//
// Offsets are assigned at admission ("projected" state) so WAL writes of
// later appends overlap the commit of earlier ones; they become true only
// when the head CAS that carries them applies. Invariants:
//   - queue holds admitted, unresolved appends in offset order; the first
//     starts at head.End, each starts where the previous ends, and projEnd
//     is the last one's end (head.End when empty).
//   - projProducers = head.Producers + the sequences of queue, in order.
//   - nextCommit never repeats within a session, even after a reset, so a
//     run's (Epoch, Token, Commit) identity is unique forever.
//   - at most one head CAS is outstanding (in round or unsettled), and an
//     unsettled CAS is resolved by re-reading the head before anything else
//     of this stream is sent: an unknown outcome stays unknown until the
//     head (and, for a fenced owner, the offset index) proves it.
type commitMachine struct {
	id             ID
	headKey        string // headKey(id), built once
	provider       string // provider name recorded in descriptors
	sync           bool   // ack waits for index publication (OBJECT_WAL_SYNC_OBJECT)
	genSync        bool   // ack waits for a published generation (BOOKKEEPER_WAL_SYNC_OBJECT)
	sessionTTLMs   int64
	maxPendingRuns int

	writerID string
	sess     Session
	head     *head
	version  metadata.Version

	projEnd       int64
	projCum       int64
	projProducers *dedup.Table
	nextCommit    uint64

	queue       []*appendOp
	mutations   []*mutationOp
	renewWanted bool // a lease renewal is due (see renewIfDue)

	// round holds the operations handed out by prepareRound, in order,
	// until stepRound reports their results.
	round []roundReq
	// unsettled is a head CAS whose outcome was conflict or unknown; probe
	// is set while the index scan that settles it runs; retryAtMs holds
	// back the next settling read after a failed one.
	unsettled *headCAS
	probe     *settleProbe
	retryAtMs int64

	// toIndex holds committed runs whose index entry is not yet confirmed,
	// in offset order; confirmedThrough is the end of the confirmed prefix.
	toIndex          []*indexItem
	confirmedThrough int64
	// itemChunk: the array newIndexItem takes toIndex's items from.
	itemChunk []indexItem
	// partChunk: the array newParts takes descriptors' Parts from.
	partChunk []part
	// Running totals over the unconfirmed items of toIndex (indexDue is
	// asked at least twice per stream per round; walking toIndex for it
	// touched every item's descriptor each time).
	unconfirmed, unconfirmedSize, unconfirmedInherited int
	// pendBuf is the array behind the Pending lists of the heads this
	// machine builds (appendPending): len(pendBuf) is how many of its slots
	// have ever been written, and every head whose Pending lies in it is
	// no longer than that, so the slot at len(pendBuf) is one no head can
	// see. A commit appends its descriptor there instead of copying the
	// whole list.
	pendBuf []descriptor
	// encArena: the chunk the v3 encodings of this machine's Pending
	// descriptors are appended to (cachePendingV3).
	encArena    []byte
	syncWaiters []*appendOp
	// genWaiters (BOOKKEEPER_WAL_SYNC_OBJECT) are committed appends whose
	// acknowledgement waits until head.GenThrough passes their end.
	genWaiters []*appendOp

	fatal error
	rd    *commitReady // never nil; takeReady swaps it with spare
	spare *commitReady
	// rdUsed: rd may hold effects (set by out, cleared by takeReady).
	rdUsed bool
}

// WAL write states of an appendOp.
const (
	walPending uint8 = iota
	walDone
	walAbandoned // failed before the write completed; walDone releases it
)

type appendOp struct {
	run      provider.Run
	bytes    int64
	minTS    int64
	maxTS    int64
	seq      *ProducerSequence
	future   *AppendFuture
	dupOf    []*AppendFuture // duplicates waiting for this op's outcome
	walState uint8
	target   provider.Target
	walErr   error
	sent     bool
	// Driver-owned timestamps (unix nanos of the runtime's clock) for the
	// append_stage metric; the machine only carries walDoneNs into the
	// resolution. Written before the op is submitted / before walDone is
	// stepped under the owner's lock.
	submittedNs, walDoneNs int64
	// oneEntry holds run.Entries for a single-entry append (the common
	// case: one allocation per append fewer). run.Entries then points into
	// the op, so whoever keeps a run's Entries keeps its op alive: a
	// provider keeps a run only until it calls Write's callback (which
	// holds the op anyway), and the tail cache copies each entry, so
	// nothing keeps an op longer than before.
	oneEntry [1]provider.Entry
}

type mutationOp struct {
	m    mutation
	done chan struct{}
	head *head
	err  error
}

type indexItem struct {
	d         descriptor
	size      int // d.sizeHint(), counted in commitMachine.unconfirmedSize
	confirmed bool
	inherited bool // in the head this owner started from: publish at once
}

type headCAS struct {
	next     *head // &head, or nil
	head     head  // the next head's storage (allocated with the CAS)
	expected metadata.Version
	ops      []*appendOp
	desc     descriptor // the commit of ops (when there are any)
	muts     []*mutationOp
	renew    bool         // the CAS carries a lease renewal
	one      [1]*appendOp // ops' array when it carries one append (one per commit with many streams)
}

// roundReq is one metadata operation of the current round and what its
// result settles.
type roundReq struct {
	kind  roundKind
	op    metadata.Op
	group []*indexItem // roundIndexPut
	cas   *headCAS     // roundHeadCAS
}

type roundKind uint8

const (
	roundHeadCAS roundKind = iota + 1
	roundIndexPut
	roundSettleRead
)

// settleProbe is a settling read that needs the offset index to decide.
type settleProbe struct {
	cas     *headCAS
	fresh   *head
	version metadata.Version
	run     runID
	end     int64
	// gen: this probe scans the generation index (the WAL entry covering
	// the run was retired after a generation replaced it).
	gen bool
}

// Index publication batching. An OBJECT_WAL_ASYNC_OBJECT stream's commits
// wait in the head's Pending list (where reads already find them) until
// indexBatchCommits of them accumulate or their descriptors reach
// indexBatchBytes, and are then published as ONE merged index entry: with
// many streams each taking one commit per round, an index put per commit
// would double the metadata writes per append. There is deliberately no
// time trigger: it would need a timer per stream, and with thousands of
// slow streams it would publish nearly every commit on its own (the head's
// size, which is all the batching costs, is bounded by the two limits).
// Descriptors inherited from an earlier owner publish at once, and
// OBJECT_WAL_SYNC_OBJECT streams publish every round, since their
// acknowledgement waits for it.
const (
	indexBatchCommits = 8
	indexBatchBytes   = 16 << 10
)

// compactPendingAt is how many index-confirmed runs a head may carry before
// a CAS is spent on dropping them alone.
const compactPendingAt = 32

// unknownBackoffMs spaces settling re-reads while the store does not answer.
const unknownBackoffMs = int64(unknownBackoff / 1e6)

func newCommitMachine(h *head, v metadata.Version, sess Session, providerName string, ttlMs int64, maxPendingRuns int) *commitMachine {
	m := &commitMachine{
		id: h.ID, headKey: headKey(h.ID), provider: providerName, sync: h.Profile == ObjectWALSyncObject, genSync: syncObject(h.Profile),
		sessionTTLMs: ttlMs, maxPendingRuns: maxPendingRuns,
		writerID: sess.WriterID, sess: sess, head: h, version: v,
		projEnd: h.End, projCum: h.CommittedBytes, projProducers: h.Producers.Clone(),
		nextCommit: h.Commits + 1, confirmedThrough: h.IndexedThrough,
		rd: &commitReady{}, spare: &commitReady{},
	}
	for _, d := range h.Pending {
		m.addToIndex(m.newIndexItem(d, true))
	}
	if len(m.toIndex) > 0 {
		m.out().kick = true
	}
	return m
}

// takeReady hands the accumulated effects to the driver (nil when there
// are none). The driver gives the batch back with recycleReady once it has
// executed it, so steady-state operation allocates no effect buffers.
func (m *commitMachine) takeReady() *commitReady {
	if !m.rdUsed {
		return nil // nothing was added: no need to look at rd
	}
	m.rdUsed = false
	if m.rd.empty() {
		return nil
	}
	// Swap pointers, not the (pointer-rich) structs.
	out, next := m.rd, m.spare
	if next == nil {
		next = &commitReady{}
	}
	m.rd, m.spare = next, nil
	return out
}

// out is the batch effects are added to. Every producer of effects goes
// through it, so takeReady knows without reading the batch (with thousands
// of streams the spare batch it would check is cold: a cache miss per
// stream per visit) whether there is anything to take.
func (m *commitMachine) out() *commitReady {
	m.rdUsed = true
	return m.rd
}

func (m *commitMachine) recycleReady(r *commitReady) {
	r.reset()
	if m.spare == nil {
		m.spare = r
	}
}

// idle reports whether every admitted append has resolved.
func (m *commitMachine) idle() bool { return len(m.queue) == 0 }

func (m *commitMachine) logf(level slog.Level, msg string, args ...any) {
	m.out().logs = append(m.out().logs, logLine{level: level, msg: msg, args: append([]any{"stream", m.id}, args...)})
}

// ---- Admission ----

// admit validates an append against the projected state, deduplicates it,
// assigns its offsets and asks for its WAL write; or resolves it at once.
func (m *commitMachine) admit(s Session, req AppendRequest, f *AppendFuture) {
	switch {
	case m.fatal != nil:
		m.resolve(f, AppendResult{}, m.fatal)
		return
	case s.Token != m.sess.Token || s.Epoch != m.sess.Epoch:
		m.resolve(f, AppendResult{}, fmt.Errorf("%w: session epoch %d is not the current one (%d)", ErrFenced, s.Epoch, m.sess.Epoch))
		return
	case m.head.State == StateSealed:
		m.resolve(f, AppendResult{}, ErrStreamSealed)
		return
	case m.head.State != StateActive:
		m.resolve(f, AppendResult{}, fmt.Errorf("%w: %v", ErrStreamNotFound, m.id))
		return
	case req.ExpectedStart >= 0 && req.ExpectedStart != m.projEnd:
		m.resolve(f, AppendResult{}, fmt.Errorf("%w: expected %d, next offset is %d", ErrOffsetConflict, req.ExpectedStart, m.projEnd))
		return
	}
	var count, bytes int64
	minTS, maxTS := int64(1<<63-1), int64(-1<<63)
	for _, e := range req.Entries {
		count += int64(e.RecordCount)
		bytes += int64(len(e.Payload))
		minTS, maxTS = min(minTS, e.Timestamp), max(maxTS, e.Timestamp)
	}
	start := m.projEnd
	if q := req.Sequence; q != nil {
		if q.Mode == SequenceMonotonic && q.HasAfter && m.projProducers.Highest(q.Producer) < q.After {
			m.resolve(f, AppendResult{}, fmt.Errorf("%w: the producer's previous append (sequence %d) failed; not committed", ErrStorageUnavailable, q.After))
			return
		}
		verdict, orig := m.projProducers.Check(dedup.Mode(q.Mode), q.Producer, q.Epoch, q.FirstSeq, q.LastSeq)
		switch verdict {
		case dedup.Duplicate:
			if orig.Start < 0 && !m.olderDuplicateCommitted(q) {
				// The projection's window dropped this sequence while
				// later ones are queued, and the committed table does not
				// cover it: it is not known stored. Join the queued
				// append that carries it, or fail (not committed) so the
				// client resends once the queue has resolved. Answering
				// (-1, -1) here would acknowledge an append whose queued
				// original may still fail.
				if op := m.queuedWithSequence(q); op != nil {
					m.out().counters.duplicates++
					op.dupOf = append(op.dupOf, f)
					return
				}
				m.resolve(f, AppendResult{}, fmt.Errorf("%w: sequence %d..%d of producer %q is below its queued appends and not committed; not committed", ErrStorageUnavailable, q.FirstSeq, q.LastSeq, q.Producer))
				return
			}
			m.out().counters.duplicates++
			if orig.End <= m.head.End {
				m.resolve(f, AppendResult{Start: orig.Start, End: orig.End, Duplicate: true}, nil)
				return
			}
			for _, op := range m.queue {
				if op.run.Start == orig.Start {
					op.dupOf = append(op.dupOf, f)
					return
				}
			}
			m.resolve(f, AppendResult{Start: orig.Start, End: orig.End, Duplicate: true}, nil)
			return
		case dedup.OutOfOrder:
			m.resolve(f, AppendResult{}, ErrOutOfOrderSequence)
			return
		case dedup.Fenced:
			m.resolve(f, AppendResult{}, ErrProducerFenced)
			return
		case dedup.Unknown:
			m.resolve(f, AppendResult{}, ErrUnknownProducer)
			return
		}
		if plantedBug != bugDedupNotProjected {
			m.projProducers.Record(q.Producer, q.Epoch, dedup.Batch{FirstSeq: q.FirstSeq, LastSeq: q.LastSeq, Start: start, End: start + count})
		}
	}
	op := &appendOp{
		run:   provider.Run{Stream: uint64(m.id), Epoch: m.sess.Epoch, Token: m.sess.Token, Commit: m.nextCommit, Start: start},
		bytes: bytes, minTS: minTS, maxTS: maxTS, seq: req.Sequence, future: f,
	}
	entries := op.oneEntry[:0:1]
	if len(req.Entries) > 1 {
		entries = make([]provider.Entry, 0, len(req.Entries))
	}
	for _, e := range req.Entries {
		entries = append(entries, provider.Entry{Payload: e.Payload, RecordCount: e.RecordCount, Timestamp: e.Timestamp})
	}
	op.run.Entries = entries
	m.nextCommit++
	m.projEnd = start + count
	m.projCum += bytes
	m.queue = append(m.queue, op)
	m.out().counters.admitted++
	m.out().writes = append(m.out().writes, op)
}

// olderDuplicateCommitted reports whether a sequence older than the
// projection's window is covered by the committed producer table: only then
// is it a duplicate of something stored (Pulsar's answer for it is (-1, -1)).
func (m *commitMachine) olderDuplicateCommitted(q *ProducerSequence) bool {
	return m.head.Producers.Highest(q.Producer) >= q.LastSeq
}

// queuedWithSequence returns the queued (uncommitted) append that carries
// exactly q's sequences, if any.
func (m *commitMachine) queuedWithSequence(q *ProducerSequence) *appendOp {
	for _, op := range m.queue {
		if s := op.seq; s != nil && s.Producer == q.Producer && s.FirstSeq == q.FirstSeq && s.LastSeq == q.LastSeq {
			return op
		}
	}
	return nil
}

// walDone reports op's WAL write outcome. An error (failed, or outcome
// unknown: the provider could not say whether the bytes landed) means the
// run is never CASed, so it is definitely not committed.
func (m *commitMachine) walDone(op *appendOp, t provider.Target, err error) {
	switch op.walState {
	case walPending:
		op.walState, op.target, op.walErr = walDone, t, err
		m.out().kick = true
		if plantedBug == bugAckBeforeHeadCAS && err == nil {
			m.resolve(op.future, AppendResult{Start: op.run.Start, End: op.run.End()}, nil)
			op.future = nil
		}
	case walAbandoned:
		// The append was failed before its WAL write finished: the bytes
		// can never be committed.
		if err == nil {
			m.out().releases = append(m.out().releases, release{target: t, committed: false})
		}
	}
}

// ---- Outcomes ----

// resolve settles an append's future (and any duplicates waiting on it).
func (m *commitMachine) resolve(f *AppendFuture, r AppendResult, err error) {
	if f == nil {
		return // already resolved (only by a planted bug)
	}
	m.out().resolves = append(m.out().resolves, resolution{future: f, result: r, err: err})
}

func (m *commitMachine) resolveOp(op *appendOp, r AppendResult, err error) {
	if op.future != nil && err == nil && op.walDoneNs != 0 {
		m.out().resolves = append(m.out().resolves, resolution{future: op.future, result: r, walDoneNs: op.walDoneNs})
	} else {
		m.resolve(op.future, r, err)
	}
	for _, f := range op.dupOf {
		if err != nil {
			m.resolve(f, AppendResult{}, err)
		} else {
			m.resolve(f, AppendResult{Start: r.Start, End: r.End, Duplicate: true}, nil)
		}
	}
}

func (m *commitMachine) finishMutation(mo *mutationOp, h *head, err error) {
	mo.head, mo.err = h, err
	m.out().mutDone = append(m.out().mutDone, mo)
}

// failQueueFrom fails queue[i:] (never committed: their CAS was never
// applied) and rewinds the projected state to the remaining prefix.
func (m *commitMachine) failQueueFrom(i int, err error) {
	for _, op := range m.queue[i:] {
		switch op.walState {
		case walPending:
			op.walState = walAbandoned
		case walDone:
			if op.walErr == nil {
				m.out().releases = append(m.out().releases, release{target: op.target, committed: false})
			}
		}
		m.resolveOp(op, AppendResult{}, err)
		m.out().counters.failed++
	}
	clear(m.queue[i:])
	m.queue = m.queue[:i]
	m.rebuildProjection()
}

// dropQueued removes the first n appends of the queue (resolved).
func (m *commitMachine) dropQueued(n int) { m.queue = dropFront(m.queue, n) }

// dropFront removes the first n elements of s. When that empties s, the
// array is kept and reused from its start: with one append in flight per
// stream (thousands of streams), re-slicing past the front shrank the
// capacity to nothing and every admission allocated a new array.
func dropFront[T any](s []*T, n int) []*T {
	clear(s[:n])
	if n == len(s) {
		return s[:0]
	}
	return s[n:]
}

func (m *commitMachine) rebuildProjection() {
	m.projEnd = m.head.End
	m.projCum = m.head.CommittedBytes
	m.projProducers = m.head.Producers.Clone()
	for _, op := range m.queue {
		m.projEnd = op.run.End()
		m.projCum += op.bytes
		if q := op.seq; q != nil {
			m.projProducers.Record(q.Producer, q.Epoch, dedup.Batch{FirstSeq: q.FirstSeq, LastSeq: q.LastSeq, Start: op.run.Start, End: op.run.End()})
		}
	}
}

// fail makes the machine permanently unusable (fenced, deleted, released)
// and fails everything queued. Appends already sent in an outstanding CAS
// stay queued until that CAS is settled.
func (m *commitMachine) fail(err error) {
	if m.fatal == nil {
		m.fatal = err
	}
	keep := 0
	for keep < len(m.queue) && m.queue[keep].sent {
		keep++
	}
	m.failQueueFrom(keep, err)
	for _, mo := range m.mutations {
		m.finishMutation(mo, nil, errOwnerGone)
	}
	m.mutations = nil
	for _, op := range m.syncWaiters {
		// Committed; only the index wait is abandoned.
		m.resolveOp(op, AppendResult{Start: op.run.Start, End: op.run.End()}, nil)
	}
	m.syncWaiters = nil
	for _, op := range m.genWaiters {
		// Committed and durable in the WAL; the next owner materializes it.
		m.resolveOp(op, AppendResult{Start: op.run.Start, End: op.run.End()}, nil)
	}
	m.genWaiters = nil
	m.out().headChanged = true
}

// closeNow settles everything when the core stops: a CAS whose outcome is
// still unknown leaves its appends maybe-committed (their WAL targets stay
// unreleased, so the next incarnation's Recover settles them for good).
func (m *commitMachine) closeNow() {
	if cas := m.unsettled; cas != nil {
		for _, op := range cas.ops {
			m.resolveOp(op, AppendResult{}, fmt.Errorf("%w: storage closed before the commit was settled", ErrCommitUnknown))
		}
		n := len(cas.ops)
		m.dropQueued(n)
		m.unsettled, m.probe = nil, nil
	}
	m.fail(ErrClosed)
}

// mutate queues a head mutation behind the appends already admitted.
func (m *commitMachine) mutate(mo *mutationOp) bool {
	if m.fatal != nil {
		return false
	}
	m.mutations = append(m.mutations, mo)
	m.out().kick = true
	return true
}

// renewIfDue asks for a lease renewal when less than two thirds of the
// session TTL is left.
func (m *commitMachine) renewIfDue(nowMs int64) {
	if m.fatal == nil && m.head.Session.ExpiresMs > 0 && m.head.Session.ExpiresMs-nowMs < m.sessionTTLMs*2/3 {
		m.renewWanted = true
		m.out().kick = true
	}
}

// ---- The commit round ----

// prepareRound appends this stream's metadata operations for the next
// commit round (at most one per key). Their results must come back through
// stepRound, in the same order, before prepareRound is called again.
func (m *commitMachine) prepareRound(ops []metadata.Op, nowMs int64) []metadata.Op {
	if len(m.round) != 0 {
		panic("nereus/stream: commit round prepared twice")
	}
	if m.unsettled != nil {
		if m.probe != nil {
			return ops // the index probe decides next
		}
		if nowMs < m.retryAtMs {
			m.wakeAt(m.retryAtMs)
			return ops
		}
		m.round = append(m.round, roundReq{kind: roundSettleRead, op: metadata.Op{Kind: metadata.OpGet, Key: m.headKey}})
		return append(ops, m.round[0].op)
	}
	if m.fatal != nil {
		return ops
	}
	m.prepareIndex()
	m.prepareHead(nowMs)
	for _, r := range m.round {
		ops = append(ops, r.op)
	}
	return ops
}

// stepRound reports the results of the operations prepareRound handed out:
// results[i] for the i-th, or batchErr when the whole round trip failed
// (then every outcome is unknown).
func (m *commitMachine) stepRound(results []metadata.Result, batchErr error, nowMs int64) {
	round := m.round
	m.round = nil
	for i, req := range round {
		var r metadata.Result
		err := batchErr
		if batchErr == nil {
			r, err = results[i], results[i].Err
		}
		switch req.kind {
		case roundHeadCAS:
			m.onHeadResult(req.cas, r, err, nowMs)
		case roundIndexPut:
			m.onIndexResult(req.group, err)
		case roundSettleRead:
			m.onSettleRead(r, err, nowMs)
		}
	}
	// Reuse the array next round (nothing keeps a roundReq).
	clear(round)
	m.round = round[:0]
}

func (m *commitMachine) wakeAt(ms int64) {
	if m.out().wakeAtMs == 0 || ms < m.out().wakeAtMs {
		m.out().wakeAtMs = ms
	}
}

// indexDue reports how many committed runs await index publication and
// whether they should be published in this round.
func (m *commitMachine) indexDue() (n int, due bool) {
	n = m.unconfirmed
	due = n > 0 && (m.sync || m.unconfirmedInherited > 0 || n >= indexBatchCommits || m.unconfirmedSize >= indexBatchBytes ||
		len(m.head.Pending) >= m.maxPendingRuns/2)
	return n, due
}

// indexItemChunk is how many indexItems newIndexItem allocates at once: a
// stream publishes about every indexBatchCommits commits, so a chunk serves
// about one publication, and one allocation replaces one per commit.
const indexItemChunk = indexBatchCommits

// newIndexItem returns an item for d from the machine's current chunk. Items
// are never reused (a round's index put holds pointers to its group), so a
// chunk lives until every item in it is unreferenced.
func (m *commitMachine) newIndexItem(d descriptor, inherited bool) *indexItem {
	if len(m.itemChunk) == cap(m.itemChunk) {
		m.itemChunk = make([]indexItem, 0, indexItemChunk)
	}
	m.itemChunk = append(m.itemChunk, indexItem{d: d, inherited: inherited})
	return &m.itemChunk[len(m.itemChunk)-1]
}

// partChunkLen is how many parts newParts allocates at once: a WAL
// descriptor has one part per run its commit carried, which with one
// append in flight per stream is one, so a chunk serves about eight commits.
const partChunkLen = 8

// newParts returns an empty Parts list with room for exactly n parts, cut
// from the machine's current chunk: one allocation per ~8 commits instead
// of one per commit. The slots [len, len+n) of the chunk are reserved for
// the caller alone (the chunk's length moves past them), and the returned
// slice's capacity is clipped to n, so filling it writes only those slots
// and any later append to it (mergeDescriptors builds a new list anyway)
// reallocates instead of writing into another descriptor's parts. A
// descriptor's Parts never change once it is in a head, and chunks are
// never reused, so a chunk lives until every descriptor cut from it is
// gone.
func (m *commitMachine) newParts(n int) []part {
	if cap(m.partChunk)-len(m.partChunk) < n {
		m.partChunk = make([]part, 0, max(partChunkLen, n))
	}
	at := len(m.partChunk)
	m.partChunk = m.partChunk[:at+n]
	return m.partChunk[at : at : at+n]
}

// addToIndex queues a committed run for index publication.
func (m *commitMachine) addToIndex(it *indexItem) {
	it.size = it.d.sizeHint()
	m.toIndex = append(m.toIndex, it)
	m.unconfirmed++
	m.unconfirmedSize += it.size
	if it.inherited {
		m.unconfirmedInherited++
	}
}

// confirm marks an item's index entry as stored.
func (m *commitMachine) confirm(it *indexItem) {
	if it.confirmed {
		return
	}
	it.confirmed = true
	m.unconfirmed--
	m.unconfirmedSize -= it.size
	if it.inherited {
		m.unconfirmedInherited--
	}
}

func (m *commitMachine) prepareIndex() {
	n, due := m.indexDue()
	if !due {
		return
	}
	pending := make([]*indexItem, 0, n)
	for _, it := range m.toIndex {
		if !it.confirmed {
			pending = append(pending, it)
		}
	}
	// Merge runs of consecutive commits of one session into one entry.
	for start := 0; start < len(pending); {
		end := start + 1
		for end < len(pending) && mergeable(pending[end-1].d, pending[end].d) {
			end++
		}
		group := pending[start:end]
		d := mergeDescriptors(group)
		start = end
		m.round = append(m.round, roundReq{kind: roundIndexPut, group: group,
			op: metadata.Op{Kind: metadata.OpPut, Key: indexKey(m.id, d.End), Value: d.encodeIndexRecord(), Expected: metadata.AnyVersion}})
	}
}

func (m *commitMachine) onIndexResult(group []*indexItem, err error) {
	if err != nil {
		// Unknown or failed: the put is idempotent, so the next round
		// simply sends it again.
		m.out().kick = true
		return
	}
	for _, it := range group {
		m.confirm(it)
	}
	m.advanceIndex()
}

// mergeable reports whether b directly follows a in offsets and session.
func mergeable(a, b descriptor) bool {
	return a.End == b.Start && a.Epoch == b.Epoch && a.Token == b.Token && a.Provider == b.Provider &&
		a.Generation == b.Generation && a.Commit < b.FirstCommit && len(a.Parts)+len(b.Parts) <= 1024
}

func mergeDescriptors(group []*indexItem) descriptor {
	d := group[0].d
	d.encV3 = nil // about to change
	parts := 0
	for _, it := range group {
		parts += len(it.d.Parts)
	}
	d.Parts = append(make([]part, 0, parts), d.Parts...)
	for _, it := range group[1:] {
		n := it.d
		d.End = n.End
		d.Entries += n.Entries
		d.Bytes += n.Bytes
		d.CumBytes = n.CumBytes
		d.MinTS, d.MaxTS = min(d.MinTS, n.MinTS), max(d.MaxTS, n.MaxTS)
		d.Commit = n.Commit
		d.Parts = append(d.Parts, n.Parts...)
	}
	return d
}

// advanceIndex moves confirmedThrough over the confirmed prefix and
// releases appends that wait for index visibility (the acknowledgement
// frontier of OBJECT_WAL_SYNC_OBJECT).
func (m *commitMachine) advanceIndex() {
	n := 0
	for n < len(m.toIndex) && m.toIndex[n].confirmed {
		m.confirmedThrough = max(m.confirmedThrough, m.toIndex[n].d.End)
		n++
	}
	m.toIndex = dropFront(m.toIndex, n)
	keep := m.syncWaiters[:0]
	for _, op := range m.syncWaiters {
		if op.run.End() <= m.confirmedThrough {
			m.resolveOp(op, AppendResult{Start: op.run.Start, End: op.run.End()}, nil)
		} else {
			keep = append(keep, op)
		}
	}
	clear(m.syncWaiters[len(keep):])
	m.syncWaiters = keep
	// Confirmed runs leave Pending with the stream's next commit; only a
	// head carrying many of them gets a CAS of its own. Appends held back
	// while the index lagged go now.
	if len(m.queue) > 0 || m.droppablePending() >= compactPendingAt {
		m.out().kick = true
	}
}

// droppablePending counts the confirmed descriptors at the front of the
// head's Pending list (sorted by offset, so they are all at the front): it
// stops at the first unconfirmed one instead of touching every descriptor,
// which with thousands of streams was a cache miss per descriptor, three
// times per stream per round. Were the list ever out of order, stopping
// early only undercounts, and dropping fewer runs than allowed is always
// safe (filterPending still keeps exactly the unconfirmed ones).
func (m *commitMachine) droppablePending() int {
	n := 0
	for i := range m.head.Pending {
		if m.head.Pending[i].End > m.confirmedThrough {
			break
		}
		n++
	}
	return n
}

// pendingRoom is the free capacity a new Pending array gets: a stream's
// list grows by one descriptor per commit until index publication
// (indexBatchCommits) lets the next commit drop them.
const pendingRoom = indexBatchCommits + 1

// appendPending returns list (m.head's Pending, or a list this round
// built) followed by d. When list is exactly the written prefix of
// pendBuf, d goes into the next slot, which no head can see (see pendBuf);
// otherwise — list came from elsewhere (a decoded head), or a head that
// was never committed wrote past it — list is copied into a new array
// first. The result's capacity is clipped, so an append on it elsewhere
// copies.
func (m *commitMachine) appendPending(list []descriptor, d descriptor) []descriptor {
	n := len(list)
	if n != len(m.pendBuf) || n == cap(m.pendBuf) || (n > 0 && &list[0] != &m.pendBuf[0]) {
		buf := make([]descriptor, n, n+pendingRoom)
		copy(buf, list)
		m.pendBuf = buf
	}
	m.pendBuf = append(m.pendBuf, d)
	return m.pendBuf[: n+1 : n+1]
}

// filterPending returns the descriptors of list not yet confirmed in the
// index (keep of them), in a new array with room for the next commits.
func (m *commitMachine) filterPending(list []descriptor, keep int) []descriptor {
	kept := make([]descriptor, 0, keep+pendingRoom)
	for _, d := range list {
		if d.End > m.confirmedThrough {
			kept = append(kept, d)
		}
	}
	m.pendBuf = kept
	return kept[:len(kept):len(kept)]
}

// cachePending gives every descriptor of next's Pending its v3 encoding
// against its predecessor, so each is encoded once and copied by every
// later head write. Descriptors next shares with m.head (committed, so
// possibly being read elsewhere) are never written: they were cached when
// this machine appended them, unless m.head was decoded from the store;
// then the list is copied first, once.
//
// When m.head's own list is known to be fully cached (head.pendCached: this
// machine built it), the descriptors next shares with it are not even
// looked at: each check read two descriptors' worth of fields, and with
// thousands of streams every one of them was a cache miss, per descriptor
// per commit. Only the descriptors this round added (usually one) are
// encoded. next is then marked fully cached, which head.encode relies on.
func (m *commitMachine) cachePending(next *head) {
	shared := 0
	if cur := m.head.Pending; len(cur) > 0 && len(next.Pending) > 0 && &cur[0] == &next.Pending[0] {
		shared = len(cur)
	}
	from := 0
	if m.head.pendCached {
		from = min(shared, len(next.Pending))
	}
	for i := from; i < len(next.Pending); i++ {
		var prev *descriptor
		if i > 0 {
			prev = &next.Pending[i-1]
		}
		d := &next.Pending[i]
		if d.encV3 != nil && d.encV3Prev == keyOf(prev) {
			continue
		}
		if i < shared {
			n := len(next.Pending)
			buf := make([]descriptor, n, n+pendingRoom)
			copy(buf, next.Pending)
			m.pendBuf = buf
			next.Pending = buf[:n:n]
			shared = 0
			if i > 0 {
				prev = &next.Pending[i-1]
			}
			d = &next.Pending[i]
		}
		d.cachePendingV3(prev, &m.encArena)
	}
	next.pendCached = true
}

func (m *commitMachine) prepareHead(nowMs int64) {
	// Ready appends: the contiguous prefix whose WAL writes completed.
	ready := 0
	for ready < len(m.queue) {
		op := m.queue[ready]
		if op.walState != walDone {
			break
		}
		if op.walErr != nil {
			m.logf(slog.LevelWarn, msgWALWriteFailed, "offset", op.run.Start, "err", op.walErr)
			m.failQueueFrom(ready, fmt.Errorf("%w: WAL write failed, not committed: %w", ErrStorageUnavailable, op.walErr))
			break
		}
		ready++
	}
	dropped := m.droppablePending()
	if ready > 0 && len(m.head.Pending) >= m.maxPendingRuns && dropped == 0 {
		// Index publication lags (a commit adds one descriptor to the head
		// however many runs it carries): hold appends until it catches up;
		// its confirmation kicks this stream again.
		ready = 0
	}
	if ready == 0 && len(m.mutations) == 0 && !m.renewWanted && dropped < compactPendingAt {
		return
	}
	cas := &headCAS{expected: m.version}
	next := &cas.head
	m.head.cloneInto(next) // next.Pending shares m.head's (read-only)
	cas.next = next
	if dropped > 0 {
		next.Pending = m.filterPending(next.Pending, len(next.Pending)-dropped)
		next.IndexedThrough = max(next.IndexedThrough, m.confirmedThrough)
	}
	for _, mo := range m.mutations {
		changed, err := mo.m(next)
		if err != nil {
			m.finishMutation(mo, m.head, err)
			continue
		}
		if !changed {
			m.finishMutation(mo, m.head, nil)
			continue
		}
		cas.muts = append(cas.muts, mo)
	}
	m.mutations = nil
	if m.renewWanted {
		m.renewWanted = false
		if exp := nowMs + m.sessionTTLMs; next.Session.Token == m.sess.Token && next.Session.ExpiresMs > 0 &&
			next.Session.ExpiresMs < exp-m.sessionTTLMs/3 {
			next.Session.ExpiresMs = exp
			cas.renew = true
		}
	}
	if ready > 0 && next.State != StateActive {
		err := ErrStreamSealed
		if next.State != StateSealed {
			err = fmt.Errorf("%w: %v", ErrStreamNotFound, m.id)
		}
		m.failQueueFrom(0, err)
		ready = 0
	}
	if ready > 0 {
		// One descriptor for all of this round's runs of the stream.
		if ready == 1 {
			cas.ops = cas.one[:0]
		}
		d := descriptor{Start: m.queue[0].run.Start, MinTS: 1<<63 - 1, MaxTS: -1 << 63,
			Epoch: m.sess.Epoch, Token: m.sess.Token, FirstCommit: m.queue[0].run.Commit, Provider: m.provider,
			Parts: m.newParts(ready)}
		for _, op := range m.queue[:ready] {
			op.sent = true
			d.End = op.run.End()
			d.Entries += uint32(len(op.run.Entries))
			d.Bytes += op.bytes
			d.MinTS, d.MaxTS = min(d.MinTS, op.minTS), max(d.MaxTS, op.maxTS)
			d.Commit = op.run.Commit
			d.Parts = append(d.Parts, part{Start: op.run.Start, Target: op.target})
			if q := op.seq; q != nil {
				next.ownProducers().Record(q.Producer, q.Epoch, dedup.Batch{FirstSeq: q.FirstSeq, LastSeq: q.LastSeq, Start: op.run.Start, End: op.run.End()})
			}
			cas.ops = append(cas.ops, op)
		}
		d.CumBytes = next.CommittedBytes + d.Bytes
		next.Pending = m.appendPending(next.Pending, d)
		next.End = d.End
		next.CommittedBytes = d.CumBytes
		next.Commits = d.Commit
		cas.desc = d
	}
	if len(cas.ops) == 0 && len(cas.muts) == 0 && dropped == 0 && !cas.renew {
		return
	}
	if len(cas.ops) > 0 {
		// Committing refreshes the session lease.
		next.Session.ExpiresMs = max(next.Session.ExpiresMs, nowMs+m.sessionTTLMs)
	}
	m.cachePending(next)
	m.round = append(m.round, roundReq{kind: roundHeadCAS, cas: cas,
		op: metadata.Op{Kind: metadata.OpPut, Key: m.headKey, Value: next.encode(), Expected: m.version}})
}

// onHeadResult settles the round's head CAS.
func (m *commitMachine) onHeadResult(cas *headCAS, r metadata.Result, err error, nowMs int64) {
	switch metadata.Classify(err) {
	case metadata.Applied:
		m.applyCommitted(cas, cas.next, r.Version, nowMs)
	case metadata.NotApplied:
		// Rejected before it could apply (e.g. record too large): these
		// appends are definitely not committed.
		m.logf(slog.LevelError, "head CAS rejected", "err", err)
		m.unsend(cas)
		for _, mo := range cas.muts {
			m.finishMutation(mo, m.head, err)
		}
		m.failQueueFrom(0, fmt.Errorf("nereus/stream: commit rejected, not committed: %w", err))
	default:
		// Conflict or unknown: settle by re-reading before anything else.
		if metadata.Classify(err) == metadata.Unknown {
			m.out().counters.unknowns++
		} else {
			m.out().counters.conflicts++
		}
		switch plantedBug {
		case bugUnknownIsFailure:
			m.unsend(cas)
			m.failQueueFrom(0, fmt.Errorf("planted bug: unknown CAS treated as failed: %w", err))
			return
		case bugUnknownIsApplied:
			m.applyCommitted(cas, cas.next, m.version, nowMs)
			return
		case bugReleaseUnknown:
			for _, op := range cas.ops {
				m.out().releases = append(m.out().releases, release{target: op.target, committed: false})
			}
		}
		m.unsettled = cas
		m.out().kick = true
	}
}

// applyCommitted makes a settled-as-applied CAS the stream's truth.
// committed is the head now known to be stored (the CAS's own value, or a
// fresher read that includes it) at version v.
func (m *commitMachine) applyCommitted(cas *headCAS, committed *head, v metadata.Version, nowMs int64) {
	m.head, m.version = committed, v
	if n := len(cas.ops); n > 0 {
		m.dropQueued(n)
		m.addToIndex(m.newIndexItem(cas.desc, false))
	}
	for _, op := range cas.ops {
		m.out().committedRuns = append(m.out().committedRuns, op.run)
		m.out().releases = append(m.out().releases, release{target: op.target, committed: true})
		m.out().counters.committed++
		m.out().counters.bytesCommitted += op.bytes
		// A failed machine publishes no more index entries (the next owner
		// does), so its appends stop waiting for them, as in fail.
		if m.sync && m.fatal == nil && plantedBug != bugSyncAckBeforeIndex {
			m.syncWaiters = append(m.syncWaiters, op)
		} else if m.genSync && m.fatal == nil {
			m.genWaiters = append(m.genWaiters, op)
		} else {
			m.resolveOp(op, AppendResult{Start: op.run.Start, End: op.run.End()}, nil)
		}
	}
	for _, mo := range cas.muts {
		m.finishMutation(mo, committed, nil)
	}
	m.releaseGenWaiters()
	m.out().headChanged = true
	// The committed head lives inside cas until the next commit replaces
	// it: drop what cas still points to that the head does not need (the
	// appends and their payloads, which are settled now).
	cas.ops, cas.one, cas.muts = nil, [1]*appendOp{}, nil
	// Only when the next round has something of ours to send: with
	// thousands of streams, a wasted visit per stream per round is a
	// per-stream cost paid by every round.
	m.out().kick = m.out().kick || m.roundWork()
}

// roundWork reports whether prepareRound would find something to do now
// (an append whose WAL write finished, a mutation, a renewal, an index
// publication or Pending compaction that is due, a settling read).
func (m *commitMachine) roundWork() bool {
	if m.unsettled != nil {
		return m.probe == nil
	}
	if m.fatal != nil {
		return false
	}
	if len(m.mutations) > 0 || m.renewWanted {
		return true
	}
	if len(m.queue) > 0 && !m.queue[0].sent && m.queue[0].walState == walDone {
		return true
	}
	if _, due := m.indexDue(); due {
		return true
	}
	return m.droppablePending() >= compactPendingAt
}

// releaseGenWaiters acknowledges BOOKKEEPER_WAL_SYNC_OBJECT appends that a
// published generation now covers, and asks for materialization of the
// rest.
func (m *commitMachine) releaseGenWaiters() {
	if len(m.genWaiters) == 0 {
		return
	}
	keep := m.genWaiters[:0]
	for _, op := range m.genWaiters {
		// A range retention trimmed before it was materialized needs no
		// generation: it was committed, and is gone by policy (waiting
		// for a generation that will never cover it hung the append).
		if op.run.End() <= max(m.head.GenThrough, m.head.Start) {
			m.resolveOp(op, AppendResult{Start: op.run.Start, End: op.run.End()}, nil)
		} else {
			keep = append(keep, op)
		}
	}
	clear(m.genWaiters[len(keep):])
	m.genWaiters = keep
	if len(keep) > 0 {
		m.out().materialize = true
	}
}

// unsend returns a CAS's appends to the not-yet-sent state.
func (m *commitMachine) unsend(cas *headCAS) {
	for _, op := range cas.ops {
		op.sent = false
	}
}

// retryLater holds the next settling read back for unknownBackoff: the
// store did not answer, and the proof must be read again.
func (m *commitMachine) retryLater(nowMs int64) {
	m.retryAtMs = nowMs + unknownBackoffMs
	m.wakeAt(m.retryAtMs)
}

// onSettleRead resolves an unsettled CAS from a fresh read of the head.
//
// The proof that our CAS applied: if the stored session is still ours,
// nobody but us can have advanced Commits, so Commits >= our last run's
// number means applied. If the session moved on (we were fenced), our runs
// are committed exactly if their descriptors — identified by (epoch, token,
// commit) — are in the head's Pending list or in the offset index: a run
// leaves Pending only after its index entry was confirmed. Looking in the
// index is a probe effect; until its answer arrives the outcome stays
// unknown.
func (m *commitMachine) onSettleRead(r metadata.Result, err error, nowMs int64) {
	cas := m.unsettled
	if cas == nil {
		return
	}
	if err != nil {
		if errors.Is(err, metadata.ErrKeyNotFound) {
			m.unsettled = nil
			m.unsend(cas)
			m.fail(fmt.Errorf("%w: %v disappeared", ErrStreamNotFound, m.id))
			return
		}
		m.retryLater(nowMs)
		return
	}
	fresh, derr := decodeHead(r.Record.Value)
	if derr != nil {
		m.logf(slog.LevelError, "stored head is corrupt", "err", derr)
		m.retryLater(nowMs)
		return
	}
	ours := fresh.Session.Token == m.sess.Token && fresh.Session.Epoch == m.sess.Epoch
	applied := false
	if len(cas.ops) > 0 {
		last := cas.ops[len(cas.ops)-1].run
		id := runID{Epoch: last.Epoch, Token: last.Token, Commit: last.Commit}
		if ours {
			applied = fresh.Commits >= last.Commit
		} else {
			var settled bool
			if applied, settled = committedInHead(fresh, id, last.End()); !settled {
				// Only the offset index can prove it now.
				m.probe = &settleProbe{cas: cas, fresh: fresh, version: r.Record.Version, run: id, end: last.End()}
				m.out().probe = &indexProbe{min: indexKey(m.id, last.End()), max: indexKey(m.id, fresh.IndexedThrough+1)}
				return
			}
		}
	}
	m.settle(cas, fresh, r.Record.Version, ours, applied, nowMs)
}

// probeResult reports the index scan a settling read asked for: the first
// index entry at or after the run's end, or the error that kept the scan
// from answering. A failed scan proves nothing, so the outcome stays
// unknown and the head is read again after a backoff.
func (m *commitMachine) probeResult(recs []metadata.Record, err error, nowMs int64) {
	p := m.probe
	if p == nil || m.unsettled != p.cas {
		return
	}
	m.probe = nil
	if err != nil && plantedBug != bugProbeErrorIsNotCommitted {
		m.retryLater(nowMs)
		m.out().kick = true
		return
	}
	found, covered := false, false
	if err == nil && len(recs) > 0 {
		d, derr := decodeIndexRecord(recs[0].Value)
		if derr == nil && p.gen && d.Start < p.end && !d.contains(p.run) && d.lineageLost() {
			derr = errLineageLost // no proof either way: same as a corrupt one
		}
		if derr != nil {
			// Corrupt proof stays corrupt: report the appends as
			// maybe-committed and keep their WAL targets for the next
			// incarnation's Recover rather than guess.
			m.logf(slog.LevelError, "the index entry that would prove the commit outcome is corrupt or incomplete; outcome left unknown", "err", derr)
			for _, op := range p.cas.ops {
				m.resolveOp(op, AppendResult{}, fmt.Errorf("%w: the index entry that would prove it is unusable: %w", ErrCommitUnknown, derr))
			}
			n := len(p.cas.ops)
			m.dropQueued(n)
			m.unsettled = nil
			m.head, m.version = p.fresh, p.version
			m.fence(p.fresh)
			return
		}
		found, covered = d.contains(p.run), d.Start < p.end
	}
	if !covered && plantedBug != bugProbeErrorIsNotCommitted {
		// No entry covers the run's last offset: GC retired it. A
		// generation serving the range carries its lineage; below the
		// start offset the evidence is gone for good.
		if !p.gen && p.end <= p.fresh.GenThrough {
			p.gen = true
			m.probe = p
			m.out().probe = &indexProbe{min: genKey(m.id, p.end), max: genKey(m.id, p.fresh.GenIndexedThrough+1)}
			return
		}
		if p.end <= p.fresh.Start {
			m.logf(slog.LevelWarn, "the run was trimmed and its commit evidence collected; outcome left unknown")
			for _, op := range p.cas.ops {
				// Trimmed either way, so its bytes are garbage either way.
				m.out().releases = append(m.out().releases, release{target: op.target, committed: false})
				m.resolveOp(op, AppendResult{}, fmt.Errorf("%w: %w", ErrCommitUnknown, errTrimmedEvidence))
			}
			n := len(p.cas.ops)
			m.dropQueued(n)
			m.unsettled = nil
			m.head, m.version = p.fresh, p.version
			m.fence(p.fresh)
			return
		}
	}
	m.settle(p.cas, p.fresh, p.version, false, found, nowMs)
}

// settle finishes an unsettled CAS once its outcome is proven.
func (m *commitMachine) settle(cas *headCAS, fresh *head, v metadata.Version, ours, applied bool, nowMs int64) {
	m.unsettled = nil
	if applied {
		m.applyCommitted(cas, fresh, v, nowMs)
		// Mutations in the same CAS were applied too, but re-running an
		// idempotent mutation is harmless and settles its caller.
		if !ours {
			m.fence(fresh)
		}
		return
	}
	m.unsend(cas)
	if !ours {
		for _, mo := range cas.muts {
			m.finishMutation(mo, nil, errOwnerGone)
		}
		m.head, m.version = fresh, v
		m.fence(fresh)
		return
	}
	if m.fatal != nil {
		// Failed while the CAS was outstanding: nothing more is sent, so
		// the appends it carried are definitely not committed now.
		for _, mo := range cas.muts {
			m.finishMutation(mo, nil, errOwnerGone)
		}
		m.head, m.version = fresh, v
		m.fail(m.fatal)
		return
	}
	if fresh.End != m.head.End || fresh.Commits != m.head.Commits {
		// Only this session moves End; anything else is a broken invariant.
		m.logf(slog.LevelError, "head advanced under our session by someone else",
			"ourEnd", m.head.End, "storedEnd", fresh.End)
		m.head, m.version = fresh, v
		m.fail(fmt.Errorf("nereus/stream: invariant violated on %v: head moved under our session", m.id))
		return
	}
	// Not applied, still ours: someone else changed the head (trim, seal,
	// retention from another process). Adopt it and retry next round.
	m.head, m.version = fresh, v
	m.mutations = append(cas.muts, m.mutations...)
	if cas.renew {
		m.renewWanted = true
	}
	m.out().kick = true
}

func (m *commitMachine) fence(fresh *head) {
	m.out().counters.fenced++
	m.fail(fmt.Errorf("%w: stream %v now has session epoch %d", ErrFenced, m.id, fresh.Session.Epoch))
	m.out().drop = true
}
