package kauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/kafka/kacl"
	"github.com/nereusstream/nereus-go/metadata"
)

// ACL bindings live one per key, "kafka/acls/<sha256 of the binding>", so
// creating one is a create-if-absent (idempotent, as Kafka's CreateAcls is)
// and two nodes creating the same binding converge on one record.
const aclPrefix = "kafka/acls/"

type aclRecord struct {
	V       int          `json:"v"`
	Binding kacl.Binding `json:"binding"`
}

func aclKey(b kacl.Binding) string {
	canon, _ := json.Marshal(b) // struct field order: deterministic
	sum := sha256.Sum256(canon)
	return aclPrefix + hex.EncodeToString(sum[:16])
}

// ACLs is the ACL set of the cluster: persisted in metadata, cached in
// memory for the request path, and pushed into an authorizer on every
// change (own writes at once, other nodes' through a metadata watch).
type ACLs struct {
	meta  metadata.Store
	authz *kacl.Authorizer
	log   *slog.Logger

	mu  sync.Mutex
	set map[string]kacl.Binding // key → binding
}

// NewACLs returns an empty set feeding authz. Call Load before serving.
func (s *Store) NewACLs(authz *kacl.Authorizer, log *slog.Logger) *ACLs {
	return &ACLs{meta: s.meta, authz: authz, log: log, set: map[string]kacl.Binding{}}
}

// Load reads every binding (a corrupt record fails the load: an ACL set
// with a hole would grant or deny wrongly).
func (a *ACLs) Load(ctx context.Context) error {
	recs, err := a.meta.RangeScan(ctx, aclPrefix, prefixEnd(aclPrefix), 0)
	if err != nil {
		return err
	}
	set := map[string]kacl.Binding{}
	for _, r := range recs {
		var ar aclRecord
		if err := decode(r.Key, r.Value, &ar); err != nil {
			return err
		}
		set[r.Key] = ar.Binding
	}
	a.mu.Lock()
	a.set = set
	a.publishLocked()
	a.mu.Unlock()
	return nil
}

func (a *ACLs) publishLocked() {
	bs := make([]kacl.Binding, 0, len(a.set))
	for _, b := range a.set {
		bs = append(bs, b)
	}
	a.authz.Set(bs)
}

// Watch keeps the cache in step with other nodes' changes until ctx ends.
// A missed-events signal, a failed read or a closed watch reloads
// everything (retrying with backoff), so the cache converges.
func (a *ACLs) Watch(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		ch, err := a.meta.Watch(ctx, aclPrefix)
		if err == nil {
			err = a.Load(ctx) // events before the watch started
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			err = a.follow(ctx, ch)
		}
		if ctx.Err() != nil {
			return
		}
		a.log.Warn("kafka ACL cache: watch interrupted; reloading", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func (a *ACLs) follow(ctx context.Context, ch <-chan metadata.Event) error {
	for ev := range ch {
		if ev.Key == "" {
			if err := a.Load(ctx); err != nil {
				return err
			}
			continue
		}
		switch ev.Kind {
		case metadata.EventDelete:
			a.mu.Lock()
			if _, ok := a.set[ev.Key]; ok {
				delete(a.set, ev.Key)
				a.publishLocked()
			}
			a.mu.Unlock()
		case metadata.EventPut:
			rec, err := a.meta.Get(ctx, ev.Key)
			if errors.Is(err, metadata.ErrKeyNotFound) {
				continue // deleted meanwhile; its delete event follows
			}
			if err != nil {
				return err
			}
			var ar aclRecord
			if err := decode(ev.Key, rec.Value, &ar); err != nil {
				return err
			}
			a.mu.Lock()
			a.set[ev.Key] = ar.Binding
			a.publishLocked()
			a.mu.Unlock()
		}
	}
	return errors.New("watch closed")
}

// Create persists a binding; an existing identical binding is success.
func (a *ACLs) Create(ctx context.Context, b kacl.Binding) error {
	key := aclKey(b)
	val, err := encode(aclRecord{V: 1, Binding: b})
	if err != nil {
		return err
	}
	_, err = a.meta.Put(ctx, key, val, metadata.NotExists)
	switch metadata.Classify(err) {
	case metadata.Applied, metadata.Conflict: // conflict: it exists already
	case metadata.Unknown:
		// Settle by reading: the record is there (ours or an identical
		// one) or it is not.
		if _, gerr := a.meta.Get(ctx, key); gerr != nil {
			return fmt.Errorf("nereus/kauth: create ACL %v: outcome unknown (%v), then: %w", b, err, gerr)
		}
	default:
		return err
	}
	a.mu.Lock()
	a.set[key] = b
	a.publishLocked()
	a.mu.Unlock()
	return nil
}

// Delete removes every binding the filter matches and returns them.
func (a *ACLs) Delete(ctx context.Context, f kacl.Filter) ([]kacl.Binding, error) {
	a.mu.Lock()
	var keys []string
	var match []kacl.Binding
	for k, b := range a.set {
		if f.Matches(b) {
			keys, match = append(keys, k), append(match, b)
		}
	}
	a.mu.Unlock()
	var deleted []kacl.Binding
	for i, k := range keys {
		err := a.meta.Delete(ctx, k, metadata.AnyVersion)
		switch {
		case err == nil, errors.Is(err, metadata.ErrKeyNotFound):
		case metadata.Classify(err) == metadata.Unknown:
			if _, gerr := a.meta.Get(ctx, k); !errors.Is(gerr, metadata.ErrKeyNotFound) {
				return deleted, fmt.Errorf("nereus/kauth: delete ACL %v: outcome unknown: %w", match[i], err)
			}
		default:
			return deleted, err
		}
		deleted = append(deleted, match[i])
		a.mu.Lock()
		delete(a.set, k)
		a.publishLocked()
		a.mu.Unlock()
	}
	return kacl.Sorted(deleted), nil
}

// List returns the bindings the filter matches, sorted.
func (a *ACLs) List(f kacl.Filter) []kacl.Binding {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []kacl.Binding
	for _, b := range a.set {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return kacl.Sorted(out)
}
