package stream

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/boltstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// TestDeepPipelineNeverStalls: more runs in flight on one stream than
// MaxPendingRuns (here 500, with producer sequences) once held every ready
// run back while the index lagged, and nothing kicked the owner again until
// an unrelated session renewal ~10s later. Every append must settle
// promptly; on a stall the owner's state is printed.
func TestDeepPipelineNeverStalls(t *testing.T) {
	dir := t.TempDir()
	meta, _ := boltstore.Open(filepath.Join(dir, "m.db"), boltstore.Options{})
	fs, _ := fsstore.Open(filepath.Join(dir, "o"))
	ctx := context.Background()
	w, _ := objectwal.Open(ctx, objectwal.Config{Store: fs, Prefix: "wal/x"})
	c, err := Open(ctx, Config{Metadata: meta, ObjectWAL: w, WriterID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, _ := c.Create(ctx, "s", CreateOptions{})
	s, _ := c.AcquireSession(ctx, info.ID, SessionOptions{})
	for round := 0; round < 10; round++ {
		futs := make([]*AppendFuture, 500)
		for i := range futs {
			futs[i] = c.AppendAsync(s, AppendRequest{ExpectedStart: -1, Entries: []Entry{{Payload: []byte("x"), RecordCount: 1}},
				Sequence: &ProducerSequence{Mode: SequenceMonotonic, Producer: "p", FirstSeq: int64(round*500 + i), LastSeq: int64(round*500 + i)}})
		}
		t0 := time.Now()
		for i, f := range futs {
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := f.Wait(wctx)
			cancel()
			if err != nil {
				o := c.owner(info.ID)
				o.mu.Lock()
				m := o.m
				st := fmt.Sprintf("queue=%d head.End=%d pending=%d toIndex=%d confirmed=%d unsettled=%v fatal=%v", len(m.queue), m.head.End, len(m.head.Pending), len(m.toIndex), m.confirmedThrough, m.unsettled != nil, m.fatal)
				if len(m.queue) > 0 {
					st += fmt.Sprintf(" first op start=%d wal=%d sent=%v", m.queue[0].run.Start, m.queue[0].walState, m.queue[0].sent)
				}
				o.mu.Unlock()
				cm := o.cm
				cm.mu.Lock()
				dirty := o.kicked
				cm.mu.Unlock()
				t.Fatalf("round %d append %d stuck after %v: %v; owner %s dirty=%v", round, i, time.Since(t0), err, st, dirty)
			}
		}
	}
}
