package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
)

// produceSegments writes n Appends, each committed before the next, so each
// lands in its own segment, and returns the manifest entries.
func produceSegments(t testing.TB, store objectstore.ObjectStore, n, perAppend int) []Entry {
	t.Helper()
	p := newTestProducer(t, store, testConfig())
	for i := range n {
		var recs [][]byte
		for k := range perAppend {
			recs = append(recs, []byte(fmt.Sprintf("r%d.%d", i, k)))
		}
		d, err := p.Append(testCtx(t), recs, nil)
		if err != nil {
			t.Fatal(err)
		}
		mustWait(t, d)
	}
	if err := p.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	m, _, _, err := NewStore(store, testManifest).Load(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	es, _ := m.Entries()
	if len(es) != n {
		t.Fatalf("%d entries, want %d", len(es), n)
	}
	return es
}

func flipBit(t testing.TB, store objectstore.ObjectStore, key string, bit int) {
	t.Helper()
	data, _, err := store.Get(testCtx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	data[bit/8] ^= 1 << (bit % 8)
	if _, err := store.Put(testCtx(t), key, data, objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// collector is an Applier recording what it saw and how often.
type collector struct {
	mu     sync.Mutex
	seqs   []uint64
	counts map[uint64]int
	fail   func(Record) error
}

func (c *collector) Apply(_ context.Context, rec Record) error {
	if c.fail != nil {
		if err := c.fail(rec); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[uint64]int{}
	}
	c.seqs = append(c.seqs, rec.Sequence)
	c.counts[rec.Sequence]++
	return nil
}

func TestReplicaStopsOnCorruptSegment(t *testing.T) {
	store := memstore.New()
	es := produceSegments(t, store, 5, 2)
	flipBit(t, store, es[2].Location, 77)
	var c collector
	r := NewReplica(store, &c, ReplicaConfig{ManifestPath: testManifest, PollInterval: time.Millisecond, Logger: quietLogger()})
	n, err := r.Poll(testCtx(t))
	if !errors.Is(err, ErrCorrupt) || n != 4 || r.Next() != es[2].Sequence {
		t.Fatalf("Poll applied %d, next %d, err %v", n, r.Next(), err)
	}
	// Run must stop, not spin: it returns ErrCorrupt long before ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Run(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Run: %v", err)
	}
	if len(c.seqs) != 4 {
		t.Fatalf("applied %v", c.seqs)
	}
}

func TestReplicaStopsOnCorruptManifest(t *testing.T) {
	store := memstore.New()
	produceSegments(t, store, 2, 1)
	flipBit(t, store, testManifest, 40)
	r := NewReplica(store, &collector{}, ReplicaConfig{ManifestPath: testManifest, Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Run(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Run: %v", err)
	}
}

// crashingCursor persists normally until Save call failAt; from then on every
// Save fails, as if the process died between apply and cursor save.
type crashingCursor struct {
	MemCursorStore
	failAt int // 1-based Save call that fails; 0 never
	saves  int
}

var errCrash = errors.New("simulated crash before cursor save")

func (c *crashingCursor) Save(ctx context.Context, next uint64) error {
	c.saves++
	if c.failAt > 0 && c.saves >= c.failAt {
		return errCrash
	}
	return c.MemCursorStore.Save(ctx, next)
}

func TestReplicaCrashBetweenApplyAndCursorSave(t *testing.T) {
	store := memstore.New()
	es := produceSegments(t, store, 4, 3)
	cursor := &crashingCursor{failAt: 3} // segment 2's save is lost
	var c collector
	r := NewReplica(store, &c, ReplicaConfig{ManifestPath: testManifest, Cursor: cursor, Logger: quietLogger()})
	if _, err := r.Poll(testCtx(t)); !errors.Is(err, errCrash) {
		t.Fatalf("first poll: %v", err)
	}
	// Restart: a new replica resumes from the persisted cursor.
	cursor.failAt = 0
	r2 := NewReplica(store, &c, ReplicaConfig{ManifestPath: testManifest, Cursor: cursor, Logger: quietLogger()})
	if _, err := r2.Poll(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(0); seq < 12; seq++ {
		want := 1
		if es[2].Contains(seq) {
			want = 2 // only the segment whose cursor save was lost
		}
		if c.counts[seq] != want {
			t.Fatalf("seq %d applied %d times, want %d (counts %v)", seq, c.counts[seq], want, c.counts)
		}
	}
	if next, _, _ := cursor.Load(testCtx(t)); next != 12 {
		t.Fatalf("cursor %d", next)
	}
}

func TestReplicaStartAtMidSegment(t *testing.T) {
	store := memstore.New()
	produceSegments(t, store, 2, 10)
	var c collector
	r := NewReplica(store, &c, ReplicaConfig{ManifestPath: testManifest, StartAt: 4, Logger: quietLogger()})
	n, err := r.Poll(testCtx(t))
	if err != nil || n != 16 || r.Next() != 20 {
		t.Fatalf("applied %d next %d err %v", n, r.Next(), err)
	}
	if c.seqs[0] != 4 || c.seqs[15] != 19 {
		t.Fatalf("applied %v", c.seqs)
	}
}

func TestReplicaTruncatedCursor(t *testing.T) {
	store := memstore.New()
	es := produceSegments(t, store, 3, 2)
	st := NewStore(store, testManifest)
	m, ver, _, _ := st.Load(testCtx(t))
	m.SetSnapshot(SnapshotPointer{Location: "snap/x", ThroughSeq: es[0].End() - 1})
	m.TruncateThrough(es[0].End() - 1)
	if err := st.Commit(testCtx(t), m, ver); err != nil {
		t.Fatal(err)
	}
	r := NewReplica(store, &collector{}, ReplicaConfig{ManifestPath: testManifest, Logger: quietLogger()})
	if err := r.Run(testCtx(t)); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Run: %v", err)
	}
	// Bootstrapping at the snapshot works.
	r = NewReplica(store, &collector{}, ReplicaConfig{ManifestPath: testManifest, StartAt: m.Snapshot().ThroughSeq + 1, Logger: quietLogger()})
	if n, err := r.Poll(testCtx(t)); err != nil || n != 4 {
		t.Fatalf("bootstrap poll: %d %v", n, err)
	}
}

func TestLegacyManifestsReplay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fixture string
		want    []logRecord
	}{
		{"v1", goldenManifestV1, []logRecord{{0, "hello", "ab"}, {0, "w", "ab"}, {1, "x", ""}, {1, "yz", ""}}},
		{"v2", goldenManifestV2, []logRecord{{0, "hello", "ab"}, {0, "w", "ab"}, {1, "x", ""}, {1, "yz", ""}}},
		{"v3", goldenManifestV3, []logRecord{{0, "hello", "ab"}, {0, "w", "ab"}, {1, "x", ""}, {2, "yz", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memstore.New()
			ctx := testCtx(t)
			for key, fx := range map[string]string{testManifest: tc.fixture, "s/0": goldenSegmentV1a, "s/1": goldenSegmentV1b} {
				if _, err := store.Put(ctx, key, hexFixture(t, fx), objectstore.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if got := readLog(t, store, testManifest); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("replay\n got %+v\nwant %+v", got, tc.want)
			}
			// A producer claims the legacy log, appends, and upgrades it to v4.
			p := newTestProducer(t, store, testConfig())
			d, _ := p.Append(ctx, [][]byte{[]byte("new1"), []byte("new2")}, nil)
			first := mustWait(t, d)
			next := tc.want[len(tc.want)-1].seq + 1
			if first != next {
				t.Fatalf("appended at %d, want %d", first, next)
			}
			raw, _, _ := store.Get(ctx, testManifest)
			if v := binary.LittleEndian.Uint16(raw[len(raw)-2:]); v != FooterVersion {
				t.Fatalf("manifest still at version %d", v)
			}
			want := append(tc.want, logRecord{next, "new1", ""}, logRecord{next + 1, "new2", ""})
			if got := readLog(t, store, testManifest); !reflect.DeepEqual(got, want) {
				t.Fatalf("replay after upgrade\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestReplicaPacingAndCursorSaves(t *testing.T) {
	store := memstore.New()
	produceSegments(t, store, 5, 2)
	cursor := &crashingCursor{}
	var c collector
	r := NewReplica(store, &c, ReplicaConfig{ManifestPath: testManifest, MaxRecordsPerPoll: 3, CursorSaveInterval: 2, Cursor: cursor, Logger: quietLogger()})
	var polls []int
	for {
		n, err := r.Poll(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		polls = append(polls, n)
	}
	if !reflect.DeepEqual(polls, []int{4, 4, 2}) {
		t.Fatalf("poll sizes %v", polls)
	}
	// Saves: per 2 segments plus one at the end of each pass that advanced:
	// pass 1: 1 (after 2 segs); pass 2: 1; pass 3: 1 (end) = 3.
	if cursor.saves != 3 {
		t.Fatalf("%d cursor saves", cursor.saves)
	}
}

func TestReplicaRunRetriesTransientErrors(t *testing.T) {
	inner := memstore.New()
	produceSegments(t, inner, 3, 1)
	fs := newFaultStore(inner)
	failures := 0
	fs.setRule(func(op, key string) fault {
		if op == "get" && failures < 4 {
			failures++
			return failClean
		}
		return pass
	})
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	c := &collector{}
	done := make(chan struct{})
	c.fail = func(rec Record) error {
		if rec.Sequence == 2 {
			defer close(done)
		}
		return nil
	}
	r := NewReplica(fs, c, ReplicaConfig{ManifestPath: testManifest, PollInterval: time.Millisecond, Logger: quietLogger()})
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	select {
	case <-done:
	case err := <-errc:
		t.Fatalf("Run stopped: %v", err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

func TestReplicaPublishesCursor(t *testing.T) {
	store := memstore.New()
	produceSegments(t, store, 2, 2)
	r := NewReplica(store, &collector{}, ReplicaConfig{ManifestPath: testManifest, ReplicaID: "east-1", CursorPublishInterval: time.Nanosecond, Logger: quietLogger()})
	if _, err := r.Poll(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	cs, err := readPublishedCursors(testCtx(t), store, testManifest)
	if err != nil || len(cs) != 1 || cs[0].replicaID != "east-1" || cs[0].next != 4 || cs[0].err != nil {
		t.Fatalf("published %+v %v", cs, err)
	}
	bad := NewReplica(store, &collector{}, ReplicaConfig{ManifestPath: testManifest, ReplicaID: "a/b"})
	if _, err := bad.Poll(testCtx(t)); err == nil {
		t.Fatal("replica ID with '/' accepted")
	}
}

func TestFileCursorStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cursor")
	fc := NewFileCursorStore(path)
	if _, ok, err := fc.Load(testCtx(t)); ok || err != nil {
		t.Fatalf("empty load: %v %v", ok, err)
	}
	if err := fc.Save(testCtx(t), 0x0102030405060708); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if len(raw) != 8 || binary.LittleEndian.Uint64(raw) != 0x0102030405060708 {
		t.Fatalf("file bytes %x", raw)
	}
	if v, ok, err := fc.Load(testCtx(t)); !ok || err != nil || v != 0x0102030405060708 {
		t.Fatalf("load %x %v %v", v, ok, err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatal("temp file left behind")
	}
	if err := os.WriteFile(path, []byte{1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fc.Load(testCtx(t)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short file: %v", err)
	}
}
