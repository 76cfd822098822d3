// Package kauth keeps the Kafka front end's security state in the metadata
// store: SCRAM credentials (salt, stored key, server key, iterations per
// user and mechanism; never a password) under "kafka/scram/", and ACL
// bindings under "kafka/acls/".
//
// Every record carries a format byte and a CRC-32C; a corrupt record is an
// error, never an empty credential or an empty ACL set. Writes are
// read-modify-CAS loops whose unknown outcomes are settled by re-reading:
// an upsert or delete is done when the stored state is the intended one.
//
// It must never store or log a password or a salted password, and never
// decide authentication or authorization itself (kafka/ksasl and
// kafka/kacl do).
package kauth

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/url"
	"sort"
	"strings"

	"github.com/nereusstream/nereus-go/kafka/ksasl"
	"github.com/nereusstream/nereus-go/metadata"
)

const (
	scramPrefix  = "kafka/scram/"
	recordFormat = byte(1)
	maxAttempts  = 32
)

// ErrCorrupt marks a record that failed its checksum or did not decode.
var ErrCorrupt = errors.New("nereus/kauth: corrupt security record")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encode(v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 5, 5+len(body))
	out[0] = recordFormat
	binary.BigEndian.PutUint32(out[1:], crc32.Checksum(body, castagnoli))
	return append(out, body...), nil
}

func decode(key string, b []byte, v any) error {
	if len(b) < 5 || b[0] != recordFormat {
		return fmt.Errorf("%w: %s: unknown format", ErrCorrupt, key)
	}
	if crc32.Checksum(b[5:], castagnoli) != binary.BigEndian.Uint32(b[1:]) {
		return fmt.Errorf("%w: %s: checksum mismatch", ErrCorrupt, key)
	}
	if err := json.Unmarshal(b[5:], v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	return nil
}

// Store is the security state of one Kafka front end (all nodes sharing
// a metadata store share it).
type Store struct {
	meta metadata.Store
}

// New returns a store over meta.
func New(meta metadata.Store) *Store { return &Store{meta: meta} }

// userRecord is every SCRAM credential of one user.
type userRecord struct {
	V     int                   `json:"v"`
	User  string                `json:"user"`
	Creds map[string]scramEntry `json:"creds"`
}

type scramEntry struct {
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
	Iterations int    `json:"iterations"`
}

func scramKey(user string) string { return scramPrefix + url.PathEscape(user) }

func (s *Store) readUser(ctx context.Context, user string) (userRecord, metadata.Version, error) {
	key := scramKey(user)
	rec, err := s.meta.Get(ctx, key)
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return userRecord{V: 1, User: user, Creds: map[string]scramEntry{}}, metadata.NotExists, nil
	}
	if err != nil {
		return userRecord{}, 0, err
	}
	var u userRecord
	if err := decode(key, rec.Value, &u); err != nil {
		return userRecord{}, 0, err
	}
	if u.Creds == nil {
		u.Creds = map[string]scramEntry{}
	}
	return u, rec.Version, nil
}

// ScramCredential returns a user's credential for mech (a ksasl.Lookup).
func (s *Store) ScramCredential(ctx context.Context, user, mech string) (ksasl.ScramCredential, bool, error) {
	u, _, err := s.readUser(ctx, user)
	if err != nil {
		return ksasl.ScramCredential{}, false, err
	}
	e, ok := u.Creds[mech]
	if !ok {
		return ksasl.ScramCredential{}, false, nil
	}
	return ksasl.ScramCredential{Mechanism: mech, Salt: e.Salt, StoredKey: e.StoredKey, ServerKey: e.ServerKey, Iterations: e.Iterations}, true, nil
}

// ScramInfo is what DescribeUserScramCredentials reports of a credential.
type ScramInfo struct {
	Mechanism  string
	Iterations int
}

// DescribeScram returns the mechanisms of users (nil: every user with a
// credential), sorted by mechanism. Users without credentials are absent.
func (s *Store) DescribeScram(ctx context.Context, users []string) (map[string][]ScramInfo, error) {
	out := map[string][]ScramInfo{}
	add := func(u userRecord) {
		var infos []ScramInfo
		for m, e := range u.Creds {
			infos = append(infos, ScramInfo{Mechanism: m, Iterations: e.Iterations})
		}
		if len(infos) == 0 {
			return
		}
		sort.Slice(infos, func(i, j int) bool { return ksasl.ScramType(infos[i].Mechanism) < ksasl.ScramType(infos[j].Mechanism) })
		out[u.User] = infos
	}
	if users == nil {
		recs, err := s.meta.RangeScan(ctx, scramPrefix, prefixEnd(scramPrefix), 0)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			var u userRecord
			if err := decode(r.Key, r.Value, &u); err != nil {
				return nil, err
			}
			add(u)
		}
		return out, nil
	}
	for _, name := range users {
		u, _, err := s.readUser(ctx, name)
		if err != nil {
			return nil, err
		}
		add(u)
	}
	return out, nil
}

// UpsertScram stores (replaces) a user's credential for its mechanism.
func (s *Store) UpsertScram(ctx context.Context, user string, c ksasl.ScramCredential) error {
	want := scramEntry{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}
	_, err := s.updateUser(ctx, user, func(u *userRecord) bool {
		u.Creds[c.Mechanism] = want
		return true
	}, func(u userRecord) bool {
		e, ok := u.Creds[c.Mechanism]
		return ok && e.Iterations == want.Iterations && string(e.Salt) == string(want.Salt) && string(e.StoredKey) == string(want.StoredKey)
	})
	return err
}

// DeleteScram removes a user's credential for mech; found is false when
// there was none.
func (s *Store) DeleteScram(ctx context.Context, user, mech string) (found bool, err error) {
	return s.updateUser(ctx, user, func(u *userRecord) bool {
		if _, ok := u.Creds[mech]; !ok {
			return false
		}
		delete(u.Creds, mech)
		return true
	}, func(u userRecord) bool { _, ok := u.Creds[mech]; return !ok })
}

// updateUser applies change to the user's record with CAS. change returns
// false when there is nothing to do. done says whether a record already
// holds the intended state (to settle unknown outcomes by re-reading).
func (s *Store) updateUser(ctx context.Context, user string, change func(*userRecord) bool, done func(userRecord) bool) (changed bool, err error) {
	key := scramKey(user)
	for range maxAttempts {
		u, ver, err := s.readUser(ctx, user)
		if err != nil {
			return false, err
		}
		if !change(&u) {
			return changed, nil
		}
		if len(u.Creds) == 0 {
			if ver == metadata.NotExists {
				return true, nil
			}
			err = s.meta.Delete(ctx, key, ver)
		} else {
			var b []byte
			if b, err = encode(u); err != nil {
				return false, err
			}
			_, err = s.meta.Put(ctx, key, b, ver)
		}
		switch metadata.Classify(err) {
		case metadata.Applied:
			return true, nil
		case metadata.Conflict, metadata.NotApplied:
			if errors.Is(err, metadata.ErrInvalidArgument) || errors.Is(err, metadata.ErrClosed) {
				return false, err
			}
			continue // someone else wrote: re-read and re-plan
		default: // unknown: the re-read decides
			cur, _, rerr := s.readUser(ctx, user)
			if rerr == nil && done(cur) {
				return true, nil
			}
			changed = true
		}
	}
	return false, fmt.Errorf("nereus/kauth: %s: gave up after %d contended attempts", key, maxAttempts)
}

// prefixEnd is the smallest key greater than every key with prefix.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// ValidUser reports whether name can be a SCRAM user (Kafka refuses empty
// names).
func ValidUser(name string) bool { return strings.TrimSpace(name) != "" }
