package wal_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/wal"
)

// kvOp is the application's record: the wal package never sees inside it.
type kvOp struct {
	Delete     bool
	Key, Value string
}

func encodeKV(op kvOp) []byte {
	b := []byte{0}
	if op.Delete {
		b[0] = 1
	}
	b = binary.AppendUvarint(b, uint64(len(op.Key)))
	b = append(b, op.Key...)
	return append(b, op.Value...)
}

func decodeKV(b []byte) (kvOp, error) {
	if len(b) < 1 {
		return kvOp{}, errors.New("empty kv record")
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || uint64(len(b)-1-w) < n {
		return kvOp{}, errors.New("bad kv record")
	}
	k := 1 + w + int(n)
	return kvOp{Delete: b[0] == 1, Key: string(b[1+w : k]), Value: string(b[k:])}, nil
}

// kvReplica is a key-value state machine fed by a wal.Replica.
type kvReplica struct {
	mu   sync.Mutex
	data map[string]string
	*wal.Replica
}

func newKVReplica(store objectstore.ObjectStore, id string, startAt uint64, data map[string]string) *kvReplica {
	kv := &kvReplica{data: data}
	// Idempotent put/delete: re-applying a segment after a crash is harmless.
	applier := wal.TypedApplier(decodeKV, func(_ context.Context, _ uint64, op kvOp) error {
		kv.mu.Lock()
		defer kv.mu.Unlock()
		if op.Delete {
			delete(kv.data, op.Key)
		} else {
			kv.data[op.Key] = op.Value
		}
		return nil
	})
	kv.Replica = wal.NewReplica(store, applier, wal.ReplicaConfig{
		ManifestPath: "kv/manifest",
		StartAt:      startAt,
		ReplicaID:    id, // published cursor: the collector keeps what this replica needs
		Cursor:       &wal.MemCursorStore{},
	})
	return kv
}

func (kv *kvReplica) snapshot() []byte {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	b, _ := json.Marshal(kv.data)
	return b
}

func (kv *kvReplica) String() string {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	var s []string
	for _, k := range slices.Sorted(maps.Keys(kv.data)) {
		s = append(s, k+"="+kv.data[k])
	}
	return fmt.Sprint(s)
}

// Example_keyValueReplication replicates a key-value store from a producer to
// two replicas through an object store. The second replica joins late and
// bootstraps from a snapshot the first one published, after a collector has
// truncated the log behind that snapshot.
func Example_keyValueReplication() {
	ctx := context.Background()
	store := memstore.New() // any objectstore.ObjectStore: fsstore, s3store, ...

	producer, err := wal.NewProducer(ctx, store, wal.ProducerConfig{
		ManifestPath:  "kv/manifest",
		FlushInterval: 5 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	defer producer.Close(ctx)
	put := func(ops ...kvOp) {
		var recs [][]byte
		for _, op := range ops {
			recs = append(recs, encodeKV(op))
		}
		d, err := producer.Append(ctx, recs, nil)
		if err != nil {
			panic(err)
		}
		rng, err := d.WaitRange(ctx) // committed: ordered, durable, visible
		if err != nil {
			panic(err) // outcome unknown: the records may or may not be in the log
		}
		fmt.Printf("committed sequences [%d, %d)\n", rng.First, rng.End())
	}

	put(kvOp{Key: "a", Value: "1"}, kvOp{Key: "b", Value: "2"})
	put(kvOp{Key: "c", Value: "3"})

	first := newKVReplica(store, "first", 0, map[string]string{})
	if _, err := first.Poll(ctx); err != nil {
		panic(err)
	}
	fmt.Println("first replica:", first)

	// The first replica publishes a snapshot of its state and points the
	// manifest at it (a CAS at the producer's epoch; the producer re-plans).
	through := first.Next() - 1
	snapKey := fmt.Sprintf("kv/snapshots/%016x", through)
	if _, err := store.Put(ctx, snapKey, first.snapshot(), objectstore.PutOptions{}); err != nil {
		panic(err)
	}
	manifest := wal.NewStore(store, "kv/manifest")
	for {
		m, ver, _, err := manifest.Load(ctx)
		if err != nil {
			panic(err)
		}
		m.SetSnapshot(wal.SnapshotPointer{Location: snapKey, ThroughSeq: through, CreatedUnixMs: time.Now().UnixMilli()})
		if err := manifest.Commit(ctx, m, ver); err == nil {
			break
		} else if !errors.Is(err, objectstore.ErrPreconditionFailed) {
			panic(err)
		}
	}

	// The collector truncates everything the snapshot covers (never past a
	// live replica's published cursor).
	gc, err := wal.NewCollector(store, wal.GCConfig{ManifestPath: "kv/manifest", Truncate: wal.TruncateToSnapshot})
	if err != nil {
		panic(err)
	}
	stats, err := gc.Collect(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("truncated entries:", stats.TruncatedEntries)

	put(kvOp{Key: "a", Delete: true}, kvOp{Key: "d", Value: "4"})

	// The second replica bootstraps from the snapshot and tails from there.
	m, _, _, err := manifest.Load(ctx)
	if err != nil {
		panic(err)
	}
	snap := m.Snapshot()
	raw, _, err := store.Get(ctx, snap.Location)
	if err != nil {
		panic(err)
	}
	restored := map[string]string{}
	if err := json.Unmarshal(raw, &restored); err != nil {
		panic(err)
	}
	second := newKVReplica(store, "second", snap.ThroughSeq+1, restored)
	for _, r := range []*kvReplica{first, second} {
		if _, err := r.Poll(ctx); err != nil {
			panic(err)
		}
	}
	fmt.Println("first replica:", first)
	fmt.Println("second replica:", second)
	// Output:
	// committed sequences [0, 2)
	// committed sequences [2, 3)
	// first replica: [a=1 b=2 c=3]
	// truncated entries: 2
	// committed sequences [3, 5)
	// first replica: [b=2 c=3 d=4]
	// second replica: [b=2 c=3 d=4]
}
