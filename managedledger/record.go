package managedledger

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"

	"github.com/nereusstream/nereus-go/metadata"
)

// Metadata record envelope: [u8 format=1][u32 crc32c(body)][body JSON].
// Every record this package writes carries its own checksum so a corrupted
// value is detected and never used as state.
const recordFormat byte = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeRecord(v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 5, 5+len(body))
	out[0] = recordFormat
	binary.BigEndian.PutUint32(out[1:], crc32.Checksum(body, castagnoli))
	return append(out, body...), nil
}

func decodeRecord(b []byte, v any) error {
	if len(b) < 5 || b[0] != recordFormat {
		return fmt.Errorf("%w: unknown format", ErrCorruptRecord)
	}
	if crc32.Checksum(b[5:], castagnoli) != binary.BigEndian.Uint32(b[1:]) {
		return fmt.Errorf("%w: checksum mismatch", ErrCorruptRecord)
	}
	if err := json.Unmarshal(b[5:], v); err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	return nil
}

// getRecord reads and decodes key. ok is false if the key is absent.
func getRecord(ctx context.Context, m metadata.Store, key string, v any) (metadata.Version, bool, error) {
	rec, err := m.Get(ctx, key)
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if err := decodeRecord(rec.Value, v); err != nil {
		return 0, false, fmt.Errorf("%s: %w", key, err)
	}
	return rec.Version, true, nil
}

// nextCounter increments the decimal counter at key by CAS and returns the
// new value. A conflict re-reads and retries; an unknown outcome also
// re-reads and retries, so a value may be skipped but never handed out
// twice.
func nextCounter(ctx context.Context, m metadata.Store, key string) (int64, error) {
	for attempt := 0; attempt < 64; attempt++ {
		var cur int64
		ver := metadata.NotExists
		rec, err := m.Get(ctx, key)
		switch {
		case err == nil:
			cur, err = strconv.ParseInt(string(rec.Value), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%w: counter %s: %v", ErrCorruptRecord, key, err)
			}
			ver = rec.Version
		case errors.Is(err, metadata.ErrKeyNotFound):
		default:
			return 0, err
		}
		next := cur + 1
		_, err = m.Put(ctx, key, []byte(strconv.FormatInt(next, 10)), ver)
		switch metadata.Classify(err) {
		case metadata.Applied:
			return next, nil
		case metadata.Conflict, metadata.Unknown:
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			continue
		default:
			return 0, err
		}
	}
	return 0, fmt.Errorf("%w: counter %s", ErrTooManyConflicts, key)
}
