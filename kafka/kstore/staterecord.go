package kstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/nereusstream/nereus-go/metadata"
)

// Group state records (classic groups at groupStateKey, KIP-848 groups at
// consumerGroupKey) share one envelope: format byte, CRC32C of the body,
// body.

// sealEnvelope wraps a state snapshot for storage.
func sealEnvelope(body []byte) []byte {
	val := make([]byte, 5, 5+len(body))
	val[0] = groupStateFormat
	binary.BigEndian.PutUint32(val[1:], crc32.Checksum(body, castagnoli))
	return append(val, body...)
}

// openEnvelope checks and unwraps a stored state record.
func openEnvelope(b []byte) ([]byte, error) {
	if len(b) < 5 || b[0] != groupStateFormat || crc32.Checksum(b[5:], castagnoli) != binary.BigEndian.Uint32(b[1:5]) {
		return nil, errors.New("corrupt state record")
	}
	return b[5:], nil
}

// putStateRecord writes val at key if the record is at version expected (0:
// absent) and returns the new version. A lost answer is settled by
// re-reading: our bytes at another version mean it applied; anything else
// is stale (wrapping stale, the caller's ErrStale), as is a conflict.
func putStateRecord(ctx context.Context, meta metadata.Store, key string, val []byte, expected int64, stale error) (int64, error) {
	exp := metadata.Version(expected)
	if expected == 0 {
		exp = metadata.NotExists
	}
	v, err := meta.Put(ctx, key, val, exp)
	switch metadata.Classify(err) {
	case metadata.Applied:
		return int64(v), nil
	case metadata.Conflict:
		return 0, fmt.Errorf("%w: %v", stale, err)
	case metadata.Unknown:
		rec, gerr := meta.Get(ctx, key)
		if gerr == nil && string(rec.Value) == string(val) && int64(rec.Version) != expected {
			return int64(rec.Version), nil
		}
		if gerr == nil || errors.Is(gerr, metadata.ErrKeyNotFound) {
			return 0, fmt.Errorf("%w: outcome was unknown and the record is not ours", stale)
		}
		return 0, err
	default:
		return 0, err
	}
}
