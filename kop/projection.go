package kop

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/kafka/kstore"
	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

// Prefix is how Kafka clients address a Pulsar topic: its full name,
// "persistent://tenant/namespace/topic", is the Kafka topic name.
const Prefix = "persistent://"

// Config configures a Projection.
type Config struct {
	// Ledgers is the Pulsar storage boundary. Share the Pulsar broker's
	// factory: both then hold one append session per stream.
	Ledgers *managedledger.Factory
	// MaxMessageSize is the Pulsar broker's largest entry (default 5 MiB):
	// a Kafka batch whose Pulsar entry would be larger is refused, since
	// no Pulsar consumer could receive it.
	MaxMessageSize int
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock for publish times (default time.Now).
	Now func() time.Time
}

// Projection is the KoP projection: it implements kstore.Projection over
// the managed ledger.
type Projection struct {
	cfg Config
	ml  *managedledger.Factory
	log *slog.Logger

	mu     sync.Mutex
	topics map[string]*projTopic // by Kafka name
}

// recheck is how long an opened topic's partition count is trusted before
// it is read again (Pulsar admins grow partitioned topics underneath).
const recheck = 2 * time.Second

type projTopic struct {
	name    managedledger.TopicName
	parts   []*partition
	id      kstore.TopicID
	checked time.Time
}

// New returns a projection over cfg.Ledgers.
func New(cfg Config) (*Projection, error) {
	if cfg.Ledgers == nil {
		return nil, errors.New("kop: Config.Ledgers is required")
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = wire.DefaultMaxMessageSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Projection{cfg: cfg, ml: cfg.Ledgers, log: cfg.Logger.With("component", "kop"), topics: map[string]*projTopic{}}, nil
}

// Claims implements kstore.Projection.
func (p *Projection) Claims(topic string) bool { return strings.HasPrefix(topic, Prefix) }

func parseName(topic string) (managedledger.TopicName, error) {
	n, err := managedledger.ParseTopicName(topic)
	if err != nil || !strings.HasPrefix(topic, Prefix) {
		return managedledger.TopicName{}, fmt.Errorf("%w: %q is not persistent://tenant/namespace/topic (%v)", kstore.ErrInvalidTopic, topic, err)
	}
	return n, nil
}

// OpenTopic implements kstore.Projection. A partitioned Pulsar topic of N
// partitions is a Kafka topic of N partitions (partition i is
// "<topic>-partition-i"); a non-partitioned one is a Kafka topic of one
// partition.
func (p *Projection) OpenTopic(ctx context.Context, topic string, create bool) (kstore.ProjectedTopic, error) {
	t, err := p.open(ctx, topic, create)
	if err != nil {
		return kstore.ProjectedTopic{}, err
	}
	out := kstore.ProjectedTopic{ID: t.id, MaxMessageBytes: p.cfg.MaxMessageSize}
	for _, pp := range t.parts {
		out.Partitions = append(out.Partitions, pp)
	}
	return out, nil
}

func (p *Projection) open(ctx context.Context, topic string, create bool) (*projTopic, error) {
	p.mu.Lock()
	cached := p.topics[topic]
	p.mu.Unlock()
	if cached != nil && time.Since(cached.checked) < recheck {
		return cached, nil
	}
	tn, err := parseName(topic)
	if err != nil {
		return nil, err
	}
	n, err := p.ml.PartitionCount(ctx, tn)
	if err != nil {
		return nil, mapErr(err)
	}
	var names []managedledger.TopicName
	if n == 0 {
		names = []managedledger.TopicName{tn}
	} else {
		for i := 0; i < n; i++ {
			names = append(names, tn.Partition(i))
		}
	}
	t := &projTopic{name: tn, checked: time.Now()}
	idSrc := "nereus-kop\x00" + tn.String()
	for i, pn := range names {
		var old *partition
		if cached != nil && i < len(cached.parts) && cached.parts[i].name == pn {
			old = cached.parts[i]
		}
		// A partition of an existing partitioned topic is created on first
		// use, as the Pulsar broker does.
		l, err := p.ml.Open(ctx, pn, create || n > 0)
		if err != nil {
			return nil, mapErr(err)
		}
		if old != nil && old.l.LedgerID() == l.LedgerID() {
			t.parts = append(t.parts, old)
		} else {
			pp, err := p.newPartition(ctx, topic, int32(i), pn, l)
			if err != nil {
				return nil, err
			}
			t.parts = append(t.parts, pp)
		}
		idSrc += "\x00" + strconv.FormatInt(l.LedgerID(), 10)
	}
	sum := sha256.Sum256([]byte(idSrc))
	copy(t.id[:], sum[:16])
	t.id[6] = t.id[6]&0x0f | 0x40
	t.id[8] = t.id[8]&0x3f | 0x80
	p.mu.Lock()
	if cached != nil {
		keep := map[*partition]bool{}
		for _, pp := range t.parts {
			keep[pp] = true
		}
		for _, pp := range cached.parts {
			if !keep[pp] {
				go pp.close()
			}
		}
	}
	p.topics[topic] = t
	p.mu.Unlock()
	return t, nil
}

// forget drops a cached topic whose stream went away (deleted by a Pulsar
// admin); the next use opens it again.
func (p *Projection) forget(topic string) {
	p.mu.Lock()
	t := p.topics[topic]
	delete(p.topics, topic)
	p.mu.Unlock()
	if t != nil {
		for _, pp := range t.parts {
			go pp.close()
		}
	}
}

// Close releases the append sessions the projection holds.
func (p *Projection) Close(ctx context.Context) error {
	p.mu.Lock()
	topics := p.topics
	p.topics = map[string]*projTopic{}
	p.mu.Unlock()
	for _, t := range topics {
		for _, pp := range t.parts {
			pp.closeCtx(ctx)
		}
	}
	return nil
}

// CreateTopic implements kstore.Projection: one partition makes a
// non-partitioned Pulsar topic (what Pulsar auto-creates), more a
// partitioned topic.
func (p *Projection) CreateTopic(ctx context.Context, topic string, n int32, validateOnly bool) error {
	tn, err := parseName(topic)
	if err != nil {
		return err
	}
	if tn.PartitionIndex() >= 0 {
		return fmt.Errorf("%w: %q names a partition", kstore.ErrInvalidTopic, topic)
	}
	if n < 1 || n > 10000 {
		return fmt.Errorf("%w: %d", kstore.ErrInvalidPartitions, n)
	}
	if _, err := p.ml.GetNamespace(ctx, tn.NamespaceName()); err != nil {
		return mapErr(err)
	}
	if parts, err := p.ml.PartitionCount(ctx, tn); err != nil {
		return mapErr(err)
	} else if parts > 0 {
		return fmt.Errorf("%w: %q", kstore.ErrTopicExists, topic)
	}
	if ok, err := p.ml.Exists(ctx, tn); err != nil {
		return mapErr(err)
	} else if ok {
		return fmt.Errorf("%w: %q", kstore.ErrTopicExists, topic)
	}
	if validateOnly {
		return nil
	}
	if n == 1 {
		_, err := p.ml.Open(ctx, tn, true)
		return mapErr(err)
	}
	if err := p.ml.CreatePartitioned(ctx, tn, int(n)); err != nil {
		return mapErr(err)
	}
	_, err = p.open(ctx, topic, false)
	return err
}

// CreatePartitions implements kstore.Projection (partitioned topics grow;
// a non-partitioned Pulsar topic cannot become partitioned).
func (p *Projection) CreatePartitions(ctx context.Context, topic string, n int32, validateOnly bool) error {
	tn, err := parseName(topic)
	if err != nil {
		return err
	}
	cur, err := p.ml.PartitionCount(ctx, tn)
	if err != nil {
		return mapErr(err)
	}
	if cur == 0 {
		if ok, err := p.ml.Exists(ctx, tn); err != nil {
			return mapErr(err)
		} else if !ok {
			return fmt.Errorf("%w: %q", kstore.ErrUnknownTopic, topic)
		}
		return fmt.Errorf("%w: %q is a non-partitioned Pulsar topic; it cannot gain partitions", kstore.ErrInvalidPartitions, topic)
	}
	if int(n) <= cur {
		return fmt.Errorf("%w: %q has %d partitions, requested %d (can only grow)", kstore.ErrInvalidPartitions, topic, cur, n)
	}
	if validateOnly {
		return nil
	}
	if err := p.ml.UpdatePartitions(ctx, tn, int(n)); err != nil {
		return mapErr(err)
	}
	p.forget(topic)
	return nil
}

// DeleteTopic implements kstore.Projection. Pulsar topics are deleted by
// Pulsar's admin API, which first closes the topic's producers and
// consumers on the broker.
func (p *Projection) DeleteTopic(ctx context.Context, topic string) error {
	return fmt.Errorf("%w: delete Pulsar topics with pulsar-admin (DELETE /admin/v2/persistent/...)", kstore.ErrNotOnProjected)
}

func (p *Projection) partition(ctx context.Context, topic string, index int32) (*partition, error) {
	t, err := p.open(ctx, topic, false)
	if err != nil {
		return nil, err
	}
	if index < 0 || int(index) >= len(t.parts) {
		return nil, fmt.Errorf("%w: %s/%d", kstore.ErrUnknownTopic, topic, index)
	}
	return t.parts[index], nil
}

// CommitOffset implements kstore.Projection: the group's offset is the
// position of the Pulsar subscription named like the group (created at the
// committed offset if missing). A commit moves it there, forward or back,
// as a Kafka commit does; Pulsar's stats then show the group's backlog.
func (p *Projection) CommitOffset(ctx context.Context, group, topic string, index int32, offset int64) error {
	pp, err := p.partition(ctx, topic, index)
	if err != nil {
		return err
	}
	return pp.commit(ctx, group, offset)
}

// FetchOffset implements kstore.Projection.
func (p *Projection) FetchOffset(ctx context.Context, group, topic string, index int32) (int64, bool, error) {
	pp, err := p.partition(ctx, topic, index)
	if err != nil {
		return 0, false, err
	}
	off, ok, err := pp.l.CursorPosition(ctx, group)
	return off, ok, mapErr(err)
}

// DeleteOffset implements kstore.Projection: the group's subscription is
// deleted.
func (p *Projection) DeleteOffset(ctx context.Context, group, topic string, index int32) error {
	pp, err := p.partition(ctx, topic, index)
	if err != nil {
		return err
	}
	if err := pp.l.DeleteCursor(ctx, group); err != nil && !errors.Is(err, managedledger.ErrCursorNotFound) {
		return err
	}
	return nil
}

// mapErr turns managed-ledger errors into the store's vocabulary.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, managedledger.ErrTopicNotFound), errors.Is(err, managedledger.ErrNamespaceNotFound):
		return fmt.Errorf("%w: %v", kstore.ErrUnknownTopic, err)
	case errors.Is(err, managedledger.ErrTopicExists):
		return fmt.Errorf("%w: %v", kstore.ErrTopicExists, err)
	case errors.Is(err, managedledger.ErrInvalidName):
		return fmt.Errorf("%w: %v", kstore.ErrInvalidTopic, err)
	}
	return err
}
