package kstore

import (
	"context"
	"errors"

	"github.com/nereusstream/nereus-go/metadata"
)

// DeleteOffsets removes the group's committed offsets of the given
// partitions in one batch round trip (OffsetDelete). A partition without a
// committed offset is not an error.
func (s *Store) DeleteOffsets(ctx context.Context, group string, tps []TopicPartition) error {
	if len(tps) == 0 {
		return nil
	}
	ops := make([]metadata.Op, len(tps))
	for i, tp := range tps {
		if s.projects(tp.Topic) {
			// The offset is the projection's (KoP: the group's Pulsar
			// subscription); the index entry below goes too.
			if err := s.cfg.Projection.DeleteOffset(ctx, group, tp.Topic, tp.Partition); err != nil && !errors.Is(err, ErrUnknownTopic) {
				return err
			}
		}
		ops[i] = metadata.Op{Kind: metadata.OpDelete, Key: offsetKey(group, tp.Topic, tp.Partition), Expected: metadata.AnyVersion}
	}
	res, err := s.meta.Batch(ctx, ops)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil && !errors.Is(r.Err, metadata.ErrKeyNotFound) {
			return r.Err
		}
	}
	return nil
}
