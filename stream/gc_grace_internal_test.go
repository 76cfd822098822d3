package stream

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	objmem "github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/stream/objectwal"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// slowJudgeWAL is the Object WAL with a judge that takes a while: the
// test's clock moves on by gap inside the first judge call that returns
// a verdict after armed is set (the head reads of a real judge take
// milliseconds; here, enough to see).
type slowJudgeWAL struct {
	*objectwal.Provider
	rt    *tickRuntime
	gap   time.Duration
	armed bool // only touched on the passes' goroutine (CollectGarbage here)
}

func (w *slowJudgeWAL) Reclaim(ctx context.Context, judge provider.Judge, opts provider.ReclaimOptions) (provider.ReclaimReport, error) {
	return w.Provider.Reclaim(ctx, func(ctx context.Context, runs []provider.RunRef) ([]provider.Verdict, error) {
		v, err := judge(ctx, runs)
		if w.armed {
			w.armed = false
			w.rt.advance(w.gap)
		}
		return v, err
	}, opts)
}

// TestGCGraceStartsAfterTheJudge: the core hands its providers a clock to
// read after the judge, so a segment's grace starts when the pass that
// found it retired had its verdict, not when the pass began. With the
// clock moving on by gap inside that judge call, a pass at its start +
// grace keeps the segments and one at start + gap + grace deletes them.
func TestGCGraceStartsAfterTheJudge(t *testing.T) {
	ctx := context.Background()
	rt := &tickRuntime{at: time.Unix(1_700_000_000, 0)}
	objs := objmem.New()
	ow, err := objectwal.Open(ctx, objectwal.Config{Store: objs, Prefix: "wal/b1", FlushInterval: time.Millisecond, TruncateInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const grace, gap = 2 * time.Second, 500 * time.Millisecond
	w := &slowJudgeWAL{Provider: ow, rt: rt, gap: gap}
	c, err := Open(ctx, Config{Metadata: memstore.New(), ObjectWAL: w, ObjectStore: objs, WriterID: "b1",
		RetentionInterval: 100 * time.Hour, runtime: rt,
		Lifecycle: LifecycleConfig{GCInterval: time.Hour, GCGrace: grace, DisableMaterialization: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Create(ctx, "s", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.AcquireSession(ctx, info.ID, SessionOptions{WriterID: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for i := 0; i < 4; i++ {
		r, err := c.Append(ctx, s, AppendRequest{Entries: []Entry{{Payload: []byte(strings.Repeat("x", 1000)), RecordCount: 1}}, ExpectedStart: -1})
		if err != nil {
			t.Fatal(err)
		}
		end = r.End
	}
	segments := func() int {
		n := 0
		for _, err := range objs.List(ctx, "wal/b1/seg/") {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	n := segments()
	if n == 0 {
		t.Fatal("no segment written")
	}
	// Every segment out of the live manifest (the truncator runs on real
	// time) and kept for its runs.
	for i := 0; ; i++ {
		st, err := c.CollectGarbage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.PendingCount == n {
			break
		}
		if i == 2000 {
			t.Fatalf("%d of %d segments retained", st.PendingCount, n)
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Trim(ctx, info.ID, end); err != nil { // its kicked pass waits for rt.fire: never here
		t.Fatal(err)
	}
	start := rt.now()
	w.armed = true
	st, err := c.CollectGarbage(ctx) // finds them retired; the clock moves on inside its judge
	if err != nil {
		t.Fatal(err)
	}
	if st.GraceBytes == 0 || !strings.Contains(st.Pending[0].Reason, "grace period ends in 2s") {
		t.Fatalf("pass that found the segments retired: pending %+v, want the grace ending 2s after the judge", st.Pending)
	}
	rt.advance(start.Add(grace).Sub(rt.now()))
	if _, err := c.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if got := segments(); got != n {
		t.Fatalf("%d of %d segments deleted %v after the judge found them retired (grace %v)", n-got, n, grace-gap, grace)
	}
	rt.advance(gap)
	if _, err := c.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if got := segments(); got != 0 {
		t.Fatalf("%d of %d segments left once the grace passed", got, n)
	}
}
