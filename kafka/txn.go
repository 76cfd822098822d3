package kafka

// Transactions: the glue between the transaction coordinator (package
// ktxn: decisions and their persistence), the partitions' transaction
// indexes (package kstore: open transactions, last stable offset, aborted
// lists) and the wire handlers (22, 24, 25, 26, 28, 61, 65, 66, and the
// transactional paths of 0 Produce, 1 Fetch, 2 ListOffsets, 9 OffsetFetch,
// 10 FindCoordinator).
//
// In a cluster the coordinator of a transactional id (the owner of
// cluster.TxnKey(id)) and the leaders of its partitions may be different
// brokers. Markers for partitions this broker leads are appended locally;
// for others the coordinator posts a marker request that the leader serves
// (kstore/markers.go) and waits for it. The produce path's KIP-890
// verification is an in-memory call when this broker coordinates the id
// and a read of the id's record from the metadata store otherwise
// (Coordinator.VerifyAt), under the partition's index lock either way.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"time"

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
	if errors.Is(err, kstore.ErrNotLeader) {
		// Another broker leads the partition: ask it (markers.go).
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return t.s.store.RequestMarker(rctx, p, pid, epoch, commit, coordinatorEpoch, markerNonce())
	}
	return err
}

func markerNonce() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
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
