package kop

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/kafka/kstore"
	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/stream"
)

// partition is one Kafka partition of a projected topic: one Pulsar topic
// (or partition) and its ledger.
type partition struct {
	p      *Projection
	topic  string // the Kafka topic name
	index  int32
	name   managedledger.TopicName
	l      *managedledger.Ledger
	format string // the stream's entry format
	// mapping is the payload mapping version for format; 0 means none, and
	// every read and write is refused.
	mapping int
	closed  atomic.Bool
}

func (p *Projection) newPartition(ctx context.Context, topic string, index int32, name managedledger.TopicName, l *managedledger.Ledger) (*partition, error) {
	info, err := l.Info(ctx)
	if err != nil {
		return nil, err
	}
	pp := &partition{p: p, topic: topic, index: index, name: name, l: l, format: info.Attributes[managedledger.AttrEntryFormat]}
	if l.CountsMessages() {
		pp.mapping = mappings[pp.format]
	}
	return pp, nil
}

func (pp *partition) close() { pp.closeCtx(context.Background()) }

func (pp *partition) closeCtx(ctx context.Context) {
	if pp.closed.CompareAndSwap(false, true) {
		_ = pp.l.Close(ctx)
	}
}

func (pp *partition) checkMapping() error {
	if pp.mapping != 0 {
		return nil
	}
	format := pp.format
	if format == "" {
		format = "pulsar entries counted one offset per entry (a topic created before the message-counted format)"
	}
	return fmt.Errorf("%w: %s stores %s; Kafka offsets need one offset per message, so it is not served to Kafka clients",
		kstore.ErrUnknownPayloadFormat, pp.name, format)
}

// failed handles an error from the ledger: a deleted stream drops the
// cached topic, so the next request sees the topic as it is now.
func (pp *partition) failed(err error) error {
	if errors.Is(err, stream.ErrStreamNotFound) || errors.Is(err, managedledger.ErrTopicNotFound) {
		pp.p.forget(pp.topic)
		return fmt.Errorf("%w: %v", kstore.ErrUnknownTopic, err)
	}
	return err
}

func (pp *partition) writer(ctx context.Context) error {
	if err := pp.l.AcquireWriter(ctx); err != nil {
		if errors.Is(err, stream.ErrSessionBusy) || errors.Is(err, stream.ErrFenced) ||
			errors.Is(err, cluster.ErrNotOwner) || errors.Is(err, cluster.ErrHandoffPending) {
			return fmt.Errorf("%w: %w", kstore.ErrNotLeader, err)
		}
		return pp.failed(err)
	}
	return nil
}

// StreamName implements kstore.ProjectedPartition: the Pulsar topic's
// stream, whose owner in a cluster leads the Kafka partition.
func (pp *partition) StreamName() string { return pp.l.StreamName() }

// LeaderEpoch implements kstore.ProjectedPartition: the epoch of the
// stream's current append session (shared with the Pulsar broker of the
// owning process), read from its head without taking one.
func (pp *partition) LeaderEpoch(ctx context.Context) (int32, error) {
	info, err := pp.l.Info(ctx)
	if err != nil {
		return -1, pp.failed(err)
	}
	return int32(min(info.Session.Epoch, math.MaxInt32)), nil
}

// AppendAsync implements kstore.ProjectedPartition: the batch becomes one
// Pulsar entry of as many messages (mapping 1).
func (pp *partition) AppendAsync(ctx context.Context, req stream.AppendRequest) (*stream.AppendFuture, error) {
	if err := pp.checkMapping(); err != nil {
		return nil, err
	}
	if len(req.Entries) != 1 {
		return nil, fmt.Errorf("kop: one batch per append, got %d", len(req.Entries))
	}
	h, recs, err := parseKafkaBatch(req.Entries[0].Payload)
	if err != nil {
		return nil, err
	}
	now := pp.p.cfg.Now().UnixMilli()
	payload, err := pulsarEntryFromKafka(h, recs, now)
	if err != nil {
		return nil, err
	}
	if max := pp.p.cfg.MaxMessageSize; len(payload) > max {
		return nil, fmt.Errorf("%w: the batch is %d bytes as a Pulsar entry, above the broker's max message size %d",
			kstore.ErrRecordTooLarge, len(payload), max)
	}
	var seq *stream.ProducerSequence
	if req.Sequence != nil {
		s := *req.Sequence
		s.Producer = "kafka/" + s.Producer // never collides with a Pulsar producer name's dedup state
		seq = &s
	}
	if err := pp.writer(ctx); err != nil {
		return nil, err
	}
	inner := pp.l.AppendAsync(stream.Entry{Payload: payload, RecordCount: uint32(len(recs)), Timestamp: now}, seq)
	out := stream.NewAppendFuture()
	go func() {
		res, err := inner.Wait(context.Background())
		switch {
		case errors.Is(err, stream.ErrFenced):
			pp.l.DropWriter()
		case errors.Is(err, managedledger.ErrNoWriter):
			err = fmt.Errorf("%w: %v", kstore.ErrNotLeader, err)
		case errors.Is(err, stream.ErrStreamSealed):
			err = fmt.Errorf("%w: %s was terminated (Pulsar topic termination): it takes no more messages", kstore.ErrNotOnProjected, pp.name)
		case err != nil:
			err = pp.failed(err)
		}
		out.Resolve(res, err)
	}()
	return out, nil
}

// Read implements kstore.ProjectedPartition: every entry read is rendered
// as one Kafka batch with the entry's offset as base offset.
func (pp *partition) Read(ctx context.Context, from int64, opts stream.ReadOptions) (stream.ReadResult, error) {
	if err := pp.checkMapping(); err != nil {
		return stream.ReadResult{}, err
	}
	res, err := pp.l.ReadRaw(ctx, from, opts)
	if err != nil {
		return res, pp.failed(err)
	}
	for i := range res.Entries {
		e := &res.Entries[i]
		n := int64(max(e.RecordCount, 1))
		recs, err := kafkaRecordsFromPulsar(e.Payload, n)
		if err != nil {
			// Never serve bytes that do not map (or fail their checksum);
			// an empty batch lets consumers move past the offsets, and the
			// entry stays in the stream for Pulsar tools to inspect.
			pp.p.log.Error("kop: entry not served to Kafka clients", "topic", pp.name.String(), "offset", e.Offset, "err", err)
			recs = nil
		}
		e.Payload = buildKafkaBatch(e.Offset, n, recs)
	}
	return res, nil
}

// Bounds implements kstore.ProjectedPartition.
func (pp *partition) Bounds(ctx context.Context) (int64, int64, error) {
	start, end, err := pp.l.Bounds(ctx)
	return start, end, pp.failed(err)
}

// Notify implements kstore.ProjectedPartition.
func (pp *partition) Notify(ctx context.Context) (int64, <-chan struct{}, error) {
	end, ch, err := pp.l.Notify(ctx)
	return end, ch, pp.failed(err)
}

// OffsetForTimestamp implements kstore.ProjectedPartition: entries are
// indexed by publish time (for Kafka-produced entries, the append time).
func (pp *partition) OffsetForTimestamp(ctx context.Context, ts int64) (int64, error) {
	off, err := pp.l.OffsetForTimestamp(ctx, ts)
	return off, pp.failed(err)
}

// commit moves the group's subscription so that offset is the next
// message it consumes.
func (pp *partition) commit(ctx context.Context, group string, offset int64) error {
	if err := pp.checkMapping(); err != nil {
		return err
	}
	_, end, err := pp.l.Bounds(ctx)
	if err != nil {
		return pp.failed(err)
	}
	offset = min(max(offset, 0), end)
	c, created, err := pp.l.OpenCursor(ctx, group, func() (int64, error) { return offset, nil })
	if err != nil {
		return pp.failed(err)
	}
	if created {
		return nil
	}
	if snap := c.Snapshot(); snap.AckedBelow == offset && len(snap.Deleted) == 0 && len(snap.BatchAcks) == 0 {
		return nil // unchanged (auto-commit repeats itself)
	}
	c.Reset(offset)
	return c.Flush(ctx)
}
