package pulsar

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/keyshared"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

// subscription dispatches one topic's entries to the consumers of one
// subscription. A single goroutine (run) owns every field marked
// "loop-owned"; other goroutines reach it with do/call closures. The cursor
// is safe for concurrent use and is updated directly by ACK handlers so an
// ACK_RESPONSE can wait for its flush.
type subscription struct {
	t       *topic
	name    string
	cursor  *managedledger.Cursor
	durable bool

	// Counters for metrics (any goroutine).
	dispatched, redelivered atomic.Int64

	// spans remembers the offset count of entries delivered and not yet
	// acknowledged (any goroutine), so an ACK naming an entry id knows how
	// many offsets it covers without a storage read.
	spanMu sync.Mutex
	spans  map[int64]int64

	cmds     chan func()
	stopCh   chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	// loop-owned
	subType pb.CommandSubscribe_SubType
	// readCompacted: a consumer asked for compacted reads (compaction.go):
	// first deliveries come from the topic's compacted view.
	readCompacted bool
	consumers     []*consumer
	rr            int
	readPos       int64                 // next offset to read for first delivery
	pending       map[int64]*consumer   // delivered, not yet acknowledged
	replay        map[int64]*replayItem // to deliver again (redelivery, key order)
	redeliveries  map[int64]uint32
	slotPending   map[int]*slotState // Key_Shared: sticky-key hash -> consumer holding unacked entries
	replaySlots   map[int]int        // Key_Shared: sticky-key hash -> entries waiting in replay
	keyMode       pb.KeySharedMode   // Key_Shared: AUTO_SPLIT (consistent hashing) or STICKY
	ring          *keyshared.Ring[*consumer]
	active        *consumer // Failover
	notify        <-chan struct{}
	retryAt       time.Time
	delayed       delayedIndex // entries held back until their deliver_at_time (delayed.go)
}

type replayItem struct {
	e    *managedledger.Entry // nil: read again from storage
	slot int                  // -1: unknown until read
	due  bool                 // a delayed entry whose time has come
}

type slotState struct {
	c *consumer
	n int
}

func newSubscription(t *topic, name string, cursor *managedledger.Cursor, durable bool) *subscription {
	s := &subscription{
		t: t, name: name, cursor: cursor, durable: durable,
		cmds: make(chan func(), 1024), stopCh: make(chan struct{}), done: make(chan struct{}),
		readPos: cursor.AckedBelow(), pending: map[int64]*consumer{}, replay: map[int64]*replayItem{},
		redeliveries: map[int64]uint32{}, slotPending: map[int]*slotState{}, replaySlots: map[int]int{},
		spans: map[int64]int64{},
	}
	go s.run()
	go s.flushLoop()
	return s
}

// do queues fn on the dispatcher; false if the subscription stopped.
func (s *subscription) do(fn func()) bool {
	select {
	case s.cmds <- fn:
		return true
	case <-s.stopCh:
		return false
	}
}

// call runs fn on the dispatcher and waits for it.
func (s *subscription) call(fn func()) bool {
	done := make(chan struct{})
	if !s.do(func() { fn(); close(done) }) {
		return false
	}
	select {
	case <-done:
		return true
	case <-s.done:
		return false
	}
}

// stop ends the dispatcher and, with flush, persists the cursor.
func (s *subscription) stop(ctx context.Context, flush bool) error {
	s.stopOnce.Do(func() { close(s.stopCh) })
	<-s.done
	if flush {
		return s.cursor.Flush(ctx)
	}
	return nil
}

func (s *subscription) flushLoop() {
	tick := time.NewTicker(s.t.s.cfg.CursorFlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stopCh:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(s.t.s.ctx, 10*time.Second)
			if err := s.cursor.Flush(ctx); err != nil {
				s.t.s.log.Warn("pulsar cursor flush failed", "topic", s.t.name.String(), "sub", s.name, "err", err)
			}
			cancel()
		}
	}
}

func (s *subscription) run() {
	defer close(s.done)
	for {
		progressed := s.dispatch()
		// Commands change what can be dispatched (permits, consumers,
		// acks): after running any, dispatch again before waiting, or a
		// wait on a stale (or nil) notify channel could sleep forever.
		for drained := false; !drained; {
			select {
			case fn := <-s.cmds:
				fn()
				progressed = true
			case <-s.stopCh:
				return
			default:
				drained = true
			}
		}
		if progressed {
			continue
		}
		var timer *time.Timer
		var timerC <-chan time.Time
		wake := s.retryAt
		if next := s.delayed.next(); !next.IsZero() && (wake.IsZero() || next.Before(wake)) {
			wake = next
		}
		if !wake.IsZero() {
			timer = time.NewTimer(time.Until(wake))
			timerC = timer.C
		}
		notify := s.notify
		if !s.canReceive() {
			notify = nil
		}
		select {
		case fn := <-s.cmds:
			fn()
		case <-notify:
		case <-timerC:
			if !s.retryAt.After(time.Now()) {
				s.retryAt = time.Time{}
			}
		case <-s.stopCh:
			return
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// canReceive reports whether some eligible consumer has permits.
func (s *subscription) canReceive() bool {
	for _, c := range s.consumers {
		if c.permits > 0 && s.eligible(c) {
			return true
		}
	}
	return false
}

func (s *subscription) eligible(c *consumer) bool {
	switch s.subType {
	case pb.CommandSubscribe_Exclusive:
		return len(s.consumers) > 0 && s.consumers[0] == c
	case pb.CommandSubscribe_Failover:
		return s.active == c
	}
	return true
}

// dispatch delivers what it can; true if it made progress.
func (s *subscription) dispatch() bool {
	released := s.releaseDue()
	if !s.canReceive() || !s.retryAt.IsZero() {
		return released
	}
	ctx, cancel := context.WithTimeout(s.t.s.ctx, 10*time.Second)
	defer cancel()
	end, ch, err := s.t.ledger.Notify(ctx)
	if err != nil {
		s.readFailed(err)
		return false
	}
	s.notify = ch
	progressed := released
	if len(s.replay) > 0 {
		progressed = s.dispatchReplay(ctx) || progressed
	}
	if len(s.replay) >= s.t.s.cfg.MaxReplayEntries || s.delayed.size() >= s.t.s.cfg.MaxDelayedEntries ||
		s.readPos >= end || !s.canReceive() {
		return progressed
	}
	read := s.t.ledger.Read
	if s.readCompacted {
		read = s.t.ledger.ReadCompacted
	}
	entries, next, err := read(ctx, s.readPos, s.t.s.cfg.DispatchBatch, 4<<20)
	if err != nil {
		s.readFailed(err)
		return progressed
	}
	for i := range entries {
		e := &entries[i]
		if s.readCompacted && e.Offset > s.readPos {
			// Compaction removed [readPos, e.Offset): nothing there is
			// ever delivered from the view, so the cursor moves past it.
			s.cursor.AckRange(s.readPos, e.Offset)
			s.readPos = e.Offset
		}
		if s.cursor.IsAcked(e.Offset, e.Count) {
			s.readPos = e.End()
			continue
		}
		pl, ok := s.parse(e)
		if !ok {
			s.readPos = e.End()
			continue
		}
		if s.holdDelayed(e.Offset, pl.Metadata.GetDeliverAtTime()) {
			s.readPos = e.End()
			progressed = true
			continue
		}
		c := s.choose(pl)
		if c == nil {
			if s.subType == pb.CommandSubscribe_Key_Shared && s.canReceive() {
				// The key's consumer is busy: hold the entry back and keep
				// going for other keys (per-key order is kept because later
				// entries of the same slot queue behind it).
				s.addReplay(e.Offset, &replayItem{e: e, slot: s.slotOf(pl)})
				s.readPos = e.End()
				progressed = true
				continue
			}
			s.readPos = e.Offset
			return progressed
		}
		s.deliver(c, e, pl)
		s.readPos = e.End()
		progressed = true
	}
	if len(entries) == 0 {
		if s.readCompacted && next > s.readPos {
			s.cursor.AckRange(s.readPos, next)
		}
		s.readPos = max(s.readPos, next)
	}
	return progressed
}

func (s *subscription) readFailed(err error) {
	s.t.s.log.Warn("pulsar dispatch read failed", "topic", s.t.name.String(), "sub", s.name, "err", err)
	s.retryAt = time.Now().Add(200 * time.Millisecond)
}

func (s *subscription) parse(e *managedledger.Entry) (*wire.Payload, bool) {
	pl, err := wire.ParsePayload(e.Payload)
	if err != nil {
		// Corrupt bytes are never served. The entry stays unacknowledged
		// (visible in the backlog) and dispatch moves on.
		s.t.s.log.Error("pulsar entry failed validation; not delivered", "topic", s.t.name.String(), "offset", e.Offset, "err", err)
		return nil, false
	}
	return &pl, true
}

// slotOf is the entry's sticky-key hash in the subscription's hash space:
// [1, 65535] for consistent hashing (AUTO_SPLIT), [0, 65535] for STICKY
// ranges, as Pulsar's selectors compute it.
func (s *subscription) slotOf(pl *wire.Payload) int {
	r := keyshared.ConsistentRange
	if s.keyMode == pb.KeySharedMode_STICKY {
		r = keyshared.StickyRange
	}
	return keyshared.StickyKeyHash(pl.StickyKey(), r)
}

func (s *subscription) addReplay(off int64, it *replayItem) {
	s.redelivered.Add(1)
	if old, ok := s.replay[off]; ok {
		if old.e == nil && it.e != nil {
			old.e = it.e
		}
		return
	}
	s.replay[off] = it
	if it.slot >= 0 {
		s.replaySlots[it.slot]++
	}
}

func (s *subscription) removeReplay(off int64) {
	it, ok := s.replay[off]
	if !ok {
		return
	}
	delete(s.replay, off)
	if it.slot >= 0 {
		if s.replaySlots[it.slot]--; s.replaySlots[it.slot] <= 0 {
			delete(s.replaySlots, it.slot)
		}
	}
}

// dispatchReplay delivers held-back entries in offset order.
func (s *subscription) dispatchReplay(ctx context.Context) bool {
	offs := make([]int64, 0, len(s.replay))
	for off := range s.replay {
		offs = append(offs, off)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	blocked := map[int]bool{}
	progressed := false
	budget := s.t.s.cfg.DispatchBatch
	for _, off := range offs {
		if budget == 0 || !s.canReceive() {
			break
		}
		it := s.replay[off]
		if s.cursor.IsAcked(off, s.spanOf(ctx, off, it.e)) {
			s.removeReplay(off)
			progressed = true
			continue
		}
		e := it.e
		if e == nil {
			re, ok, err := s.t.ledger.ReadOne(ctx, off)
			if err != nil {
				s.readFailed(err)
				return progressed
			}
			if !ok { // trimmed away
				s.removeReplay(off)
				progressed = true
				continue
			}
			e = &re
		}
		pl, ok := s.parse(e)
		if !ok {
			s.removeReplay(off)
			continue
		}
		slot := -1
		if s.subType == pb.CommandSubscribe_Key_Shared {
			slot = s.slotOf(pl)
			if it.slot < 0 {
				it.slot = slot
				s.replaySlots[slot]++
			}
			if blocked[slot] {
				continue
			}
		}
		c := s.chooseReplay(pl, slot)
		if c == nil {
			if slot >= 0 {
				blocked[slot] = true
				continue
			}
			break
		}
		s.removeReplay(off)
		s.deliver(c, e, pl)
		budget--
		progressed = true
	}
	return progressed
}

// choose picks the consumer for a first delivery, nil if none can take it.
func (s *subscription) choose(pl *wire.Payload) *consumer {
	if s.subType == pb.CommandSubscribe_Key_Shared {
		slot := s.slotOf(pl)
		if s.replaySlots[slot] > 0 {
			return nil // an earlier entry of this key is waiting
		}
		return s.keyOwner(slot)
	}
	return s.chooseReplay(pl, -1)
}

func (s *subscription) chooseReplay(pl *wire.Payload, slot int) *consumer {
	switch s.subType {
	case pb.CommandSubscribe_Exclusive:
		if len(s.consumers) > 0 && s.consumers[0].permits > 0 {
			return s.consumers[0]
		}
		return nil
	case pb.CommandSubscribe_Failover:
		if s.active != nil && s.active.permits > 0 {
			return s.active
		}
		return nil
	case pb.CommandSubscribe_Key_Shared:
		if slot < 0 {
			slot = s.slotOf(pl)
		}
		return s.keyOwner(slot)
	}
	return s.nextShared()
}

// sortByPriority keeps Shared consumers ordered by priority level (0 is
// the highest), in arrival order within a level, as Pulsar's consumerList.
func (s *subscription) sortByPriority() {
	sort.SliceStable(s.consumers, func(i, j int) bool { return s.consumers[i].priority < s.consumers[j].priority })
}

// nextShared is Pulsar's AbstractDispatcherMultipleConsumers.getNextConsumer:
// a consumer with permits on a higher priority level than the round-robin
// position first, else round robin within the current level, else the
// first available consumer on a lower level.
func (s *subscription) nextShared() *consumer {
	n := len(s.consumers)
	if n == 0 {
		return nil
	}
	if s.rr >= n {
		s.rr = 0
	}
	level := s.consumers[s.rr].priority
	for i := 0; i < s.rr; i++ {
		c := s.consumers[i]
		if c.priority >= level {
			break
		}
		if c.permits > 0 {
			s.rr = i + 1
			return c
		}
	}
	first, end := s.rr, s.rr
	for first > 0 && s.consumers[first-1].priority == level {
		first--
	}
	for end < n && s.consumers[end].priority == level {
		end++
	}
	width := end - first
	for k := 0; k < width; k++ {
		i := first + (s.rr-first+k)%width
		if s.consumers[i].permits > 0 {
			s.rr = i + 1
			return s.consumers[i]
		}
	}
	for i := end; i < n; i++ {
		if s.consumers[i].permits > 0 {
			s.rr = i + 1
			return s.consumers[i]
		}
	}
	return nil
}

// keyOwner returns the consumer owning slot if it may receive now: it has
// permits and no other consumer still holds unacknowledged entries of the
// slot (which keeps per-key order across consumer changes, like Pulsar's
// draining hashes).
func (s *subscription) keyOwner(slot int) *consumer {
	owner := s.selectKeyConsumer(slot)
	if owner == nil || owner.permits <= 0 {
		return nil
	}
	if sp := s.slotPending[slot]; sp != nil && sp.c != owner && sp.n > 0 {
		return nil
	}
	return owner
}

// selectKeyConsumer is Pulsar's selector: the STICKY consumer whose
// declared range holds slot, or the consistent-hashing ring's choice.
func (s *subscription) selectKeyConsumer(slot int) *consumer {
	if s.keyMode == pb.KeySharedMode_STICKY {
		for _, c := range s.consumers {
			for _, r := range c.ranges {
				if slot >= r[0] && slot <= r[1] {
					return c
				}
			}
		}
		return nil
	}
	if s.ring == nil {
		return nil
	}
	c, _ := s.ring.Select(slot)
	return c
}

func (s *subscription) deliver(c *consumer, e *managedledger.Entry, pl *wire.Payload) {
	msgID := &pb.MessageIdData{LedgerId: proto.Uint64(uint64(s.t.ledger.LedgerID())), EntryId: proto.Uint64(uint64(e.Offset))}
	cmd := &pb.CommandMessage{ConsumerId: proto.Uint64(c.id), MessageId: msgID}
	if n := s.redeliveries[e.Offset]; n > 0 {
		cmd.RedeliveryCount = proto.Uint32(n)
	}
	if set := s.cursor.BatchAckSet(e.Offset, e.Count); set != nil {
		cmd.AckSet = make([]int64, len(set))
		for i, w := range set {
			cmd.AckSet[i] = int64(w)
		}
	}
	parts := [][]byte{pl.Message}
	if c.c.brokerEntryMeta {
		parts = s.withBrokerEntryMetadata(e, pl)
	}
	frame, err := wire.AppendPayloadCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_MESSAGE.Enum(), Message: cmd}, parts...)
	if err != nil || !c.c.send(frame) {
		// The consumer's connection is gone; its cleanup will remove it.
		c.permits = 0
		s.addReplay(e.Offset, &replayItem{e: e, slot: -1})
		return
	}
	n := pl.NumMessages()
	c.permits -= int64(n)
	c.unacked++
	s.pending[e.Offset] = c
	s.rememberSpan(e.Offset, e.Count)
	if s.subType == pb.CommandSubscribe_Key_Shared {
		slot := s.slotOf(pl)
		sp := s.slotPending[slot]
		if sp == nil || sp.n == 0 {
			sp = &slotState{c: c}
			s.slotPending[slot] = sp
		}
		sp.n++
		c.pendingSlots[e.Offset] = slot
	}
	s.dispatched.Add(1)
	s.t.stats.msgOut.Add(int64(n))
	s.t.stats.bytesOut.Add(int64(len(pl.Message)))
}

// settle forgets a delivered entry once acknowledged (or redelivered).
func (s *subscription) settle(off int64) {
	c, ok := s.pending[off]
	if !ok {
		return
	}
	delete(s.pending, off)
	c.unacked--
	if slot, ok := c.pendingSlots[off]; ok {
		delete(c.pendingSlots, off)
		if sp := s.slotPending[slot]; sp != nil {
			if sp.n--; sp.n <= 0 {
				delete(s.slotPending, slot)
			}
		}
	}
}

// withBrokerEntryMetadata is the payload for a client that reads broker
// entry metadata. On a message-counted topic the index (the offset of the
// entry's last message, as AppendIndexMetadataInterceptor numbers it) is
// the stream's own coordinate, so it is derived here rather than stored:
// appends from other writers of the stream (the Kafka projection) cannot
// make it wrong. An entry-counted topic serves the prefix it stored.
func (s *subscription) withBrokerEntryMetadata(e *managedledger.Entry, pl *wire.Payload) [][]byte {
	if !s.t.ledger.CountsMessages() {
		return [][]byte{e.Payload}
	}
	bem := &pb.BrokerEntryMetadata{Index: proto.Uint64(uint64(e.End() - 1))}
	if stored := pl.BrokerEntryMetadata; stored != nil && stored.BrokerTimestamp != nil {
		bem.BrokerTimestamp = stored.BrokerTimestamp
	}
	return [][]byte{wire.AppendBrokerEntryMetadata(nil, bem), pl.Message}
}

func (s *subscription) rememberSpan(off, n int64) {
	if n <= 1 {
		return
	}
	s.spanMu.Lock()
	s.spans[off] = n
	s.spanMu.Unlock()
}

// forgetSpans drops remembered spans of acknowledged entries: off alone,
// or with below >= 0 every entry starting at or below it.
func (s *subscription) forgetSpans(offs []int64, below int64) {
	s.spanMu.Lock()
	defer s.spanMu.Unlock()
	for _, off := range offs {
		delete(s.spans, off)
	}
	if below >= 0 {
		for off := range s.spans {
			if off <= below {
				delete(s.spans, off)
			}
		}
	}
}

// spanOf is how many offsets the entry starting at off covers: 1 on an
// entry-counted topic; else from e when known, the remembered spans, or a
// storage read (an ACK for an entry this broker never delivered, e.g.
// after a restart).
func (s *subscription) spanOf(ctx context.Context, off int64, e *managedledger.Entry) int64 {
	if !s.t.ledger.CountsMessages() {
		return 1
	}
	if e != nil {
		return e.Count
	}
	s.spanMu.Lock()
	n, ok := s.spans[off]
	s.spanMu.Unlock()
	if ok {
		return n
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	re, ok, err := s.t.ledger.EntryContaining(ctx, off)
	if err != nil || !ok || re.Offset != off {
		return 1
	}
	return re.Count
}
