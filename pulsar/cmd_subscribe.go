// SUBSCRIBE, CLOSE_CONSUMER, UNSUBSCRIBE, ACTIVE_CONSUMER_CHANGE.
//
// Behaviour:
//   - SUBSCRIBE loads (auto-creating when allowed and force_topic_creation)
//     the topic and opens the subscription: a durable cursor persisted in
//     metadata (created at the end of the topic for initialPosition Latest,
//     at its start for Earliest), or for readers (durable=false) an
//     in-memory cursor starting at start_message_id (earliest/latest
//     sentinels honoured; the client filters the start entry itself).
//   - Exclusive admits one consumer (a second gets ConsumerBusy); Failover
//     admits many and makes one active, as Pulsar's single-active-consumer
//     dispatcher: consumers sorted by (priority level, name), only the
//     highest level competes; partition i goes to i % n of them, a
//     non-partitioned topic to the owner of the topic name's hash on a ring
//     of 100 points per consumer name. Every change is announced with
//     ACTIVE_CONSUMER_CHANGE and the new active consumer gets the old one's
//     unacknowledged entries. Shared admits many and dispatches by priority
//     level (0 first; round robin within a level; a lower level only when
//     no higher one has permits). A consumer with another subscription type
//     gets ConsumerBusy.
//   - Key_Shared: AUTO_SPLIT (the default) is Pulsar 4.x's
//     ConsistentHashingStickyKeyConsumerSelector (package keyshared: 100
//     points per consumer name on a Murmur3 ring over hashes [1, 65535]),
//     so keys map to the same consumer names as on Apache Pulsar; STICKY
//     uses the consumer's declared ranges over [0, 65535] (overlap or no
//     range is ConsumerAssignError); a consumer whose mode differs from
//     the subscription's gets ConsumerBusy. The sticky key is the ordering
//     key, else the partition key, else "<producer>-<sequence id>". An
//     entry is never given to a new owner of its key while another consumer
//     still holds unacknowledged entries of that key (Pulsar's draining
//     hashes), so per-key order holds across joins and leaves.
//   - When a consumer leaves, its unacknowledged entries are redelivered
//     (redelivery count + 1) to the remaining consumers.
//   - CLOSE_CONSUMER answers SUCCESS. A reader's subscription disappears
//     with its last consumer.
//   - UNSUBSCRIBE deletes the subscription (its cursor record) when the
//     requesting consumer is its only one (or force is set) and answers
//     SUCCESS; otherwise ConsumerBusy.
//
// Differences from the real broker:
//   - No consumer-level maxUnackedMessages blocking, no replicated
//     subscriptions, no delayed delivery; Key_Shared ignores priority levels (as Pulsar's
//     consistent-hashing selector does) and allowOutOfOrderDelivery.

package pulsar

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/keyshared"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

func init() {
	register(pb.BaseCommand_SUBSCRIBE, handleSubscribe)
	register(pb.BaseCommand_CLOSE_CONSUMER, handleCloseConsumer)
	register(pb.BaseCommand_UNSUBSCRIBE, handleUnsubscribe)
}

// consumer is one attached consumer. Fields below "loop-owned" belong to
// its subscription's dispatcher.
type consumer struct {
	id       uint64
	name     string
	c        *conn
	sub      *subscription
	subType  pb.CommandSubscribe_SubType
	priority int32
	since    time.Time
	metadata map[string]string
	keyMode  pb.KeySharedMode // Key_Shared only
	ranges   [][2]int         // Key_Shared STICKY ranges, inclusive

	detachOnce sync.Once

	// loop-owned
	permits      int64
	unacked      int
	pendingSlots map[int64]int
}

func handleSubscribe(c *conn, f wire.Frame) error {
	cmd := f.Cmd.GetSubscribe()
	reqID := cmd.GetRequestId()
	c.async(func(ctx context.Context) {
		cons, active, err := subscribe(ctx, c, cmd)
		if err != nil {
			c.sendErr(reqID, err)
			return
		}
		c.sendSuccess(reqID)
		if cons.subType == pb.CommandSubscribe_Failover {
			cons.sendActive(active)
		}
	})
	return nil
}

func subscribe(ctx context.Context, c *conn, cmd *pb.CommandSubscribe) (*consumer, bool, error) {
	name, err := managedledger.ParseTopicName(cmd.GetTopic())
	if err != nil {
		return nil, false, err
	}
	if err := c.authorize(ctx, name, actionConsume); err != nil {
		return nil, false, err
	}
	if cmd.GetSubscription() == "" {
		return nil, false, newError(pb.ServerError_InvalidTopicName, "empty subscription name")
	}
	if old := c.consumer(cmd.GetConsumerId()); old != nil {
		if old.sub.t.name == name && old.sub.name == cmd.GetSubscription() {
			return old, old.sub.isActive(old), nil // retried SUBSCRIBE
		}
		return nil, false, newError(pb.ServerError_ConsumerBusy, "consumer id already in use on this connection")
	}
	t, err := c.s.getTopic(ctx, name, c.s.autoCreate() && cmd.GetForceTopicCreation())
	if err != nil {
		return nil, false, err
	}
	if err := checkConsumerSchema(ctx, c.s, name, cmd.GetSchema()); err != nil {
		return nil, false, err
	}
	if cmd.GetReadCompacted() && (name.Domain != "persistent" ||
		cmd.GetSubType() != pb.CommandSubscribe_Exclusive && cmd.GetSubType() != pb.CommandSubscribe_Failover) {
		// As Pulsar's broker: compacted reads need a single active consumer.
		return nil, false, newError(pb.ServerError_NotAllowedError,
			"Read compacted can only be used with exclusive or failover persistent subscriptions")
	}
	sub, err := t.openSubscription(ctx, cmd)
	if err != nil {
		return nil, false, err
	}
	if cmd.GetReadCompacted() {
		sub.call(func() { sub.readCompacted = true })
	}
	cons := &consumer{id: cmd.GetConsumerId(), name: cmd.GetConsumerName(), c: c, sub: sub, subType: cmd.GetSubType(),
		priority: cmd.GetPriorityLevel(), pendingSlots: map[int64]int{}, since: time.Now(), metadata: kvMap(cmd.GetMetadata())}
	if cons.name == "" {
		cons.name = fmt.Sprintf("consumer-%d", cons.id)
	}
	if km := cmd.GetKeySharedMeta(); km != nil && km.GetKeySharedMode() == pb.KeySharedMode_STICKY {
		cons.keyMode = pb.KeySharedMode_STICKY
		for _, r := range km.GetHashRanges() {
			cons.ranges = append(cons.ranges, [2]int{int(r.GetStart()), int(r.GetEnd())})
		}
	}
	var addErr error
	var active bool
	if !sub.call(func() { active, addErr = sub.addConsumer(cons) }) {
		return nil, false, errTopicClosed
	}
	if addErr != nil {
		t.dropIfUnused(sub)
		return nil, false, addErr
	}
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		cons.detach()
		return nil, false, errors.New("connection closed")
	}
	c.consumers[cons.id] = cons
	c.mu.Unlock()
	return cons, active, nil
}

// openSubscription returns the loaded subscription, opening its cursor
// first if needed.
func (t *topic) openSubscription(ctx context.Context, cmd *pb.CommandSubscribe) (*subscription, error) {
	subName := cmd.GetSubscription()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errTopicClosed
	}
	if sub := t.subs[subName]; sub != nil {
		t.mu.Unlock()
		return sub, nil
	}
	t.mu.Unlock()
	start, end, err := t.ledger.Bounds(ctx)
	if err != nil {
		return nil, err
	}
	var cursor *managedledger.Cursor
	durable := cmd.GetDurable()
	if durable {
		cursor, _, err = t.ledger.OpenCursor(ctx, subName, func() (int64, error) {
			if cmd.GetInitialPosition() == pb.CommandSubscribe_Earliest {
				return start, nil
			}
			return end, nil
		})
		if err != nil {
			return nil, err
		}
	} else {
		off := end
		if id := cmd.GetStartMessageId(); id != nil {
			off = t.ledger.OffsetOf(managedledger.Position{LedgerID: int64(id.GetLedgerId()), EntryID: int64(id.GetEntryId())})
		} else if cmd.GetInitialPosition() == pb.CommandSubscribe_Earliest {
			off = start
		}
		off = min(max(off, start), end)
		cursor = t.ledger.NonDurableCursor(subName, off)
	}
	sub := newSubscription(t, subName, cursor, durable)
	t.mu.Lock()
	if existing := t.subs[subName]; existing != nil || t.closed {
		t.mu.Unlock()
		_ = sub.stop(ctx, false)
		if existing == nil {
			return nil, errTopicClosed
		}
		return existing, nil
	}
	t.subs[subName] = sub
	t.mu.Unlock()
	return sub, nil
}

// dropIfUnused removes a reader subscription that has no consumers.
func (t *topic) dropIfUnused(sub *subscription) {
	if sub.durable {
		return
	}
	empty := false
	if !sub.call(func() { empty = len(sub.consumers) == 0 }) || !empty {
		return
	}
	t.mu.Lock()
	if t.subs[sub.name] == sub {
		delete(t.subs, sub.name)
	}
	t.mu.Unlock()
	_ = sub.stop(context.Background(), false)
}

// addConsumer runs on the dispatcher. It returns whether the new consumer
// is the active one (Failover).
func (s *subscription) addConsumer(c *consumer) (bool, error) {
	if len(s.consumers) > 0 && s.subType != c.subType {
		return false, newError(pb.ServerError_ConsumerBusy, fmt.Sprintf("subscription %s is of type %v", s.name, s.subType))
	}
	if c.subType == pb.CommandSubscribe_Exclusive && len(s.consumers) > 0 {
		return false, newError(pb.ServerError_ConsumerBusy, "exclusive consumer is already connected")
	}
	if c.subType == pb.CommandSubscribe_Key_Shared && len(s.consumers) > 0 && s.keyMode != c.keyMode {
		return false, newError(pb.ServerError_ConsumerBusy, fmt.Sprintf("subscription %s has key-shared mode %v", s.name, s.keyMode))
	}
	if c.keyMode == pb.KeySharedMode_STICKY && len(c.ranges) == 0 {
		return false, newError(pb.ServerError_ConsumerAssignError, "STICKY key-shared consumer without hash ranges")
	}
	for _, r := range c.ranges {
		if r[0] < 0 || r[1] >= keyshared.DefaultRangeSize || r[0] > r[1] {
			return false, newError(pb.ServerError_ConsumerAssignError, fmt.Sprintf("bad hash range [%d, %d]", r[0], r[1]))
		}
		for _, o := range s.consumers {
			for _, or := range o.ranges {
				if r[0] <= or[1] && or[0] <= r[1] {
					return false, newError(pb.ServerError_ConsumerAssignError,
						fmt.Sprintf("hash range [%d, %d] overlaps consumer %s", r[0], r[1], o.name))
				}
			}
		}
	}
	s.subType = c.subType
	s.consumers = append(s.consumers, c)
	switch s.subType {
	case pb.CommandSubscribe_Key_Shared:
		s.keyMode = c.keyMode
		if c.keyMode != pb.KeySharedMode_STICKY {
			if s.ring == nil {
				s.ring = keyshared.NewRing[*consumer](keyshared.DefaultPoints)
			}
			s.ring.Add(c, c.name)
		}
	case pb.CommandSubscribe_Shared:
		s.sortByPriority()
	case pb.CommandSubscribe_Failover:
		s.electActive(c)
	}
	return s.active == c, nil
}

func (s *subscription) isActive(c *consumer) bool {
	active := false
	s.call(func() { active = s.active == c })
	return active
}

// electActive recomputes the Failover active consumer, announcing changes
// to every consumer except skip (which the caller answers itself).
func (s *subscription) electActive(skip *consumer) {
	if len(s.consumers) == 0 {
		s.active = nil
		return
	}
	next := failoverActive(s.consumers, s.t.name.String(), s.t.name.PartitionIndex())
	if next == s.active {
		return
	}
	prev := s.active
	s.active = next
	if prev != nil {
		s.rewind()
	}
	for _, c := range s.consumers {
		if c != skip {
			c.sendActive(c == next)
		}
	}
}

// rewind makes every unacknowledged entry deliverable again from the
// cursor's first unacknowledged offset (Exclusive/Failover ownership
// change, or REDELIVER without ids).
func (s *subscription) rewind() {
	for off, c := range s.pending {
		s.redeliveries[off]++
		c.unacked--
		delete(c.pendingSlots, off)
	}
	s.pending = map[int64]*consumer{}
	s.replay = map[int64]*replayItem{}
	s.replaySlots = map[int]int{}
	s.slotPending = map[int]*slotState{}
	s.delayed.reset() // re-indexed as the entries are read again
	s.readPos = s.cursor.AckedBelow()
}

// removeConsumer runs on the dispatcher.
func (s *subscription) removeConsumer(c *consumer) {
	i := -1
	for j, o := range s.consumers {
		if o == c {
			i = j
		}
	}
	if i < 0 {
		return
	}
	s.consumers = append(s.consumers[:i], s.consumers[i+1:]...)
	switch s.subType {
	case pb.CommandSubscribe_Shared, pb.CommandSubscribe_Key_Shared:
		for off, pc := range s.pending {
			if pc == c {
				// Keep the key's slot so later entries of the same key wait
				// behind this one (per-key order across the hand-over).
				slot, ok := c.pendingSlots[off]
				if !ok {
					slot = -1
				}
				s.settle(off)
				s.redeliveries[off]++
				s.addReplay(off, &replayItem{slot: slot})
			}
		}
		if s.subType == pb.CommandSubscribe_Key_Shared && s.ring != nil {
			s.ring.Remove(c)
		}
	case pb.CommandSubscribe_Failover:
		if s.active == c {
			s.active = nil
			s.rewind()
		}
		s.electActive(nil)
	default:
		s.rewind()
	}
}

func (c *consumer) sendActive(active bool) {
	c.c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_ACTIVE_CONSUMER_CHANGE.Enum(), ActiveConsumerChange: &pb.CommandActiveConsumerChange{
		ConsumerId: proto.Uint64(c.id), IsActive: proto.Bool(active)}})
}

// detach removes the consumer from its subscription (and the reader
// subscription with its last consumer).
func (c *consumer) detach() { c.detachKeep(false) }

// detachKeep detaches the consumer; with keep a reader's (non-durable)
// subscription stays for the client's reconnect, as Pulsar keeps it after
// a seek (its cursor was just repositioned; a new subscription would start
// at the reader's original start id). Unused, it goes after
// keptReaderTTL.
func (c *consumer) detachKeep(keep bool) {
	c.detachOnce.Do(func() {
		s := c.sub
		s.call(func() { s.removeConsumer(c) })
		if !keep {
			s.t.dropIfUnused(s)
			return
		}
		time.AfterFunc(keptReaderTTL, func() { s.t.dropIfUnused(s) })
	})
}

// keptReaderTTL is how long a reader's subscription kept after a seek waits
// for the reader to come back.
const keptReaderTTL = time.Minute

// closeByBroker tells the client its consumer is closed (it reconnects and
// subscribes again) and detaches it.
func (c *consumer) closeByBroker() { c.closeByBrokerKeep(false) }

// closeByBrokerKeep is closeByBroker; with keep a reader's subscription
// stays (see detachKeep).
func (c *consumer) closeByBrokerKeep(keep bool) {
	c.c.mu.Lock()
	if c.c.consumers[c.id] == c {
		delete(c.c.consumers, c.id)
	}
	c.c.mu.Unlock()
	c.detachKeep(keep)
	c.c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &pb.CommandCloseConsumer{
		ConsumerId: proto.Uint64(c.id), RequestId: proto.Uint64(0)}})
}

func handleCloseConsumer(c *conn, f wire.Frame) error {
	cmd := f.Cmd.GetCloseConsumer()
	c.mu.Lock()
	cons := c.consumers[cmd.GetConsumerId()]
	delete(c.consumers, cmd.GetConsumerId())
	c.mu.Unlock()
	reqID := cmd.GetRequestId()
	if cons == nil {
		c.sendSuccess(reqID)
		return nil
	}
	c.async(func(ctx context.Context) {
		cons.detach()
		c.sendSuccess(reqID)
	})
	return nil
}

func handleUnsubscribe(c *conn, f wire.Frame) error {
	cmd := f.Cmd.GetUnsubscribe()
	reqID := cmd.GetRequestId()
	cons := c.consumer(cmd.GetConsumerId())
	if cons == nil {
		c.sendError(reqID, pb.ServerError_ConsumerNotFound, "consumer not found")
		return nil
	}
	force := cmd.GetForce()
	c.async(func(ctx context.Context) {
		s := cons.sub
		others := 0
		s.call(func() {
			for _, o := range s.consumers {
				if o != cons {
					others++
				}
			}
		})
		if others > 0 && !force {
			c.sendError(reqID, pb.ServerError_ConsumerBusy, "subscription has other connected consumers")
			return
		}
		if err := s.t.deleteSubscription(ctx, s.name); err != nil {
			c.sendErr(reqID, err)
			return
		}
		c.mu.Lock()
		delete(c.consumers, cons.id)
		c.mu.Unlock()
		c.sendSuccess(reqID)
	})
	return nil
}

// deleteSubscription disconnects a subscription's consumers, stops it and
// deletes its cursor record.
func (t *topic) deleteSubscription(ctx context.Context, name string) error {
	t.mu.Lock()
	sub := t.subs[name]
	delete(t.subs, name)
	t.mu.Unlock()
	if sub != nil {
		var cs []*consumer
		sub.call(func() { cs = append(cs, sub.consumers...) })
		_ = sub.stop(ctx, false)
		for _, cons := range cs {
			cons.c.mu.Lock()
			delete(cons.c.consumers, cons.id)
			cons.c.mu.Unlock()
		}
		if !sub.durable {
			return nil
		}
	}
	err := t.ledger.DeleteCursor(ctx, name)
	if errors.Is(err, managedledger.ErrCursorNotFound) && sub != nil {
		return nil
	}
	return err
}

// failoverActive picks the active consumer of a Failover subscription as
// Pulsar's AbstractDispatcherSingleActiveConsumer does: consumers sorted by
// (priority level, name); only the highest-priority level competes; for
// partition i the active one is i % n of them, for a non-partitioned topic
// the owner of the topic name's hash on a ring of 100 points per consumer
// (Murmur3 of name+j).
func failoverActive(consumers []*consumer, topic string, partition int) *consumer {
	sorted := append([]*consumer(nil), consumers...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].priority != sorted[j].priority {
			return sorted[i].priority < sorted[j].priority
		}
		return sorted[i].name < sorted[j].name
	})
	n := len(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i].priority != sorted[0].priority {
			n = i
			break
		}
	}
	if partition >= 0 {
		return sorted[partition%n]
	}
	type point struct {
		hash int32
		idx  int
	}
	ring := map[int32]int{}
	for i := 0; i < n; i++ {
		for j := 0; j < 100; j++ {
			ring[int32(keyshared.Murmur3([]byte(sorted[i].name+strconv.Itoa(j)))&0x7fffffff)] = i
		}
	}
	pts := make([]point, 0, len(ring))
	for h, i := range ring {
		pts = append(pts, point{h, i})
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].hash < pts[j].hash })
	th := int32(keyshared.Murmur3([]byte(topic)) & 0x7fffffff)
	k := sort.Search(len(pts), func(i int) bool { return pts[i].hash >= th })
	if k == len(pts) {
		k = 0
	}
	return sorted[pts[k].idx]
}
