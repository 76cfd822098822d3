// PRODUCER, CLOSE_PRODUCER.
//
// Behaviour:
//   - PRODUCER loads (auto-creating when allowed) the topic, makes this
//     broker the topic stream's writer — taking the core's append session
//     through the cluster node (only the topic's owner may; a dead previous
//     owner is pre-empted, a live one hands over) — and answers PRODUCER_SUCCESS{producer_name, last_sequence_id,
//     schema_version}.
//   - Producer names: a client-provided name is kept; otherwise the broker
//     generates "<cluster>-<incarnation>-<n>", unique across restarts.
//     Clients reuse the generated name when they reconnect.
//   - last_sequence_id is the highest sequence id persisted for that
//     producer name when deduplication is on (rebuilt after a restart from
//     a snapshot plus a replay of later entries), else -1.
//   - Access modes as Apache Pulsar (AbstractTopic.incrementTopicEpochIfNeeded):
//     Shared is ProducerBusy while an exclusive producer holds the topic or
//     one waits; Exclusive is ProducerFenced while any producer is attached
//     or waiting; ExclusiveWithFencing closes every attached and waiting
//     producer and takes the topic; WaitForExclusive is answered
//     PRODUCER_SUCCESS{producer_ready=false} while the topic is held and a
//     second, ready PRODUCER_SUCCESS when every producer before it has left.
//     Every exclusive acquisition bumps topic_epoch (kept in memory: a
//     restarted broker starts again at 0).
//   - A producer name already attached on another connection is
//     ProducerBusy; the client retries and succeeds once the broker has seen
//     the old connection go.
//   - A schema in PRODUCER is stored as a new schema version if it differs
//     from every stored one (no compatibility check unless EnforceSchema).
//   - CLOSE_PRODUCER answers SUCCESS after detaching the producer; appends
//     already issued still complete.
//
// Differences from the real broker:
//   - The topic epoch is not persisted and the client's topic_epoch is not
//     checked; a waiting producer fenced by ExclusiveWithFencing is closed
//     (it reconnects and queues again) rather than failed; no
//     encryption-required policy, no publish-rate or backlog quotas.

package pulsar

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
	"github.com/nereusstream/nereus-go/stream"
)

func init() {
	register(pb.BaseCommand_PRODUCER, handleProducer)
	register(pb.BaseCommand_CLOSE_PRODUCER, handleCloseProducer)
}

// producer is one attached producer.
type producer struct {
	id       uint64
	name     string
	c        *conn
	t        *topic
	mode     pb.ProducerAccessMode
	since    time.Time
	metadata map[string]string

	pending chan *pendingSend
	stopped chan struct{}
	// lastSeq is the LastSeq of the producer's previous deduplicated append
	// (valid when sentSeq), under its topic's appendMu: the next append is
	// admitted only after it (stream.ProducerSequence.After).
	lastSeq   int64
	sentSeq   bool
	stopOnce  sync.Once
	startOnce sync.Once
}

type pendingSend struct {
	ticket       appendTicket
	seq, highest uint64
	lastSeq      int64
	numMsgs      int
	bytes        int
	fut          *stream.AppendFuture
	// recvAt: the SEND frame was read; issuedAt: its append was handed to
	// the stream (publish_metrics.go).
	recvAt, issuedAt time.Time
}

func handleProducer(c *conn, f wire.Frame) error {
	cmd := f.Cmd.GetProducer()
	reqID, producerID := cmd.GetRequestId(), cmd.GetProducerId()
	c.async(func(ctx context.Context) {
		resp, err := createProducer(ctx, c, cmd)
		if err != nil {
			c.sendErr(reqID, err)
			return
		}
		c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: resp})
		_ = producerID
	})
	return nil
}

func createProducer(ctx context.Context, c *conn, cmd *pb.CommandProducer) (*pb.CommandProducerSuccess, error) {
	reqID, producerID := cmd.GetRequestId(), cmd.GetProducerId()
	name, err := managedledger.ParseTopicName(cmd.GetTopic())
	if err != nil {
		return nil, err
	}
	if err := c.authorize(ctx, name, actionProduce); err != nil {
		return nil, err
	}
	// A retried PRODUCER for a producer id that is already attached.
	if p := c.producer(producerID); p != nil {
		if p.t.name == name {
			return &pb.CommandProducerSuccess{RequestId: proto.Uint64(reqID), ProducerName: proto.String(p.name),
				LastSequenceId: proto.Int64(p.t.lastSequence(p.name)), SchemaVersion: []byte{}, TopicEpoch: proto.Uint64(0), ProducerReady: proto.Bool(true)}, nil
		}
		return nil, newError(pb.ServerError_ProducerBusy, "producer id already in use on this connection")
	}
	t, err := c.s.getTopic(ctx, name, c.s.autoCreate())
	if err != nil {
		return nil, err
	}
	if err := t.prepareWriter(ctx); err != nil {
		if isFenced(err) || errors.Is(err, stream.ErrSessionBusy) {
			return nil, newError(pb.ServerError_ServiceNotReady, err.Error())
		}
		return nil, err
	}
	if err := t.checkProducerQuota(ctx); err != nil {
		return nil, err
	}
	if sub := cmd.GetInitialSubscriptionName(); sub != "" {
		// The producer's initial subscription (dead-letter and retry
		// producers set it), created at the earliest position as Pulsar
		// does, so a consumer subscribing later finds what was produced.
		start, _, err := t.ledger.Bounds(ctx)
		if err != nil {
			return nil, err
		}
		if _, _, err := t.ledger.OpenCursor(ctx, sub, func() (int64, error) { return start, nil }); err != nil {
			return nil, err
		}
	}
	var schemaVersion []byte
	if sc := cmd.GetSchema(); sc != nil {
		schemaVersion, err = t.getOrCreateSchema(ctx, sc)
		if err != nil {
			return nil, err
		}
	}
	if schemaVersion == nil {
		// Java clients read schema_version unconditionally; Pulsar sends
		// an empty version for schema-less producers.
		schemaVersion = []byte{}
	}
	pname := cmd.GetProducerName()
	if pname == "" {
		pname = c.s.nextProducerName()
	}
	p := &producer{id: producerID, name: pname, c: c, t: t, mode: cmd.GetProducerAccessMode(), since: time.Now(), metadata: kvMap(cmd.GetMetadata()),
		pending: make(chan *pendingSend, 4096), stopped: make(chan struct{})}
	success := func(ready bool) *pb.CommandProducerSuccess {
		t.mu.Lock()
		epoch := t.epoch
		t.mu.Unlock()
		return &pb.CommandProducerSuccess{
			RequestId:      proto.Uint64(reqID),
			ProducerName:   proto.String(pname),
			LastSequenceId: proto.Int64(t.lastSequence(pname)),
			SchemaVersion:  schemaVersion,
			TopicEpoch:     proto.Uint64(epoch),
			ProducerReady:  proto.Bool(ready),
		}
	}
	admitted, fenced, err := t.admitProducer(p, func() {
		// Promoted from the WaitForExclusive queue: the client gets its
		// second PRODUCER_SUCCESS, now ready.
		if p.attach() {
			c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: success(true)})
		}
	})
	if err != nil {
		return nil, err
	}
	for _, old := range fenced {
		old.closeByBroker()
	}
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		p.detach()
		return nil, errors.New("connection closed")
	}
	c.producers[producerID] = p
	c.mu.Unlock()
	if !admitted {
		c.log.Debug("pulsar producer queued for exclusive access", "topic", name.String(), "producer", pname)
		return success(false), nil
	}
	p.attach()
	c.log.Debug("pulsar producer attached", "topic", name.String(), "producer", pname)
	return success(true), nil
}

// waitingProducer is a WaitForExclusive producer queued for access.
type waitingProducer struct {
	p       *producer
	promote func()
}

// admitProducer applies Pulsar's producer access modes
// (AbstractTopic.incrementTopicEpochIfNeeded):
//   - Shared: refused (ProducerBusy) while an exclusive producer holds the
//     topic or one is queued;
//   - Exclusive: refused (ProducerFenced) while any producer is attached or
//     queued;
//   - ExclusiveWithFencing: fences every attached and queued producer and
//     takes the topic;
//   - WaitForExclusive: takes the topic if it has no producer, else queues
//     (admitted false) until every producer before it has left.
//
// A duplicate producer name is ProducerBusy in every mode. Each exclusive
// acquisition bumps the topic epoch.
func (t *topic) admitProducer(p *producer, promote func()) (admitted bool, fenced []*producer, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false, nil, errTopicClosed
	}
	if t.producers[p.name] != nil {
		return false, nil, newError(pb.ServerError_ProducerBusy, "producer with name '"+p.name+"' is already connected to topic")
	}
	for _, w := range t.waiting {
		if w.p.name == p.name {
			return false, nil, newError(pb.ServerError_ProducerBusy, "producer with name '"+p.name+"' is already waiting for exclusive access")
		}
	}
	switch p.mode {
	case pb.ProducerAccessMode_Shared:
		if t.exclusive != "" || len(t.waiting) > 0 {
			return false, nil, newError(pb.ServerError_ProducerBusy, "topic has an existing exclusive producer: "+t.exclusive)
		}
	case pb.ProducerAccessMode_Exclusive:
		if t.exclusive != "" || len(t.waiting) > 0 {
			return false, nil, newError(pb.ServerError_ProducerFenced, "topic has an existing exclusive producer: "+t.exclusive)
		}
		if len(t.producers) > 0 {
			return false, nil, newError(pb.ServerError_ProducerFenced, "topic has existing shared producers")
		}
	case pb.ProducerAccessMode_ExclusiveWithFencing:
		for _, w := range t.waiting {
			fenced = append(fenced, w.p)
		}
		t.waiting = nil
		for _, old := range t.producers {
			fenced = append(fenced, old)
			delete(t.producers, old.name)
		}
		t.exclusive = ""
	case pb.ProducerAccessMode_WaitForExclusive:
		if t.exclusive != "" || len(t.producers) > 0 {
			t.waiting = append(t.waiting, &waitingProducer{p: p, promote: promote})
			return false, nil, nil
		}
	default:
		return false, nil, newError(pb.ServerError_NotAllowedError, "unknown producer access mode")
	}
	if p.mode != pb.ProducerAccessMode_Shared {
		t.exclusive = p.name
		t.epoch++
	}
	t.producers[p.name] = p
	return true, fenced, nil
}

// promoteWaitingLocked hands the topic to the first queued WaitForExclusive
// producer once no producer is attached. Called with t.mu held; the
// returned function (nil if none) must run after unlocking.
func (t *topic) promoteWaitingLocked() func() {
	if len(t.producers) > 0 || t.exclusive != "" || len(t.waiting) == 0 || t.closed {
		return nil
	}
	w := t.waiting[0]
	t.waiting = t.waiting[1:]
	t.exclusive = w.p.name
	t.epoch++
	t.producers[w.p.name] = w.p
	return w.promote
}

func handleCloseProducer(c *conn, f wire.Frame) error {
	cmd := f.Cmd.GetCloseProducer()
	c.mu.Lock()
	p := c.producers[cmd.GetProducerId()]
	delete(c.producers, cmd.GetProducerId())
	c.mu.Unlock()
	if p != nil {
		p.detach()
	}
	c.sendSuccess(cmd.GetRequestId())
	return nil
}

// attach starts the receipt loop once the producer may send; false if it
// was detached first.
func (p *producer) attach() bool {
	select {
	case <-p.stopped:
		return false
	default:
	}
	p.startOnce.Do(func() { go p.receiptLoop() })
	return true
}

// detach removes the producer (or its place in the WaitForExclusive queue)
// from its topic, stops its receipt loop and promotes the next waiting
// producer.
func (p *producer) detach() {
	p.stopOnce.Do(func() { close(p.stopped) })
	t := p.t
	t.mu.Lock()
	if t.producers[p.name] == p {
		delete(t.producers, p.name)
		if t.exclusive == p.name {
			t.exclusive = ""
		}
	}
	for i, w := range t.waiting {
		if w.p == p {
			t.waiting = append(t.waiting[:i], t.waiting[i+1:]...)
			break
		}
	}
	promote := t.promoteWaitingLocked()
	t.mu.Unlock()
	if promote != nil {
		promote()
	}
}

// closeByBroker tells the client its producer is closed (it will look the
// topic up again and re-create it) and detaches it.
func (p *producer) closeByBroker() {
	p.c.mu.Lock()
	if p.c.producers[p.id] == p {
		delete(p.c.producers, p.id)
	}
	p.c.mu.Unlock()
	p.detach()
	p.c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: &pb.CommandCloseProducer{
		ProducerId: proto.Uint64(p.id), RequestId: proto.Uint64(0)}})
}

// kvMap turns protocol key/value pairs (producer and consumer metadata)
// into a map for stats.
func kvMap(kvs []*pb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}
