package boltstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nereusstream/nereus-go/metadata"
)

func openTest(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (s *Store) queuedRequests() int { return s.queue.Len() }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A transaction held open by the committer must not block readers, and the
// writes queued behind it commit together in the next transaction.
func TestReadersNotBlockedAndGroupCommit(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var armed atomic.Bool
	opts := Options{}
	opts.testHookInTxn = func() {
		if armed.CompareAndSwap(true, false) {
			entered <- struct{}{}
			<-release
		}
	}
	s := openTest(t, filepath.Join(t.TempDir(), "m.db"), opts)
	ctx := context.Background()
	v0, err := s.Put(ctx, "seed", []byte("x"), metadata.NotExists)
	if err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	armed.Store(true)

	blockerDone := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, "blocker", []byte("x"), metadata.NotExists)
		blockerDone <- err
	}()
	<-entered // the committer is inside a write transaction now

	if r, err := s.Get(ctx, "seed"); err != nil || r.Version != v0 {
		t.Fatalf("Get during a write transaction: %+v %v", r, err)
	}
	if recs, err := s.RangeScan(ctx, "", "z", 0); err != nil || len(recs) != 1 {
		t.Fatalf("RangeScan during a write transaction: %v %v", recs, err)
	}
	if _, err := s.Get(ctx, "blocker"); !errors.Is(err, metadata.ErrKeyNotFound) {
		t.Fatalf("uncommitted write visible: %v", err)
	}

	const writers = 63
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Put(ctx, fmt.Sprintf("w/%02d", i), []byte("x"), metadata.NotExists)
			errs <- err
		}()
	}
	waitFor(t, "63 queued writes", func() bool { return s.queuedRequests() == writers })
	close(release)
	if err := <-blockerDone; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	after := s.Stats()
	if got := after.Commits - before.Commits; got != 2 {
		t.Fatalf("%d commits for 1 blocker + %d queued writers, want 2", got, writers)
	}
	if got := after.Requests - before.Requests; got != writers+1 {
		t.Fatalf("requests %d", got)
	}
}

// One Batch call is one transaction whatever its size; MaxBatchOps only
// stops coalescing.
func TestLargeBatchIsOneTransaction(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "m.db"), Options{MaxBatchOps: 100})
	ctx := context.Background()
	const n = 10000
	ops := make([]metadata.Op, n)
	for i := range ops {
		ops[i] = metadata.Op{Kind: metadata.OpPut, Key: fmt.Sprintf("h/%06d", i), Value: []byte("head"), Expected: metadata.NotExists}
	}
	before := s.Stats()
	res, err := s.Batch(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	after := s.Stats()
	if after.Commits-before.Commits != 1 || after.Ops-before.Ops != n {
		t.Fatalf("commits %d ops %d, want 1 and %d", after.Commits-before.Commits, after.Ops-before.Ops, n)
	}
	// Head CAS round: every third expectation is stale; the others apply.
	for i := range ops {
		ops[i].Expected = res[i].Version
		if i%3 == 0 {
			ops[i].Expected = res[i].Version + 1_000_000
		}
	}
	res2, err := s.Batch(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res2 {
		want := metadata.Applied
		if i%3 == 0 {
			want = metadata.Conflict
		}
		if metadata.Classify(r.Err) != want {
			t.Fatalf("op %d: %v", i, r.Err)
		}
	}
	if got := s.Stats().Commits - after.Commits; got != 1 {
		t.Fatalf("second batch took %d commits", got)
	}
}

// A flipped byte in a stored record is detected and never served.
func TestCorruptRecordNotServed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Put(ctx, "good", []byte("value"), metadata.NotExists); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "bad", []byte("value"), metadata.NotExists); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKV)
		v := append([]byte{}, b.Get([]byte("bad"))...)
		v[len(v)-1] ^= 0x01
		return b.Put([]byte("bad"), v)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path, Options{})
	if _, err := s.Get(ctx, "bad"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get of corrupt record: %v, want ErrCorrupt", err)
	}
	if _, err := s.RangeScan(ctx, "", "z", 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("RangeScan over corrupt record: %v, want ErrCorrupt", err)
	}
	if _, err := s.Put(ctx, "bad", []byte("x"), metadata.AnyVersion); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Put over corrupt record: %v, want ErrCorrupt", err)
	}
	if r, err := s.Get(ctx, "good"); err != nil || string(r.Value) != "value" {
		t.Fatalf("good record: %+v %v", r, err)
	}
}

// Versions and data survive a clean reopen; session IDs are not reused.
func TestReopenKeepsCounter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	ctx := context.Background()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v1, err := s.Put(ctx, "k", []byte("1"), metadata.NotExists)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := s.Put(ctx, "gone", []byte("1"), metadata.NotExists)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "gone", v2); err != nil {
		t.Fatal(err)
	}
	sess1, err := s.NewSession(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path, Options{})
	if r, err := s.Get(ctx, "k"); err != nil || r.Version != v1 {
		t.Fatalf("after reopen: %+v %v", r, err)
	}
	v3, err := s.Put(ctx, "gone", []byte("2"), metadata.NotExists)
	if err != nil || v3 <= v2 {
		t.Fatalf("recreated key after reopen: version %d (deleted at %d), %v", v3, v2, err)
	}
	sess2, err := s.NewSession(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if sess2.ID() == sess1.ID() {
		t.Fatalf("session ID %d reused after reopen", sess2.ID())
	}
}
