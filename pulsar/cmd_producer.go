// PRODUCER, CLOSE_PRODUCER.
//
// Behaviour:
//   - PRODUCER loads (auto-creating when allowed) the topic, makes this
//     broker the topic stream's writer — acquiring the core's append session
//     with this broker incarnation's authority epoch, which fences a stale
//     owner — and answers PRODUCER_SUCCESS{producer_name, last_sequence_id,
//     schema_version}.
//   - Producer names: a client-provided name is kept; otherwise the broker
//     generates "<cluster>-<incarnation>-<n>", unique across restarts.
//     Clients reuse the generated name when they reconnect.
//   - last_sequence_id is the highest sequence id persisted for that
//     producer name when deduplication is on (rebuilt after a restart from
//     a snapshot plus a replay of later entries), else -1.
//   - Access modes: Shared; Exclusive and WaitForExclusive fail with
//     ProducerBusy while another producer is attached (WaitForExclusive is
//     not queued); ExclusiveWithFencing closes the other producers.
//   - A producer name already attached on another connection is
//     ProducerBusy; the client retries and succeeds once the broker has seen
//     the old connection go.
//   - A schema in PRODUCER is stored as a new schema version if it differs
//     from every stored one (no compatibility check unless EnforceSchema).
//   - CLOSE_PRODUCER answers SUCCESS after detaching the producer; appends
//     already issued still complete.
//
// Differences from the real broker:
//   - No producer epochs/topic epochs beyond echoing topic_epoch 0, no
//     encryption-required policy, no publish-rate or backlog quotas.

package pulsar

import (
	"context"
	"errors"
	"sync"

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
	id        uint64
	name      string
	c         *conn
	t         *topic
	exclusive bool

	pending  chan *pendingSend
	stopped  chan struct{}
	stopOnce sync.Once
}

type pendingSend struct {
	ticket       appendTicket
	seq, highest uint64
	lastSeq      int64
	numMsgs      int
	bytes        int
	fut          *stream.AppendFuture
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
	p := &producer{id: producerID, name: pname, c: c, t: t,
		pending: make(chan *pendingSend, 4096), stopped: make(chan struct{})}
	mode := cmd.GetProducerAccessMode()
	var fenced []*producer
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return nil, errTopicClosed
	case t.producers[pname] != nil:
		t.mu.Unlock()
		return nil, newError(pb.ServerError_ProducerBusy, "producer with name '"+pname+"' is already connected to topic")
	case t.exclusive != "" && mode != pb.ProducerAccessMode_ExclusiveWithFencing:
		t.mu.Unlock()
		return nil, newError(pb.ServerError_ProducerBusy, "topic has an exclusive producer: "+t.exclusive)
	case (mode == pb.ProducerAccessMode_Exclusive || mode == pb.ProducerAccessMode_WaitForExclusive) && len(t.producers) > 0:
		t.mu.Unlock()
		return nil, newError(pb.ServerError_ProducerBusy, "topic has producers; exclusive access refused")
	case mode == pb.ProducerAccessMode_ExclusiveWithFencing:
		for _, old := range t.producers {
			fenced = append(fenced, old)
		}
	}
	if mode != pb.ProducerAccessMode_Shared {
		p.exclusive = true
		t.exclusive = pname
	}
	t.producers[pname] = p
	t.mu.Unlock()
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
	go p.receiptLoop()
	c.log.Debug("pulsar producer attached", "topic", name.String(), "producer", pname)
	return &pb.CommandProducerSuccess{
		RequestId:      proto.Uint64(reqID),
		ProducerName:   proto.String(pname),
		LastSequenceId: proto.Int64(t.lastSequence(pname)),
		SchemaVersion:  schemaVersion,
		TopicEpoch:     proto.Uint64(0),
		ProducerReady:  proto.Bool(true),
	}, nil
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

// detach removes the producer from its topic and stops its receipt loop.
func (p *producer) detach() {
	p.stopOnce.Do(func() { close(p.stopped) })
	t := p.t
	t.mu.Lock()
	if t.producers[p.name] == p {
		delete(t.producers, p.name)
	}
	if t.exclusive == p.name {
		t.exclusive = ""
	}
	t.mu.Unlock()
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
