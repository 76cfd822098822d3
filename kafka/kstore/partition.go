package kstore

import (
	"context"
	"errors"
	"math"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/stream"
)

// LeaderEpoch is the partition leader epoch Kafka clients see: the epoch
// of the partition stream's current append session, read from its head
// (never acquired: reading it takes no session). It only grows: every new
// leader's session bumps it. Before the first leader it is 0.
func (s *Store) LeaderEpoch(ctx context.Context, p *Partition) (int32, error) {
	if p.proj != nil {
		return p.proj.LeaderEpoch(ctx)
	}
	info, err := s.streams.Describe(ctx, p.StreamID)
	if err != nil {
		return -1, err
	}
	return clampEpoch(info.Session.Epoch), nil
}

// Leader returns the broker leading the partition (the owner of its
// stream) in this broker's view; ok is false when no broker is active.
func (s *Store) Leader(p *Partition) (cluster.Broker, bool) {
	if s.cfg.Cluster == nil {
		return cluster.Broker{}, false
	}
	return s.cfg.Cluster.OwnerOf(p.StreamName())
}

// Cluster is the cluster membership the store was built with (nil for a
// read-only store).
func (s *Store) Cluster() Cluster { return s.cfg.Cluster }

func clampEpoch(e uint64) int32 {
	if e > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(e)
}

func epochOf(sess stream.Session) int32 { return clampEpoch(sess.Epoch) }

// Appending is an append in flight on a partition.
type Appending struct {
	Future *stream.AppendFuture
	// Epoch is the leader epoch the append was issued under.
	Epoch int32
	sess  stream.Session
	store *Store
}

// Settle waits for the append and, if the session turned out to be fenced,
// forgets it so the next append acquires a new one (a new leader epoch).
func (a *Appending) Settle(ctx context.Context) (stream.AppendResult, error) {
	res, err := a.Future.Wait(ctx)
	if errors.Is(err, stream.ErrFenced) && a.store != nil {
		a.store.cfg.Cluster.Lost(a.sess)
	}
	return res, err
}

// AppendAsync issues an append on the partition under this broker's
// session. build receives the leader epoch before the request is enqueued
// so the caller can stamp it into the batch. Appends issued on one
// partition commit in call order.
func (s *Store) AppendAsync(ctx context.Context, p *Partition, build func(epoch int32) stream.AppendRequest) (*Appending, error) {
	if p.proj != nil {
		epoch, err := p.proj.LeaderEpoch(ctx)
		if err != nil {
			return nil, err
		}
		fut, err := p.proj.AppendAsync(ctx, build(epoch))
		if err != nil {
			return nil, err
		}
		return &Appending{Future: fut, Epoch: epoch}, nil // the projection handles its own fencing
	}
	sess, err := p.session(ctx, s)
	if err != nil {
		return nil, err
	}
	epoch := epochOf(sess)
	req := build(epoch)
	if PlantedBug == BugDropsSequence {
		req.Sequence = nil
	}
	return &Appending{Future: s.streams.AppendAsync(sess, req), Epoch: epoch, sess: sess, store: s}, nil
}

// Read reads committed entries of the partition starting with the entry
// that contains offset from.
func (s *Store) Read(ctx context.Context, p *Partition, from int64, opts stream.ReadOptions) (stream.ReadResult, error) {
	if p.proj != nil {
		return p.proj.Read(ctx, from, opts)
	}
	if p.compacted {
		if v, ok := s.views(); ok {
			// Below the cleaned point the compacted view (offsets kept,
			// dropped records are gaps), above it the log itself.
			return v.ReadView(ctx, p.StreamID, CompactViewKind, from, opts)
		}
	}
	return s.streams.Read(ctx, p.StreamID, from, opts)
}

// Bounds returns the partition's [start, end) offsets.
func (s *Store) Bounds(ctx context.Context, p *Partition) (start, end int64, err error) {
	if p.proj != nil {
		return p.proj.Bounds(ctx)
	}
	if p.compacted {
		if v, ok := s.views(); ok {
			// A compact-only topic's log below the cleaned point is its
			// compacted view (the lossless log there is reclaimed): the
			// log start offset is the view's start.
			return v.ViewBounds(ctx, p.StreamID, CompactViewKind)
		}
	}
	info, err := s.streams.Describe(ctx, p.StreamID)
	if err != nil {
		return 0, 0, err
	}
	return info.StartOffset, info.EndOffset, nil
}

// DeletesRecords reports whether DeleteRecords may trim the partition:
// not on a compact-only topic (Kafka answers POLICY_VIOLATION there; its
// log start offset is the compacted view's).
func (s *Store) DeletesRecords(ctx context.Context, p *Partition) (bool, error) {
	if p.proj != nil || !p.compacted {
		return true, nil
	}
	t, _, err := s.Partition(ctx, p.Topic, p.Index)
	if err != nil {
		return false, err
	}
	del, _ := t.Configs.cleanupPolicies()
	return del, nil
}

// Notify returns the partition's committed end and a channel closed on its
// next change.
func (s *Store) Notify(ctx context.Context, p *Partition) (int64, <-chan struct{}, error) {
	if p.proj != nil {
		return p.proj.Notify(ctx)
	}
	return s.streams.Notify(ctx, p.StreamID)
}

// OffsetForTimestamp returns the first offset of the first entry whose max
// timestamp is >= ts (the end offset if none).
func (s *Store) OffsetForTimestamp(ctx context.Context, p *Partition, ts int64) (int64, error) {
	if p.proj != nil {
		return p.proj.OffsetForTimestamp(ctx, ts)
	}
	return s.streams.OffsetForTimestamp(ctx, p.StreamID, ts)
}

// Trim advances the partition's start offset (DeleteRecords).
func (s *Store) Trim(ctx context.Context, p *Partition, to int64) error {
	if p.proj != nil {
		return notOnProjected("DeleteRecords (Pulsar topics trim by retention policy)")
	}
	return s.streams.Trim(ctx, p.StreamID, to)
}
