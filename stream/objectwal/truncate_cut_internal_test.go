package objectwal

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	osmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// loseManifestPut applies the next manifest PUT once armed but loses its
// response (a transport error after the write).
type loseManifestPut struct {
	objectstore.ObjectStore
	armed atomic.Bool
	lost  atomic.Int32
}

func (s *loseManifestPut) Put(ctx context.Context, key string, data []byte, o objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	v, err := s.ObjectStore.Put(ctx, key, data, o)
	if err == nil && strings.HasSuffix(key, "/manifest") && s.armed.CompareAndSwap(true, false) {
		s.lost.Add(1)
		return objectstore.UpdateVersion{}, errors.New("injected: connection reset after the write")
	}
	return v, err
}

// TestTruncationLostResponseLeaksNothing: an idle provider's truncation
// (a manifest commit of its own) applies but loses its response. The
// segment whose run was not committed must still be deleted and the one
// whose run was committed retained for physical GC: before, the producer
// judged the commit "not landed", re-planned on the already truncated
// manifest and reported nothing dropped, so both segments were neither
// deleted nor retained until a restart rediscovered them.
func TestTruncationLostResponseLeaksNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store := &loseManifestPut{ObjectStore: osmem.New()}
	p, err := Open(ctx, Config{Store: store, Prefix: "wal/w1", FlushInterval: time.Millisecond, TruncateInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	write := func(run provider.Run) provider.Target {
		done := make(chan provider.Target, 1)
		p.Write(run, func(tg provider.Target, err error) {
			if err != nil {
				t.Error(err)
			}
			done <- tg
		})
		return <-done
	}
	committed := write(provider.Run{Stream: 1, Epoch: 1, Token: 1, Commit: 1, Start: 0, Entries: []provider.Entry{{RecordCount: 1, Payload: []byte("kept")}}})
	p.Release(committed, true)
	garbage := write(provider.Run{Stream: 2, Epoch: 1, Token: 2, Commit: 1, Start: 0, Entries: []provider.Entry{{RecordCount: 1, Payload: []byte("garbage")}}})
	p.Release(garbage, false)
	segs := func() []string {
		var out []string
		for oi, err := range store.List(ctx, "wal/w1/") {
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(oi.Key, "/manifest") {
				out = append(out, oi.Key)
			}
		}
		return out
	}
	if n := len(segs()); n != 2 {
		t.Fatalf("%d segments, want 2 (one per write)", n)
	}
	p.mu.Lock()
	limit, any := p.resolvedThrough, p.resolvedAny
	p.mu.Unlock()
	if !any {
		t.Fatal("nothing resolved")
	}
	store.armed.Store(true)
	if err := p.truncate(ctx, limit); err != nil {
		t.Fatal(err)
	}
	if store.lost.Load() != 1 {
		t.Fatal("the cut never fired")
	}
	left := segs()
	p.mu.Lock()
	retained := len(p.retained)
	p.mu.Unlock()
	if len(left) != 1 || retained != 1 {
		t.Fatalf("after the truncation %d segments are left (%v) and %d retained; want the committed run's segment, retained", len(left), left, retained)
	}
	p.mu.Lock()
	_, ok := p.retained[left[0]]
	p.mu.Unlock()
	if !ok {
		t.Fatalf("segment %s is left but not retained", left[0])
	}
	if _, err := p.Read(ctx, committed, 0, 0, 1<<20); err != nil {
		t.Fatalf("the committed run's segment: %v", err)
	}
}
