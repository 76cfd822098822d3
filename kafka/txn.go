package kafka

// Transactions: the glue between the transaction coordinator (package
// ktxn: decisions and their persistence), the partitions' transaction
// indexes (package kstore: open transactions, last stable offset, aborted
// lists) and the wire handlers (22, 24, 25, 26, 28, 61, 65, 66, and the
// transactional paths of 0 Produce, 1 Fetch, 2 ListOffsets, 9 OffsetFetch,
// 10 FindCoordinator).
//
// One process is coordinator for every transactional id and leader of
// every partition it serves, so markers are appended locally
// (txnStorage.WriteMarker) and the produce path's KIP-890 verification is
// an in-memory call (Coordinator.Verify). A multi-broker deployment keeps
// both seams: the marker write becomes a request to the partition's leader
// (WriteTxnMarkers) and verification a request to the coordinator
// (AddPartitionsToTxn v4+ verify_only, which is served here already).

import (
	"context"
	"errors"

	"github.com/nereusstream/nereus-go/kafka/kstore"
	"github.com/nereusstream/nereus-go/kafka/ktxn"
)

// txnStorage implements ktxn.Storage over the Kafka storage boundary.
type txnStorage struct{ s *Server }

func (t txnStorage) AllocateProducerID(ctx context.Context) (int64, error) {
	return t.s.store.AllocateProducerID(ctx)
}

func (t txnStorage) WriteMarker(ctx context.Context, tp ktxn.TopicPartition, pid int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	_, p, err := t.s.store.Partition(ctx, tp.Topic, tp.Partition)
	if errors.Is(err, kstore.ErrUnknownTopic) {
		return ktxn.ErrPartitionGone
	}
	if err != nil {
		return err
	}
	_, err = t.s.store.AppendMarker(ctx, p, pid, epoch, commit, coordinatorEpoch)
	return err
}

func (t txnStorage) CommitOffsets(ctx context.Context, group string, offs []ktxn.Offset) error {
	commits := make([]kstore.OffsetCommit, len(offs))
	for i, o := range offs {
		commits[i] = kstore.OffsetCommit{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	for _, err := range t.s.store.CommitOffsets(ctx, group, commits) {
		if err != nil && !errors.Is(err, kstore.ErrUnknownTopic) {
			return err
		}
	}
	return nil
}
