package kstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nereusstream/nereus-go/stream"
)

// Projection serves Kafka topics whose names belong to another storage
// boundary — KoP: Pulsar topics ("persistent://tenant/ns/topic") reached
// through the managed ledger (package kop). The store routes every call
// naming such a topic to it, so the Kafka handlers treat projected and
// native topics alike: batches go in and come out as Kafka RecordBatches,
// offsets are the projected stream's offsets, and a group's committed
// offsets live wherever the projection keeps them (for KoP, a Pulsar
// subscription per group). Only an index of which projected partitions a
// group committed to stays here (see CommitOffsets), so that a fetch of
// all of a group's offsets finds them.
type Projection interface {
	// Claims reports whether topic is the projection's. It is a pure test
	// on the name; native Kafka names never match (they cannot contain
	// ':' or '/').
	Claims(topic string) bool
	// OpenTopic resolves a claimed topic. create makes a missing one (the
	// Metadata auto-creation path); a missing topic otherwise is
	// ErrUnknownTopic.
	OpenTopic(ctx context.Context, topic string, create bool) (ProjectedTopic, error)
	// CreateTopic makes a topic with n partitions (CreateTopics).
	CreateTopic(ctx context.Context, topic string, n int32, validateOnly bool) error
	// CreatePartitions grows a topic to n partitions.
	CreatePartitions(ctx context.Context, topic string, n int32, validateOnly bool) error
	// DeleteTopic deletes the topic.
	DeleteTopic(ctx context.Context, topic string) error
	// CommitOffset stores a group's committed offset (the next offset the
	// group will consume) on one partition.
	CommitOffset(ctx context.Context, group, topic string, partition int32, offset int64) error
	// FetchOffset returns a group's committed offset; ok is false when the
	// group has none there.
	FetchOffset(ctx context.Context, group, topic string, partition int32) (offset int64, ok bool, err error)
	// DeleteOffset forgets a group's offset on a partition.
	DeleteOffset(ctx context.Context, group, topic string, partition int32) error
}

// ProjectedTopic is a projected topic as the Kafka side sees it.
type ProjectedTopic struct {
	// ID is stable for the topic's lifetime and changes when it is
	// deleted and created again.
	ID         TopicID
	Partitions []ProjectedPartition
	// MaxMessageBytes is the largest batch the projection accepts.
	MaxMessageBytes int
}

// ProjectedPartition is one partition of a projected topic. Its offsets,
// bounds and notifications are those of the stream it projects; its
// payloads are Kafka RecordBatches in both directions.
type ProjectedPartition interface {
	// StreamName is the name of the projected stream: the partition's
	// ownership key in a cluster (its leader is the stream's owner).
	StreamName() string
	// LeaderEpoch is the partition leader epoch clients see (the epoch of
	// the stream's current append session, read without taking one).
	LeaderEpoch(ctx context.Context) (int32, error)
	// AppendAsync stores the batch of req.Entries[0] (validated by the
	// caller; RecordCount = its records) and resolves with the stream
	// offsets it got. Appends on one partition commit in call order.
	AppendAsync(ctx context.Context, req stream.AppendRequest) (*stream.AppendFuture, error)
	// Read returns entries starting with the one containing from, each
	// rendered as one Kafka RecordBatch whose base offset is the entry's
	// offset.
	Read(ctx context.Context, from int64, opts stream.ReadOptions) (stream.ReadResult, error)
	Bounds(ctx context.Context) (start, end int64, err error)
	Notify(ctx context.Context) (int64, <-chan struct{}, error)
	OffsetForTimestamp(ctx context.Context, ts int64) (int64, error)
}

// Errors a projection returns for what it cannot serve. The wire layer maps
// them to Kafka codes (UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_REQUEST).
var (
	// ErrUnknownPayloadFormat: the projected stream's stored payload format
	// has no Kafka mapping; nothing is converted by guessing.
	ErrUnknownPayloadFormat = errors.New("kafka/kstore: the topic's stored payload format has no Kafka mapping")
	// ErrNotOnProjected: the operation is not supported on projected
	// topics (transactions, configs, record deletion, a terminated topic).
	ErrNotOnProjected = errors.New("kafka/kstore: not supported on this topic")
	// ErrRecordTooLarge: the batch is too large for the projected topic
	// (MESSAGE_TOO_LARGE).
	ErrRecordTooLarge = errors.New("kafka/kstore: record batch too large for the topic")
)

func (s *Store) projects(name string) bool {
	return s.cfg.Projection != nil && s.cfg.Projection.Claims(name)
}

// projectedTopic builds the Topic view of a claimed name.
func (s *Store) projectedTopic(ctx context.Context, name string, create bool) (*Topic, error) {
	pt, err := s.cfg.Projection.OpenTopic(ctx, name, create)
	if err != nil {
		return nil, err
	}
	t := &Topic{Name: name, ID: pt.ID, Configs: TopicConfigs{}}
	if pt.MaxMessageBytes > 0 {
		t.Configs[ConfigMaxMessageBytes] = strconv.Itoa(pt.MaxMessageBytes)
	}
	for i, pp := range pt.Partitions {
		t.Partitions = append(t.Partitions, &Partition{Topic: name, Index: int32(i), proj: pp})
	}
	return t, nil
}

// CheckNewTopicName validates the name of a topic about to be created:
// Kafka's naming rules for native topics, the projection's for claimed
// names (checked when it opens them).
func (s *Store) CheckNewTopicName(name string) error {
	if s.projects(name) {
		return nil
	}
	return ValidateTopicName(name)
}

// Projected reports whether p belongs to a projected topic.
func (p *Partition) Projected() bool { return p.proj != nil }

func notOnProjected(what string) error {
	return fmt.Errorf("%w: %s", ErrNotOnProjected, what)
}
