package kstore

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

// Regression tests for the two transaction-index bugs the kstore
// simulation found (stream/sim_kstore_test.go; planted bugs
// checkpoint-after-handover and index-ignores-foreign-session), replayed
// step by step on the in-memory stores with a hand-driven membership and
// runtime (the seams the simulation uses).

// handCluster is a kstore.Cluster whose view (the owner's name) the test
// sets; it acquires sessions with AuthorityEpoch = *epoch, so a new owner
// fences the previous one.
type handCluster struct {
	me      string
	view    *string
	epoch   *int64
	storage stream.Storage
	writers map[stream.ID]stream.Session
}

func (c *handCluster) Writer(ctx context.Context, id stream.ID, name string) (stream.Session, error) {
	if *c.view != c.me {
		return stream.Session{}, &cluster.NotOwnerError{Key: name}
	}
	if s, ok := c.writers[id]; ok {
		return s, nil
	}
	s, err := c.storage.AcquireSession(ctx, id, stream.SessionOptions{WriterID: c.me, AuthorityEpoch: *c.epoch, StealExpired: true})
	if err == nil {
		c.writers[id] = s
	}
	return s, err
}
func (c *handCluster) Lost(s stream.Session) { delete(c.writers, s.Stream) }
func (c *handCluster) Release(ctx context.Context, id stream.ID) error {
	delete(c.writers, id)
	return nil
}
func (c *handCluster) OwnsStream(name string) bool { return *c.view == c.me }
func (c *handCluster) OwnerOf(name string) (cluster.Broker, bool) {
	return cluster.Broker{NodeID: *c.view}, true
}
func (c *handCluster) Changes() <-chan struct{} { return nil }

// handRuntime runs goroutines (the topic watch) for real and keeps timers
// (the checkpoint flushes) for the test to fire.
type handRuntime struct{ timers []func() }

func (r *handRuntime) AfterFunc(d time.Duration, f func()) func() bool {
	r.timers = append(r.timers, f)
	return func() bool { return false }
}
func (r *handRuntime) Go(f func()) { go f() }

func (r *handRuntime) fire() {
	fs := r.timers
	r.timers = nil
	for _, f := range fs {
		f()
	}
}

func handStore(t *testing.T, streams stream.Storage, meta *memstore.Store, me string, view *string, epoch *int64) (*Store, *handRuntime) {
	t.Helper()
	rt := &handRuntime{}
	s, err := New(streams, meta, Config{Cluster: &handCluster{me: me, view: view, epoch: epoch, storage: streams, writers: map[stream.ID]stream.Session{}},
		Runtime: rt, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.fire(); _ = s.Close(context.Background()) })
	return s, rt
}

func stableOffset(t *testing.T, s *Store, p *Partition) (lso, hwm int64) {
	t.Helper()
	ctx := context.Background()
	_, hwm, err := s.Bounds(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	lso, err = s.StableOffset(ctx, p, hwm)
	if err != nil {
		t.Fatal(err)
	}
	return lso, hwm
}

// TestTxnCheckpointNotWrittenAfterHandover: leader a finishes a marker and
// schedules its checkpoint; the partition moves to b, whose producer opens
// a transaction; a's timer fires. a must not write: its checkpoint would
// say nothing is open below the end, past b's batch, and the next leader
// (c, after b died before its own checkpoint) would lose b's transaction.
func TestTxnCheckpointNotWrittenAfterHandover(t *testing.T) {
	ctx := context.Background()
	streams, meta := streammem.New(), memstore.New()
	owner, epoch := "a", int64(1)
	a, rtA := handStore(t, streams, meta, "a", &owner, &epoch)
	if _, err := a.CreateTopic(ctx, "tx", 1, nil, false); err != nil {
		t.Fatal(err)
	}
	_, p, _ := a.Partition(ctx, "tx", 0)
	appendBatch(t, a, p, txnBatch(1000, 0, 1), true, 1000)
	if _, err := a.AppendMarker(ctx, p, 1000, 0, true, 0); err != nil {
		t.Fatal(err)
	}
	if len(rtA.timers) != 1 {
		t.Fatalf("a scheduled %d checkpoints, want 1", len(rtA.timers))
	}
	owner, epoch = "b", 2
	b, _ := handStore(t, streams, meta, "b", &owner, &epoch)
	_, pb, _ := b.Partition(ctx, "tx", 0)
	open := appendBatch(t, b, pb, txnBatch(2000, 0, 2), true, 2000) // open, no marker yet
	rtA.fire()                                                      // a's delayed checkpoint
	owner, epoch = "c", 3                                           // b dies before its own
	c, _ := handStore(t, streams, meta, "c", &owner, &epoch)
	_, pc, _ := c.Partition(ctx, "tx", 0)
	if lso, hwm := stableOffset(t, c, pc); lso != open {
		t.Fatalf("new leader's last stable offset %d (high watermark %d), want %d: transaction 2000 at %d lost", lso, hwm, open, open)
	}
}

// TestTxnIndexCatchesUpWithPreviousWriter: b leads the partition in its
// view but has not taken the session; a, whose view lags, still holds it
// and opens a transaction after b loaded its index. b's last stable offset
// must not pass a's batch.
func TestTxnIndexCatchesUpWithPreviousWriter(t *testing.T) {
	for _, withCheckpoint := range []bool{true, false} {
		ctx := context.Background()
		streams, meta := streammem.New(), memstore.New()
		viewA, viewB, epoch := "a", "a", int64(1)
		a, _ := handStore(t, streams, meta, "a", &viewA, &epoch)
		b, _ := handStore(t, streams, meta, "b", &viewB, &epoch)
		if _, err := a.CreateTopic(ctx, "tx", 1, nil, false); err != nil {
			t.Fatal(err)
		}
		_, p, _ := a.Partition(ctx, "tx", 0)
		if withCheckpoint {
			appendBatch(t, a, p, txnBatch(1000, 0, 1), true, 1000) // creates the checkpoint record
			if _, err := a.AppendMarker(ctx, p, 1000, 0, true, 0); err != nil {
				t.Fatal(err)
			}
		} else {
			appendBatch(t, a, p, plainBatch(1), false, -1) // a session, no checkpoint record
		}
		viewB = "b" // b now leads in its view; a's view lags
		_, pb, _ := b.Partition(ctx, "tx", 0)
		if lso, hwm := stableOffset(t, b, pb); lso != hwm {
			t.Fatalf("checkpoint %v: lso %d before any open transaction, hwm %d", withCheckpoint, lso, hwm)
		}
		open := appendBatch(t, a, p, txnBatch(3000, 0, 2), true, 3000)
		appendBatch(t, a, p, plainBatch(1), false, -1)
		if lso, hwm := stableOffset(t, b, pb); lso != open {
			t.Fatalf("checkpoint %v: b's last stable offset %d (hwm %d) passes a's open transaction at %d", withCheckpoint, lso, hwm, open)
		}
		if ab, err := b.OpenTxns(ctx, pb); err != nil || len(ab) != 1 || ab[0].ProducerID != 3000 {
			t.Fatalf("checkpoint %v: b's open transactions %+v %v", withCheckpoint, ab, err)
		}
	}
}
