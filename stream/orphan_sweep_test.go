package stream_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Orphan generation objects are swept periodically, not only once per
// process: an unnamed generation object (numbered below the head's
// NextGen, older than the grace period) that appears after the stream's
// first sweep is deleted by a later pass once OrphanSweepInterval passed;
// the published generations stay and read back.
func TestOrphanGenerationsSweptPeriodically(t *testing.T) {
	e := newLCEnv(t)
	e.lc.OrphanSweepInterval = 100 * time.Millisecond
	c := e.open(t, "b1")
	ctx := ctxT(t)
	info, s := createWithSession(ctx, t, c, "orphans", "")
	want := appendN(t, c, s, 0, 300)
	waitFor(t, "a published generation", func() bool { return c.LifecycleStats().Materialized > 0 })
	// The first passes sweep the stream (nothing unnamed yet).
	for i := 0; i < 3; i++ {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	published := len(e.keys(t, "gen/"+info.ID.String()+"/"))
	// A lost publication's object: generation 0's range, another nonce.
	orphan := fmt.Sprintf("gen/%s/%020d-%020d-g0-%016x", info.ID, 0, 10, uint64(0xdeadbeef))
	if _, err := e.objects.Put(ctx, orphan, []byte("orphan"), objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := func() bool {
		for _, k := range e.keys(t, "gen/"+info.ID.String()+"/") {
			if k == orphan {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(20 * time.Second)
	for !gone() {
		if time.Now().After(deadline) {
			t.Fatalf("orphan %s not swept; pending %+v", orphan, c.GCStatus().Pending)
		}
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	left := e.keys(t, "gen/"+info.ID.String()+"/")
	if len(left) < published || strings.Contains(strings.Join(left, " "), "deadbeef") {
		t.Fatalf("generation objects after the sweep: %v (published %d)", left, published)
	}
	readAll(t, c, info.ID, 0, want)
}

// unlistable makes List fail for the keys in bad the way fsstore does for
// an object whose stored header is corrupt: the error names the key and
// the listing goes on.
type unlistable struct {
	objectstore.ObjectStore
	bad map[string]bool
}

func (s unlistable) List(ctx context.Context, prefix string) iter.Seq2[objectstore.ObjectInfo, error] {
	return func(yield func(objectstore.ObjectInfo, error) bool) {
		for info, err := range s.ObjectStore.List(ctx, prefix) {
			if err == nil && s.bad[info.Key] {
				info, err = objectstore.ObjectInfo{Key: info.Key}, fmt.Errorf("%q: %w: header checksum mismatch", info.Key, objectstore.ErrCorrupt)
			}
			if !yield(info, err) {
				return
			}
		}
	}
}

// TestOrphanSweepSkipsUnreadableObject: a generation object the listing
// cannot read sorts before an orphan; the sweep must keep the unreadable
// one (reported as pending, counted), still delete the orphan after it, and
// the GC pass must not fail. Before, the sweep returned at the listing
// error: every pass failed for the stream and no orphan after it was ever
// swept.
func TestOrphanSweepSkipsUnreadableObject(t *testing.T) {
	e := newLCEnv(t)
	e.lc.OrphanSweepInterval = 100 * time.Millisecond
	mem := e.objects
	bad := map[string]bool{}
	e.objects = unlistable{ObjectStore: mem, bad: bad}
	c := e.open(t, "b1")
	ctx := ctxT(t)
	info, s := createWithSession(ctx, t, c, "unreadable", "")
	appendN(t, c, s, 0, 300)
	waitFor(t, "a published generation", func() bool { return c.LifecycleStats().Materialized > 0 })
	corrupt := fmt.Sprintf("gen/%s/%020d-%020d-g0-%016x", info.ID, 0, 10, uint64(1))
	orphan := fmt.Sprintf("gen/%s/%020d-%020d-g0-%016x", info.ID, 0, 10, uint64(0xdeadbeef))
	for _, k := range []string{corrupt, orphan} {
		if _, err := mem.Put(ctx, k, []byte("orphan"), objectstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bad[corrupt] = true
	exists := func(k string) bool {
		_, err := mem.Head(ctx, k)
		return err == nil
	}
	deadline := time.Now().Add(20 * time.Second)
	for exists(orphan) {
		if time.Now().After(deadline) {
			t.Fatalf("orphan %s not swept; pending %+v", orphan, c.GCStatus().Pending)
		}
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatalf("GC pass: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !exists(corrupt) {
		t.Fatal("the unreadable object was deleted")
	}
	if _, err := c.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	st := c.GCStatus()
	found := false
	for _, p := range st.Pending {
		if p.Unit == corrupt && strings.Contains(p.Reason, "unreadable, kept") {
			found = true
		}
	}
	if !found || st.Stats.GCUnreadable == 0 {
		t.Fatalf("pending %+v, unreadable counted %d: want the unreadable object reported and counted", st.Pending, st.Stats.GCUnreadable)
	}
}
