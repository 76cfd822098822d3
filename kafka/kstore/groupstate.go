package kstore

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"net/url"

	"github.com/nereusstream/nereus-go/kafka/kgroup"
	"github.com/nereusstream/nereus-go/metadata"
)

// Group state (the kgroup.Store of this broker's group coordinator) is one
// record per group:
//
//	kafka/groups/<url-escaped group>/state
//
// holding the group's last settled snapshot (kgroup.MarshalSnapshot) in the
// envelope [u8 format=1][u32 big-endian CRC32C(body)][body]. Every write is
// a compare-and-set on the record's version: the coordinator that loaded a
// group claims it by writing it back, so a previous coordinator that has
// not noticed the move yet fails its next save (kgroup.ErrStale) instead of
// overwriting the state the new one resumed from. Offsets stay in their own
// records (offsets.go); a group whose state is stored is also listed in the
// kafka/groupidx/ index.

const groupStateFormat = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func groupStateKey(group string) string { return keyGroups + url.PathEscape(group) + "/state" }

// GroupStore returns the kgroup.Store over this store's metadata.
func (s *Store) GroupStore() kgroup.Store { return groupStore{s} }

type groupStore struct{ s *Store }

var _ kgroup.Store = groupStore{}

func (g groupStore) LoadGroup(ctx context.Context, id string) ([]byte, int64, bool, error) {
	rec, err := g.s.meta.Get(ctx, groupStateKey(id))
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	body, err := openEnvelope(rec.Value)
	if err != nil {
		return nil, 0, false, fmt.Errorf("kafka/kstore: group %q: %w", id, err)
	}
	return body, int64(rec.Version), true, nil
}

func (g groupStore) SaveGroup(ctx context.Context, id string, snap []byte, expected int64) (int64, error) {
	v, err := putStateRecord(ctx, g.s.meta, groupStateKey(id), sealEnvelope(snap), expected, kgroup.ErrStale)
	if err == nil && expected == 0 {
		g.markGroup(ctx, id)
	}
	return v, err
}

func (g groupStore) markGroup(ctx context.Context, id string) {
	_, _ = g.s.meta.Put(ctx, keyGroupIndex+url.PathEscape(id), []byte(`{"v":1}`), metadata.AnyVersion)
}

func (g groupStore) DeleteGroup(ctx context.Context, id string) error {
	err := g.s.meta.Delete(ctx, groupStateKey(id), metadata.AnyVersion)
	if err == nil || errors.Is(err, metadata.ErrKeyNotFound) {
		return nil
	}
	return err
}
