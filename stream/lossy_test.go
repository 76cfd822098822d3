package stream_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"

	"github.com/nereusstream/nereus-go/metadata"
)

// lossyStore wraps a metadata.Store and, from a seeded RNG, fails calls
// before applying them or applies them and then loses the response. Both
// surface as metadata.ErrUnavailable (outcome unknown), as a real client
// would see a timeout.
type lossyStore struct {
	metadata.Store
	mu       sync.Mutex
	rng      *rand.Rand
	failP    float64 // fail before applying
	lossP    float64 // apply, then lose the response
	enabled  atomic.Bool
	injected atomic.Int64
}

func newLossyStore(inner metadata.Store, seed int64, failP, lossP float64) *lossyStore {
	s := &lossyStore{Store: inner, rng: rand.New(rand.NewSource(seed)), failP: failP, lossP: lossP}
	s.enabled.Store(true)
	return s
}

func (s *lossyStore) draw() (fail, loss bool) {
	if !s.enabled.Load() {
		return false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.rng.Float64()
	return x < s.failP, x >= s.failP && x < s.failP+s.lossP
}

func (s *lossyStore) lost(what string) error {
	s.injected.Add(1)
	return fmt.Errorf("lossy %s: %w", what, metadata.ErrUnavailable)
}

func (s *lossyStore) Get(ctx context.Context, key string) (metadata.Record, error) {
	if fail, _ := s.draw(); fail {
		return metadata.Record{}, s.lost("get")
	}
	return s.Store.Get(ctx, key)
}

func (s *lossyStore) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	fail, loss := s.draw()
	if fail {
		return 0, s.lost("put")
	}
	v, err := s.Store.Put(ctx, key, value, expected)
	if loss {
		return 0, s.lost("put response")
	}
	return v, err
}

func (s *lossyStore) Delete(ctx context.Context, key string, expected metadata.Version) error {
	fail, loss := s.draw()
	if fail {
		return s.lost("delete")
	}
	err := s.Store.Delete(ctx, key, expected)
	if loss {
		return s.lost("delete response")
	}
	return err
}

func (s *lossyStore) Batch(ctx context.Context, ops []metadata.Op) ([]metadata.Result, error) {
	fail, loss := s.draw()
	if fail {
		return nil, s.lost("batch")
	}
	res, err := s.Store.Batch(ctx, ops)
	if loss {
		return nil, s.lost("batch response")
	}
	return res, err
}
