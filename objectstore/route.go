package objectstore

import (
	"context"
	"errors"
	"iter"
	"strings"
)

// Routed is one ObjectStore made of two: every key that starts with its
// prefix goes to one store, every other key to the other. `nereus serve`
// uses it to keep the Object WAL's short-lived objects (under "wal/") in a
// store built for them while generations and snapshots stay in fsstore.
//
// It owns only the routing. The two stores' key spaces never overlap (a
// key lives in the store its prefix names), so a listing that spans both
// is their merge; a key the other store happens to hold under the prefix
// is invisible through it.
type Routed struct {
	prefix string
	routed ObjectStore
	rest   ObjectStore
}

// Route returns a store that sends keys starting with prefix to routed
// and all others to rest.
func Route(rest ObjectStore, prefix string, routed ObjectStore) *Routed {
	return &Routed{prefix: prefix, routed: routed, rest: rest}
}

var (
	_ ObjectStore = (*Routed)(nil)
	_ RangeReader = (*Routed)(nil)
	_ PieceReader = (*Routed)(nil)
	_ CacheProber = (*Routed)(nil)
)

func (r *Routed) pick(key string) ObjectStore {
	if strings.HasPrefix(key, r.prefix) {
		return r.routed
	}
	return r.rest
}

// Get implements ObjectStore.
func (r *Routed) Get(ctx context.Context, key string) ([]byte, UpdateVersion, error) {
	return r.pick(key).Get(ctx, key)
}

// GetRange implements ObjectStore.
func (r *Routed) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	return r.pick(key).GetRange(ctx, key, offset, length)
}

// Head implements ObjectStore.
func (r *Routed) Head(ctx context.Context, key string) (ObjectInfo, error) {
	return r.pick(key).Head(ctx, key)
}

// Put implements ObjectStore. DeferSync is per store: a deferred Put is
// made durable by a later Put to the same store, which the Object WAL's
// manifest is, since its segments and manifest share the prefix.
func (r *Routed) Put(ctx context.Context, key string, data []byte, opts PutOptions) (UpdateVersion, error) {
	return r.pick(key).Put(ctx, key, data, opts)
}

// Delete implements ObjectStore.
func (r *Routed) Delete(ctx context.Context, key string, ifVersion *UpdateVersion) error {
	return r.pick(key).Delete(ctx, key, ifVersion)
}

// ReadRange implements RangeReader.
func (r *Routed) ReadRange(ctx context.Context, key string, offset int64, dst []byte, opts ReadRangeOptions) (int, error) {
	return ReadRange(ctx, r.pick(key), key, offset, dst, opts)
}

// ReadRangePieces implements PieceReader.
func (r *Routed) ReadRangePieces(ctx context.Context, key string, offset int64, dst []byte, piece int, opts ReadRangeOptions, filled func(n int) error) (int, error) {
	return ReadRangePieces(ctx, r.pick(key), key, offset, dst, piece, opts, filled)
}

// Cached implements CacheProber.
func (r *Routed) Cached(ctx context.Context, key string, offset, length int64) (bool, error) {
	return Cached(ctx, r.pick(key), key, offset, length)
}

// List implements ObjectStore: one store's listing when the prefix falls
// inside one key space, else the two merged in key order.
func (r *Routed) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	switch {
	case strings.HasPrefix(prefix, r.prefix):
		return r.routed.List(ctx, prefix)
	case !strings.HasPrefix(r.prefix, prefix):
		return r.rest.List(ctx, prefix)
	}
	return func(yield func(ObjectInfo, error) bool) {
		a, stopA := iter.Pull2(r.rest.List(ctx, prefix))
		defer stopA()
		b, stopB := iter.Pull2(r.routed.List(ctx, prefix))
		defer stopB()
		// next yields the rest store's objects outside the routed prefix.
		nextA := func() (ObjectInfo, error, bool) {
			for {
				info, err, ok := a()
				if !ok || err != nil || !strings.HasPrefix(info.Key, r.prefix) {
					return info, err, ok
				}
			}
		}
		ia, ea, okA := nextA()
		ib, eb, okB := b()
		for okA || okB {
			// An error that ends a listing (no key) is yielded at once.
			if okA && ea != nil && ia.Key == "" {
				yield(ia, ea)
				return
			}
			if okB && eb != nil && ib.Key == "" {
				yield(ib, eb)
				return
			}
			if okA && (!okB || ia.Key < ib.Key) {
				if !yield(ia, ea) {
					return
				}
				ia, ea, okA = nextA()
				continue
			}
			if !yield(ib, eb) {
				return
			}
			ib, eb, okB = b()
		}
	}
}

// Close closes both stores (those with a Close method).
func (r *Routed) Close() error {
	var errs []error
	for _, s := range []ObjectStore{r.routed, r.rest} {
		if c, ok := s.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
