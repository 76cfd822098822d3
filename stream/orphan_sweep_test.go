package stream_test

import (
	"fmt"
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
