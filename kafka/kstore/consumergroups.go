package kstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/nereusstream/nereus-go/kafka/kconsumer"
	"github.com/nereusstream/nereus-go/metadata"
)

// KIP-848 consumer group state (the kconsumer.Store of this broker's
// consumer group coordinator) is one record per group:
//
//	kafka/cgroups/<url-escaped group>
//
// holding the group's snapshot (kconsumer.MarshalSnapshot) in the same
// envelope as classic group state: [u8 format=1][u32 big-endian
// CRC32C(body)][body]. Every write and delete is a compare-and-set on the
// record's version (a coordinator that lost the group fails instead of
// overwriting its new owner's state). A prefix of its own, so that loading
// every consumer group at start-up does not scan the offsets under
// kafka/groups/. Committed offsets stay in their records (offsets.go).
const keyConsumerGroups = "kafka/cgroups/"

func consumerGroupKey(group string) string { return keyConsumerGroups + url.PathEscape(group) }

// ConsumerGroupStore returns the kconsumer.Store over this store's metadata.
func (s *Store) ConsumerGroupStore() kconsumer.Store { return consumerGroupStore{s} }

type consumerGroupStore struct{ s *Store }

var _ kconsumer.Store = consumerGroupStore{}

func (g consumerGroupStore) LoadConsumerGroup(ctx context.Context, id string) ([]byte, int64, bool, error) {
	rec, err := g.s.meta.Get(ctx, consumerGroupKey(id))
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	body, err := openEnvelope(rec.Value)
	if err != nil {
		return nil, 0, false, fmt.Errorf("kafka/kstore: consumer group %q: %w", id, err)
	}
	return body, int64(rec.Version), true, nil
}

func (g consumerGroupStore) SaveConsumerGroup(ctx context.Context, id string, snap []byte, expected int64) (int64, error) {
	return putStateRecord(ctx, g.s.meta, consumerGroupKey(id), sealEnvelope(snap), expected, kconsumer.ErrStale)
}

func (g consumerGroupStore) DeleteConsumerGroup(ctx context.Context, id string, expected int64) error {
	key := consumerGroupKey(id)
	err := g.s.meta.Delete(ctx, key, metadata.Version(expected))
	switch {
	case err == nil, errors.Is(err, metadata.ErrKeyNotFound):
		return nil
	case metadata.Classify(err) == metadata.Conflict:
		return fmt.Errorf("%w: %v", kconsumer.ErrStale, err)
	case metadata.Classify(err) == metadata.Unknown:
		// Settle by re-reading: gone means applied.
		if _, gerr := g.s.meta.Get(ctx, key); errors.Is(gerr, metadata.ErrKeyNotFound) {
			return nil
		}
		return err
	default:
		return err
	}
}

func (g consumerGroupStore) ListConsumerGroups(ctx context.Context) ([]string, error) {
	end := keyConsumerGroups[:len(keyConsumerGroups)-1] + string(keyConsumerGroups[len(keyConsumerGroups)-1]+1)
	recs, err := g.s.meta.RangeScan(ctx, keyConsumerGroups, end, 0)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		id, err := url.PathUnescape(r.Key[len(keyConsumerGroups):])
		if err != nil {
			continue // not one of ours
		}
		ids = append(ids, id)
	}
	return ids, nil
}
