package kstore

// Client quotas (DescribeClientQuotas / AlterClientQuotas), one record per
// quota entity:
//
//	kafka/quotas/<url-escaped canonical entity>   {entity, values}
//
// The canonical entity lists its components sorted by type ("client-id",
// "ip", "user"), each as type=name, with the default entity of a type
// (Kafka's null name) written as type=<default>. Each alteration is a
// read-modify-write with a version CAS on that one record.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/nereusstream/nereus-go/metadata"
)

const keyQuotas = "kafka/quotas/"

// QuotaEntityPart is one component of a quota entity; Name nil is the
// type's default entity.
type QuotaEntityPart struct {
	Type string  `json:"type"`
	Name *string `json:"name,omitempty"`
}

// QuotaEntry is a quota entity with its configured values.
type QuotaEntry struct {
	Entity []QuotaEntityPart  `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// QuotaOp sets (or with Remove, removes) one quota key.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// Quota keys and entity types Kafka defines.
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"

	QuotaUser     = "user"
	QuotaClientID = "client-id"
	QuotaIP       = "ip"
)

// ErrInvalidQuota: an unknown key or entity type, a bad combination, or a
// bad value (INVALID_REQUEST).
var ErrInvalidQuota = errors.New("kafka/kstore: invalid client quota")

// CanonicalEntity sorts an entity's parts and checks Kafka's rules: types
// user, client-id and ip, each at most once; ip alone or user/client-id
// alone or together.
func CanonicalEntity(parts []QuotaEntityPart) ([]QuotaEntityPart, error) {
	out := append([]QuotaEntityPart(nil), parts...)
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	seen := map[string]bool{}
	for _, p := range out {
		switch p.Type {
		case QuotaUser, QuotaClientID, QuotaIP:
		default:
			return nil, fmt.Errorf("%w: unknown entity type %q", ErrInvalidQuota, p.Type)
		}
		if seen[p.Type] {
			return nil, fmt.Errorf("%w: entity type %q given twice", ErrInvalidQuota, p.Type)
		}
		seen[p.Type] = true
	}
	if len(out) == 0 || (seen[QuotaIP] && len(out) > 1) {
		return nil, fmt.Errorf("%w: an entity is a user, a client-id, both, or an ip", ErrInvalidQuota)
	}
	return out, nil
}

func entityKey(parts []QuotaEntityPart) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		name := "<default>"
		if p.Name != nil {
			name = "=" + *p.Name // never equal to "<default>"
		}
		b.WriteString(p.Type + ":" + name)
	}
	return keyQuotas + url.PathEscape(b.String())
}

func validQuotaKey(ip bool, key string) bool {
	if ip {
		return key == QuotaConnectionCreationRate
	}
	switch key {
	case QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage, QuotaControllerMutationRate:
		return true
	}
	return false
}

// AlterQuota applies ops to one entity. With validateOnly nothing is
// written. An entity left without values is deleted.
func (s *Store) AlterQuota(ctx context.Context, entity []QuotaEntityPart, ops []QuotaOp, validateOnly bool) error {
	ent, err := CanonicalEntity(entity)
	if err != nil {
		return err
	}
	ip := ent[0].Type == QuotaIP
	for _, op := range ops {
		if !validQuotaKey(ip, op.Key) {
			return fmt.Errorf("%w: key %q does not apply to this entity", ErrInvalidQuota, op.Key)
		}
		if !op.Remove && op.Value <= 0 {
			return fmt.Errorf("%w: %s must be positive, got %v", ErrInvalidQuota, op.Key, op.Value)
		}
	}
	if validateOnly {
		return nil
	}
	key := entityKey(ent)
	for attempt := 0; attempt < 5; attempt++ {
		cur := QuotaEntry{Entity: ent, Values: map[string]float64{}}
		expected := metadata.NotExists
		rec, err := s.meta.Get(ctx, key)
		switch {
		case err == nil:
			if err := json.Unmarshal(rec.Value, &cur); err != nil {
				return fmt.Errorf("kafka/kstore: corrupt quota record %s: %w", key, err)
			}
			if cur.Values == nil {
				cur.Values = map[string]float64{}
			}
			expected = rec.Version
		case !errors.Is(err, metadata.ErrKeyNotFound):
			return err
		}
		for _, op := range ops {
			if op.Remove {
				delete(cur.Values, op.Key)
			} else {
				cur.Values[op.Key] = op.Value
			}
		}
		if len(cur.Values) == 0 {
			if expected == metadata.NotExists {
				return nil
			}
			err = s.meta.Delete(ctx, key, expected)
		} else {
			val, _ := json.Marshal(cur)
			_, err = s.meta.Put(ctx, key, val, expected)
		}
		switch metadata.Classify(err) {
		case metadata.Applied:
			return nil
		case metadata.Conflict, metadata.Unknown:
			continue // re-read: an unknown outcome shows in the record
		default:
			if errors.Is(err, metadata.ErrKeyNotFound) {
				continue
			}
			return err
		}
	}
	return ErrConflict
}

// ListQuotas returns every configured quota entity.
func (s *Store) ListQuotas(ctx context.Context) ([]QuotaEntry, error) {
	recs, err := s.meta.RangeScan(ctx, keyQuotas, prefixEnd(keyQuotas), 0)
	if err != nil {
		return nil, err
	}
	out := make([]QuotaEntry, 0, len(recs))
	for _, r := range recs {
		var q QuotaEntry
		if err := json.Unmarshal(r.Value, &q); err != nil {
			s.log.Warn("kafka/kstore: skipping undecodable quota record", "key", r.Key, "err", err)
			continue
		}
		out = append(out, q)
	}
	return out, nil
}
