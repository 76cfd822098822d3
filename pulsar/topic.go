package pulsar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
	"github.com/nereusstream/nereus-go/stream"
)

// topic is a loaded topic (or partition): its ledger, producers and
// subscriptions.
type topic struct {
	s      *Server
	name   managedledger.TopicName
	ledger *managedledger.Ledger

	mu        sync.Mutex
	producers map[string]*producer // by producer name
	exclusive string               // name of the producer holding exclusive access
	waiting   []*waitingProducer   // WaitForExclusive producers queued for access, in arrival order
	epoch     uint64               // topic epoch: bumped at every exclusive acquisition
	subs      map[string]*subscription
	closed    bool

	// Append state, guarded by appendMu. Appends are issued in SEND
	// arrival order under this lock, which is also the commit order.
	appendMu    sync.Mutex
	writerReady bool
	dedup       bool
	lastIndex   int64            // broker-entry-metadata index of the last appended message
	lastSeq     map[string]int64 // dedup: highest sequence id committed per producer name
	// Dedup snapshot bookkeeping. Appends are numbered in issue (= commit)
	// order; settledThrough is the end offset of the longest prefix of
	// appends whose outcomes are all recorded in lastSeq, so a snapshot at
	// that offset is exact even while later appends are in flight.
	writerGen      uint64 // bumped by prepareWriter; tickets of older generations are ignored
	issued         uint64
	prefix         uint64           // appends 1..prefix are settled
	settled        map[uint64]int64 // settled beyond the prefix: id -> end offset (-1: nothing written)
	settledThrough int64
	snapBlocked    bool // an append's outcome stayed unknown: no exact snapshot until reload
	sinceSnap      int
	dedupVer       metadata.Version

	stats topicStats
}

type topicStats struct {
	msgIn, bytesIn, msgOut, bytesOut atomic.Int64
	mu                               sync.Mutex
	last                             time.Time
	lastIn, lastBytesIn              int64
	lastOut, lastBytesOut            int64
	rateIn, tputIn, rateOut, tputOut float64
}

func (s *Server) loadTopic(ctx context.Context, name managedledger.TopicName, create bool) (*topic, error) {
	if name.PartitionIndex() < 0 {
		if n, err := s.ml.PartitionCount(ctx, name); err != nil {
			return nil, err
		} else if n > 0 {
			return nil, newError(pb.ServerError_NotAllowedError,
				fmt.Sprintf("%s is a partitioned topic with %d partitions: use %s", name, n, name.Partition(0)))
		}
	}
	if idx := name.PartitionIndex(); idx >= 0 && create {
		// A partition is only auto-created while its partitioned topic
		// exists and covers the index (as in Pulsar), so clients of a
		// deleted partitioned topic do not resurrect its partitions.
		if n, err := s.ml.PartitionCount(ctx, name.Base()); err != nil {
			return nil, err
		} else if idx >= n {
			create = false
		}
	}
	l, err := s.ml.Open(ctx, name, create)
	if err != nil {
		return nil, err
	}
	if err := s.applyRetention(ctx, l); err != nil {
		s.log.Warn("pulsar retention policy not applied", "topic", name.String(), "err", err)
	}
	t := &topic{s: s, name: name, ledger: l, producers: map[string]*producer{}, subs: map[string]*subscription{},
		lastSeq: map[string]int64{}, lastIndex: -1}
	t.stats.last = time.Now()
	return t, nil
}

// prepareWriter makes the broker this topic's writer (fencing any stale
// owner) and rebuilds the append state: the last broker index and, with
// deduplication, every producer's highest persisted sequence id.
func (t *topic) prepareWriter(ctx context.Context) error {
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if t.writerReady {
		return nil
	}
	info, err := t.ledger.Info(ctx)
	if err != nil {
		return err
	}
	if info.State == stream.StateSealed {
		return newError(pb.ServerError_TopicTerminatedError, "topic "+t.name.String()+" was terminated")
	}
	if err := t.ledger.AcquireWriter(ctx); err != nil {
		return err
	}
	start, end, err := t.ledger.Bounds(ctx)
	if err != nil {
		return err
	}
	t.lastIndex = -1
	if end > start && !t.ledger.CountsMessages() {
		if e, ok, err := t.ledger.ReadOne(ctx, end-1); err != nil {
			return err
		} else if ok {
			if p, err := wire.ParsePayload(e.Payload); err == nil && p.BrokerEntryMetadata != nil && p.BrokerEntryMetadata.Index != nil {
				t.lastIndex = int64(p.BrokerEntryMetadata.GetIndex())
			} else {
				t.lastIndex = end - 1
			}
		}
	}
	t.settledThrough = end
	t.writerGen++
	t.issued, t.prefix, t.settled, t.snapBlocked = 0, 0, map[uint64]int64{}, false
	t.dedup = t.s.dedupEnabled(ctx, t.name)
	if t.dedup {
		if err := t.loadDedupLocked(ctx, start, end); err != nil {
			return err
		}
	}
	t.writerReady = true
	return nil
}

type dedupSnapshot struct {
	Through   int64            `json:"through"`
	Producers map[string]int64 `json:"producers"`
}

// loadDedupLocked restores lastSeq from the snapshot record and replays the
// entries written after it (their MessageMetadata names the producer and
// sequence ids), as Pulsar's MessageDeduplication does.
func (t *topic) loadDedupLocked(ctx context.Context, start, end int64) error {
	t.lastSeq = map[string]int64{}
	from := start
	raw, ver, ok, err := t.s.ml.GetState(ctx, t.name, "dedup")
	if err != nil {
		return err
	}
	t.dedupVer = metadata.NotExists
	if ok {
		var snap dedupSnapshot
		if json.Unmarshal(raw, &snap) == nil {
			for k, v := range snap.Producers {
				t.lastSeq[k] = v
			}
			from = max(from, snap.Through)
		}
		t.dedupVer = ver
	}
	for from < end {
		es, next, err := t.ledger.Read(ctx, from, 1000, 8<<20)
		if err != nil {
			return err
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			p, err := wire.ParsePayload(e.Payload)
			if err != nil {
				continue
			}
			name := p.Metadata.GetProducerName()
			last := int64(max(p.Metadata.GetSequenceId(), p.Metadata.GetHighestSequenceId()))
			if cur, ok := t.lastSeq[name]; !ok || last > cur {
				t.lastSeq[name] = last
			}
		}
		from = next
	}
	return nil
}

// snapshotDedupLocked persists lastSeq when every append has settled, so
// the snapshot's Through is exact. Best effort: a failed write only means
// a longer replay on the next load.
func (t *topic) snapshotDedupLocked(ctx context.Context) {
	if !t.dedup || t.snapBlocked || t.sinceSnap == 0 {
		return
	}
	snap := dedupSnapshot{Through: t.settledThrough, Producers: make(map[string]int64, len(t.lastSeq))}
	for k, v := range t.lastSeq {
		snap.Producers[k] = v
	}
	raw, err := json.Marshal(snap)
	if err != nil {
		return
	}
	v, err := t.s.ml.PutState(ctx, t.name, "dedup", raw, t.dedupVer)
	switch metadata.Classify(err) {
	case metadata.Applied:
		t.dedupVer = v
		t.sinceSnap = 0
	default:
		// Conflict or unknown: re-read the version next time.
		if _, ver, ok, err := t.s.ml.GetState(ctx, t.name, "dedup"); err == nil {
			if ok {
				t.dedupVer = ver
			} else {
				t.dedupVer = metadata.NotExists
			}
		}
	}
}

// appendEntry stores one SEND's message as one stream entry covering one
// offset per message (on a message-counted topic), prefixed with
// broker-entry metadata: the broker timestamp, and on entry-counted topics
// the index (running count of messages minus one, as Pulsar's
// AppendIndexMetadataInterceptor).
// appendTicket identifies an issued append for the snapshot bookkeeping.
type appendTicket struct {
	gen, n uint64
}

func (t *topic) appendEntry(p *producer, send *pb.CommandSend, pl *wire.Payload) (*stream.AppendFuture, appendTicket, error) {
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if !t.writerReady {
		return nil, appendTicket{}, newError(pb.ServerError_ServiceNotReady, "topic is not writable on this broker")
	}
	n := int64(pl.NumMessages())
	idx := t.lastIndex + n
	bem := &pb.BrokerEntryMetadata{BrokerTimestamp: proto.Uint64(uint64(time.Now().UnixMilli()))}
	if !t.ledger.CountsMessages() {
		// Entry-counted topics keep the running index they always stored;
		// message-counted ones derive it from the offset when dispatching.
		bem.Index = proto.Uint64(uint64(idx))
	}
	buf := make([]byte, 0, 16+len(pl.Message))
	buf = wire.AppendBrokerEntryMetadata(buf, bem)
	buf = append(buf, pl.Message...)
	var seq *stream.ProducerSequence
	if t.dedup && !send.GetMarker() {
		first := int64(send.GetSequenceId())
		last := max(first, int64(send.GetHighestSequenceId()), int64(pl.Metadata.GetHighestSequenceId()))
		seq = &stream.ProducerSequence{Mode: stream.SequenceMonotonic, Producer: p.name, FirstSeq: first, LastSeq: last,
			HasAfter: p.sentSeq, After: p.lastSeq}
		p.sentSeq, p.lastSeq = true, last
	}
	fut := t.ledger.AppendAsync(stream.Entry{Payload: buf, RecordCount: uint32(n), Timestamp: int64(pl.Metadata.GetPublishTime())}, seq)
	t.lastIndex = idx
	t.issued++
	return fut, appendTicket{gen: t.writerGen, n: t.issued}, nil
}

// appendSettled records the outcome of append id in the dedup state.
func (t *topic) appendSettled(tk appendTicket, producer string, lastSeq int64, res stream.AppendResult, err error) {
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if tk.gen != t.writerGen || t.settled == nil {
		return // issued before the writer was (re)prepared
	}
	id := tk.n
	end := int64(-1)
	switch {
	case err == nil && !res.Duplicate:
		end = res.End
		if t.dedup {
			if cur, ok := t.lastSeq[producer]; !ok || lastSeq > cur {
				t.lastSeq[producer] = lastSeq
			}
			t.sinceSnap++
		}
	case stream.CommitCertainty(err) == stream.MaybeCommitted:
		// It may be in the stream without being in lastSeq: a snapshot
		// past it could hide it from the replay.
		t.snapBlocked = true
	}
	t.settled[id] = end
	for {
		e, ok := t.settled[t.prefix+1]
		if !ok {
			break
		}
		delete(t.settled, t.prefix+1)
		t.prefix++
		t.settledThrough = max(t.settledThrough, e)
	}
	if t.sinceSnap >= 1000 {
		ctx, cancel := context.WithTimeout(t.s.ctx, 5*time.Second)
		t.snapshotDedupLocked(ctx)
		cancel()
	}
}

// refreshDedup applies a changed deduplication policy to the loaded topic:
// turning it on rebuilds the producers' last sequence ids first.
func (t *topic) refreshDedup(ctx context.Context) error {
	want := t.s.dedupEnabled(ctx, t.name)
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if want == t.dedup {
		return nil
	}
	if want && t.writerReady {
		start, end, err := t.ledger.Bounds(ctx)
		if err != nil {
			return err
		}
		if err := t.loadDedupLocked(ctx, start, end); err != nil {
			return err
		}
	}
	t.dedup = want
	return nil
}

// refreshDedup applies a topic's changed policy to its loaded partitions.
func (s *Server) refreshDedup(ctx context.Context, base managedledger.TopicName) {
	for _, t := range s.loadedTopics() {
		if t.name.Base() == base {
			if err := t.refreshDedup(ctx); err != nil {
				s.log.Warn("pulsar deduplication policy not applied", "topic", t.name.String(), "err", err)
			}
		}
	}
}

// refreshNamespaceDedup applies a namespace's changed policy.
func (s *Server) refreshNamespaceDedup(ctx context.Context, ns string) {
	for _, t := range s.loadedTopics() {
		if t.name.NamespaceName() == ns {
			if err := t.refreshDedup(ctx); err != nil {
				s.log.Warn("pulsar deduplication policy not applied", "topic", t.name.String(), "err", err)
			}
		}
	}
}

// lastSequence is the highest persisted sequence id of a producer name, -1
// if unknown or deduplication is off.
func (t *topic) lastSequence(name string) int64 {
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	if !t.dedup {
		return -1
	}
	if v, ok := t.lastSeq[name]; ok {
		return v
	}
	return -1
}

// writerLost handles a fenced append session: another broker owns the
// stream now. Producers are closed (clients re-lookup); the topic is
// unloaded so a later use reloads it.
func (t *topic) writerLost() {
	t.s.log.Warn("pulsar topic fenced by a newer owner; unloading", "topic", t.name.String())
	t.appendMu.Lock()
	t.writerReady = false
	t.ledger.DropWriter()
	t.appendMu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = t.close(ctx, false)
	}()
}

func (t *topic) subscriptionList() []*subscription {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		out = append(out, s)
	}
	return out
}

// close unloads the topic: clients are told to reconnect, subscriptions
// persist their cursors, the dedup snapshot is written and the append
// session released (only when release is set; a fenced broker must not
// touch the new owner's session).
func (t *topic) close(ctx context.Context, release bool) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	ps := make([]*producer, 0, len(t.producers))
	for _, p := range t.producers {
		ps = append(ps, p)
	}
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	t.s.forgetTopic(t)
	for _, p := range ps {
		p.closeByBroker()
	}
	// Consumers are told too, so they reconnect to the reloaded topic
	// instead of waiting on a stopped dispatcher.
	for _, s := range subs {
		var cs []*consumer
		s.call(func() { cs = append(cs, s.consumers...) })
		for _, c := range cs {
			c.closeByBroker()
		}
	}
	var firstErr error
	for _, s := range subs {
		if err := s.stop(ctx, true); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if release {
		t.appendMu.Lock()
		t.snapshotDedupLocked(ctx)
		t.appendMu.Unlock()
		if err := t.ledger.Close(ctx); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// abort drops the topic without persisting anything (crash simulation).
func (t *topic) abort() {
	t.mu.Lock()
	t.closed = true
	subs := make([]*subscription, 0, len(t.subs))
	for _, s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	for _, s := range subs {
		_ = s.stop(context.Background(), false)
	}
}

func (t *topic) updateRates(now time.Time) {
	st := &t.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	dt := now.Sub(st.last).Seconds()
	if dt <= 0 {
		return
	}
	in, bin, out, bout := st.msgIn.Load(), st.bytesIn.Load(), st.msgOut.Load(), st.bytesOut.Load()
	st.rateIn, st.tputIn = float64(in-st.lastIn)/dt, float64(bin-st.lastBytesIn)/dt
	st.rateOut, st.tputOut = float64(out-st.lastOut)/dt, float64(bout-st.lastBytesOut)/dt
	st.lastIn, st.lastBytesIn, st.lastOut, st.lastBytesOut = in, bin, out, bout
	st.last = now
}

// errTopicClosed is returned to commands racing with an unload.
var errTopicClosed = newError(pb.ServerError_ServiceNotReady, "topic is being unloaded")

// isFenced reports whether an append error means another broker took over.
func isFenced(err error) bool { return errors.Is(err, stream.ErrFenced) }
