// Command walkv replicates a key-value store through package wal: a producer
// writes put/delete operations into a log kept in a local object store
// (fsstore), one replica tails it from the start, a collector truncates the
// log behind a snapshot the first replica publishes, and a second replica
// bootstraps from that snapshot and catches up. Both replicas run their tail
// loops (Replica.Run) concurrently with the producer; at the end the program
// checks that both hold exactly the producer's state.
//
// It owns nothing beyond this demonstration and must never be used as a
// database: its snapshot format is plain JSON and its state lives in memory.
//
//	go run ./examples/walkv -dir /tmp/walkv -keys 2000
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/wal"
)

const manifestPath = "walkv/manifest"

// op is one record: "P key value" or "D key".
type op struct {
	del        bool
	key, value string
}

func encode(o op) []byte {
	if o.del {
		return []byte("D " + o.key)
	}
	return []byte("P " + o.key + " " + o.value)
}

func decode(b []byte) (op, error) {
	parts := strings.SplitN(string(b), " ", 3)
	switch {
	case len(parts) == 2 && parts[0] == "D":
		return op{del: true, key: parts[1]}, nil
	case len(parts) == 3 && parts[0] == "P":
		return op{key: parts[1], value: parts[2]}, nil
	}
	return op{}, fmt.Errorf("bad record %q", b)
}

type kv struct {
	mu   sync.Mutex
	data map[string]string
}

func (s *kv) apply(_ context.Context, _ uint64, o op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o.del {
		delete(s.data, o.key)
	} else {
		s.data[o.key] = o.value
	}
	return nil
}

func (s *kv) copy() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.data)
}

func main() {
	dir := flag.String("dir", "", "object store directory (default: a new temp dir)")
	keys := flag.Int("keys", 2000, "number of put operations")
	flag.Parse()
	if err := run(*dir, *keys); err != nil {
		log.Fatal(err)
	}
}

func run(dir string, keys int) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "walkv-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	store, err := fsstore.Open(filepath.Join(dir, "bucket"))
	if err != nil {
		return err
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	producer, err := wal.NewProducer(ctx, store, wal.ProducerConfig{ManifestPath: manifestPath, FlushInterval: 10 * time.Millisecond})
	if err != nil {
		return err
	}
	want := map[string]string{}
	write := func(from, to int) error {
		var last *wal.Durability
		for i := from; i < to; i++ {
			o := op{key: fmt.Sprintf("k%04d", i%500), value: fmt.Sprint(i)}
			if i%7 == 0 {
				o = op{del: true, key: o.key}
				delete(want, o.key)
			} else {
				want[o.key] = o.value
			}
			if last, err = producer.Append(ctx, [][]byte{encode(o)}, nil); err != nil {
				return err
			}
		}
		_, err := last.Wait(ctx) // commits are ordered: the last one covers all
		return err
	}

	// Replica 1 tails from the beginning, with a local cursor file.
	first := &kv{data: map[string]string{}}
	r1 := wal.NewReplica(store, wal.TypedApplier(decode, first.apply), wal.ReplicaConfig{
		ManifestPath: manifestPath, ReplicaID: "first", PollInterval: 5 * time.Millisecond,
		CursorPublishInterval: 10 * time.Millisecond,
		Cursor:                wal.NewFileCursorStore(filepath.Join(dir, "first.cursor")),
	})
	var wg sync.WaitGroup
	phase1, stopPhase1 := context.WithCancel(ctx)
	defer stopPhase1()
	errs := make(chan error, 2)
	tail := func(runCtx context.Context, r *wal.Replica) {
		wg.Go(func() {
			if err := r.Run(runCtx); !errors.Is(err, context.Canceled) {
				errs <- err
			}
		})
	}
	tail(phase1, r1)
	if err := write(0, keys/2); err != nil {
		return err
	}
	waitFor := func(r *wal.Replica, seq uint64) error {
		for r.Next() < seq {
			select {
			case err := <-errs:
				return err
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
		return nil
	}
	if err := waitFor(r1, uint64(keys/2)); err != nil {
		return err
	}

	// Replica 1 (paused at a known point) publishes a snapshot; the manifest
	// points at it; the collector truncates the log it covers.
	stopPhase1()
	wg.Wait()
	through := r1.Next() - 1
	snapKey := fmt.Sprintf("walkv/snapshots/%016x", through)
	snap, _ := json.Marshal(first.copy())
	if _, err := store.Put(ctx, snapKey, snap, objectstore.PutOptions{}); err != nil {
		return err
	}
	ms := wal.NewStore(store, manifestPath)
	for {
		m, ver, _, err := ms.Load(ctx)
		if err != nil {
			return err
		}
		m.SetSnapshot(wal.SnapshotPointer{Location: snapKey, ThroughSeq: through, CreatedUnixMs: time.Now().UnixMilli()})
		if err = ms.Commit(ctx, m, ver); err == nil {
			break
		} else if !errors.Is(err, objectstore.ErrPreconditionFailed) {
			return err
		}
	}
	gc, err := wal.NewCollector(store, wal.GCConfig{ManifestPath: manifestPath, Truncate: wal.TruncateToSnapshot, GracePeriod: time.Minute})
	if err != nil {
		return err
	}
	stats, err := gc.Collect(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("snapshot through %d published; collector truncated %d manifest entries\n", through, stats.TruncatedEntries)

	// Replica 2 bootstraps from the snapshot; both tail while writes go on.
	m, _, _, err := ms.Load(ctx)
	if err != nil {
		return err
	}
	raw, _, err := store.Get(ctx, m.Snapshot().Location)
	if err != nil {
		return err
	}
	second := &kv{data: map[string]string{}}
	if err := json.Unmarshal(raw, &second.data); err != nil {
		return err
	}
	r2 := wal.NewReplica(store, wal.TypedApplier(decode, second.apply), wal.ReplicaConfig{
		ManifestPath: manifestPath, ReplicaID: "second", PollInterval: 5 * time.Millisecond,
		CursorPublishInterval: 10 * time.Millisecond,
		StartAt:               m.Snapshot().ThroughSeq + 1,
	})
	phase2, stopPhase2 := context.WithCancel(ctx)
	defer stopPhase2()
	tail(phase2, r1)
	tail(phase2, r2)
	if err := write(keys/2, keys); err != nil {
		return err
	}
	if err := producer.Close(ctx); err != nil {
		return err
	}
	for _, r := range []*wal.Replica{r1, r2} {
		if err := waitFor(r, uint64(keys)); err != nil {
			return err
		}
	}
	stopPhase2()
	wg.Wait()
	for name, s := range map[string]*kv{"first": first, "second": second} {
		if got := s.copy(); !maps.Equal(got, want) {
			return fmt.Errorf("replica %s diverged: %d keys, want %d", name, len(got), len(want))
		}
	}
	fmt.Printf("%d operations replicated; both replicas hold the producer's %d keys\n", keys, len(want))
	return nil
}
