package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/stream"
)

var viewSeeds = flag.Int("view.seeds", 8, "seeds of TestCompactedViewMatchesModel")

// kvRec is one record of the test's payload format: an entry's payload is a
// JSON list of records, each at offset entry.Offset+D; V nil = tombstone.
type kvRec struct {
	D int     `json:"d"`
	K string  `json:"k"`
	V *string `json:"v,omitempty"`
}

// kvCompactor is a Kafka-like compactor over the test format: last record
// per key, tombstones dropped once older than horizon, a key map bounded by
// maxKeys (Scan stops when a new key would not fit).
type kvCompactor struct {
	latest  map[string]int64
	maxKeys int
	horizon int64
	// replaces makes the view replace the lossless log below the cleaned
	// point (stream.LosslessReplacer), as Kafka's compact-only topics do.
	replaces bool
}

func (k *kvCompactor) ReplacesLossless() bool { return k.replaces }

// recleanCompactor is a kvCompactor that asks for a pass over the view
// alone at recleanAt (stream.Recleaner).
type recleanCompactor struct {
	kvCompactor
	recleanAt int64
}

func (k *recleanCompactor) RecleanAtMs() int64 { return k.recleanAt }

func decodeKV(t testing.TB, p []byte) []kvRec {
	var rs []kvRec
	if err := json.Unmarshal(p, &rs); err != nil {
		t.Fatalf("payload %q: %v", p, err)
	}
	return rs
}

func (k *kvCompactor) Scan(e stream.ReadEntry) (bool, error) {
	var rs []kvRec
	if err := json.Unmarshal(e.Payload, &rs); err != nil {
		return false, err
	}
	fresh := 0
	for _, r := range rs {
		if _, ok := k.latest[r.K]; !ok {
			fresh++
		}
	}
	if len(k.latest)+fresh > k.maxKeys && len(k.latest) > 0 {
		return false, nil
	}
	for _, r := range rs {
		k.latest[r.K] = e.Offset + int64(r.D)
	}
	return true, nil
}

func (k *kvCompactor) SafeEnd(scanned int64) int64 { return scanned }

func (k *kvCompactor) Rewrite(e stream.ReadEntry, dirty bool) ([]byte, error) {
	var rs, kept []kvRec
	if err := json.Unmarshal(e.Payload, &rs); err != nil {
		return nil, err
	}
	for _, r := range rs {
		off := e.Offset + int64(r.D)
		if l, ok := k.latest[r.K]; ok && l > off {
			continue
		}
		if r.V == nil && e.Timestamp < k.horizon {
			continue
		}
		kept = append(kept, r)
	}
	if len(kept) == 0 {
		return nil, nil
	}
	return json.Marshal(kept)
}

// TestCompactedViewMatchesModel: for every seed, random keyed appends
// (multi-record entries, tombstones), compaction passes with random bounds
// and key-map limits, retention trims and GC passes interleaved; after
// every pass ReadView from the start equals the model — below the cleaned
// point the last record per key (tombstones only while younger than the
// horizon), above it every record — with the original offsets; Read still
// returns every lossless record; replaced view objects are collected, and
// a deleted stream leaves no view object or record.
func TestCompactedViewMatchesModel(t *testing.T) {
	for seed := 1; seed <= *viewSeeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runViewSeed(t, uint64(seed), false) })
	}
}

// TestCoveringViewMatchesModel is TestCompactedViewMatchesModel with a
// compactor whose view replaces the lossless log (Kafka's compact-only
// topics): after every published pass the stream's lossless start is the
// cleaned point, Read below it is out of range, and ReadView from the
// view's start (0, never trimmed) still equals the model; ViewBounds
// reports that start.
func TestCoveringViewMatchesModel(t *testing.T) {
	for seed := 1; seed <= *viewSeeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runViewSeed(t, uint64(seed), true) })
	}
}

type modelRec struct {
	k  string
	v  *string
	ts int64
}

func runViewSeed(t *testing.T, seed uint64, covering bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 7))
	env := newLCEnv(t)
	env.lc.GenerationBytes = 2 << 10 // several view objects per view
	c := env.open(t, "w1")
	info, s := createWithSession(ctx, t, c, "view-model", "w1")
	const kind = "test-compact"
	model := map[int64]modelRec{} // every lossless record by offset
	var end, start int64
	var horizon, applied int64
	nkeys := 3 + rng.IntN(30)
	for round := 0; round < 12; round++ {
		// Appends.
		for i := 0; i < 5+rng.IntN(40); i++ {
			n := 1 + rng.IntN(4)
			var rs []kvRec
			ts := int64(round*100 + rng.IntN(100))
			for d := 0; d < n; d++ {
				r := kvRec{D: d, K: fmt.Sprintf("k%d", rng.IntN(nkeys))}
				if rng.IntN(5) > 0 {
					v := fmt.Sprintf("v%d-%d", round, rng.IntN(1000))
					r.V = &v
				}
				rs = append(rs, r)
				model[end+int64(d)] = modelRec{k: r.K, v: r.V, ts: ts}
			}
			p, _ := json.Marshal(rs)
			res, err := c.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1,
				Entries: []stream.Entry{{Payload: p, RecordCount: uint32(n), Timestamp: ts}}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Start != end {
				t.Fatalf("append at %d, expected %d", res.Start, end)
			}
			end = res.End
		}
		// Sometimes retention (an explicit trim; not of a covered stream:
		// its start is the view's business, the Kafka adapter refuses
		// DeleteRecords on compact-only topics as Kafka does).
		if !covering && rng.IntN(5) == 0 {
			start = min(end, start+int64(rng.IntN(20)))
			if err := c.Trim(ctx, info.ID, start); err != nil {
				t.Fatal(err)
			}
		}
		// A compaction pass up to a random point.
		horizon = max(horizon, int64(round*100-150))
		upTo := start + rng.Int64N(end-start+1)
		cmp := &kvCompactor{latest: map[string]int64{}, maxKeys: 1 + rng.IntN(nkeys+3), horizon: horizon, replaces: covering}
		st, err := c.Compact(ctx, info.ID, kind, upTo, cmp)
		if err != nil {
			t.Fatalf("round %d: compact: %v", round, err)
		}
		if st.Published {
			applied = horizon // tombstones go only when a pass runs
		}
		if rng.IntN(2) == 0 {
			time.Sleep(60 * time.Millisecond) // past the GC grace, so replaced objects go
			if _, err := c.CollectGarbage(ctx); err != nil {
				t.Fatal(err)
			}
		}
		v, err := c.DescribeView(ctx, info.ID, kind)
		if err != nil {
			t.Fatal(err)
		}
		checkView(t, ctx, c, info.ID, kind, model, start, end, v, applied)
		if covering {
			checkCovered(t, ctx, c, info.ID, kind, v, end)
		}
	}
	// The lossless stream is untouched by views (a covering one's from
	// its cleaned point).
	if covering {
		v, _ := c.DescribeView(ctx, info.ID, kind)
		start = v.Through
	}
	checkLossless(t, ctx, c, info.ID, model, start, end)
	// Replaced view objects are collected; only the current view's remain.
	time.Sleep(60 * time.Millisecond)
	for i := 0; i < 2; i++ {
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := c.DescribeView(ctx, info.ID, kind)
	if got := len(env.keys(t, "view/")); v.Exists && got != v.Objects {
		t.Fatalf("%d view objects stored, the view has %d", got, v.Objects)
	}
	// A deleted stream leaves no view object and no view record.
	if err := c.Delete(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5 && len(env.keys(t, "view/")) > 0; i++ {
		time.Sleep(60 * time.Millisecond)
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if left := env.keys(t, "view/"); len(left) > 0 {
		t.Fatalf("view objects left after delete: %v", left)
	}
	recs, err := env.meta.RangeScan(ctx, "s/v/", "s/v/\xff", 0)
	if err != nil || len(recs) > 0 {
		t.Fatalf("view records left after delete: %d (%v)", len(recs), err)
	}
}

// readKV reads the test-format records from start to end through read.
func readKV(t *testing.T, ctx context.Context, read func(from int64) (stream.ReadResult, error), start, end int64) map[int64]kvRec {
	got := map[int64]kvRec{}
	next := start
	for i := 0; next < end; i++ {
		if i > 10000 {
			t.Fatal("no progress")
		}
		res, err := read(next)
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		if len(res.Entries) == 0 {
			t.Fatalf("read at %d (end %d) returned nothing", next, end)
		}
		for _, e := range res.Entries {
			if e.Offset+int64(e.RecordCount) <= next && e.Offset < start {
				t.Fatalf("entry [%d,+%d) before the read offset %d", e.Offset, e.RecordCount, next)
			}
			for _, r := range decodeKV(t, e.Payload) {
				o := e.Offset + int64(r.D)
				if _, dup := got[o]; dup {
					t.Fatalf("offset %d returned twice", o)
				}
				if o >= start {
					got[o] = r
				}
			}
		}
		next = res.Next
	}
	return got
}

func checkView(t *testing.T, ctx context.Context, c *stream.Core, id stream.ID, kind string, model map[int64]modelRec, start, end int64, v stream.ViewInfo, horizon int64) {
	t.Helper()
	through := max(v.Through, start)
	got := readKV(t, ctx, func(from int64) (stream.ReadResult, error) {
		return c.ReadView(ctx, id, kind, from, stream.ReadOptions{MaxBytes: 300 + int(from%7)*100})
	}, start, end)
	for o := start; o < end; o++ {
		m := model[o]
		r, ok := got[o]
		want := true
		if o < through {
			// Last record per key in [0, through) (a later record of the key
			// below the start still supersedes: it was compacted earlier).
			for p := o + 1; p < through; p++ {
				if model[p].k == m.k {
					want = false
					break
				}
			}
			if want && m.v == nil && m.ts < horizon {
				want = false
			}
		}
		if ok != want {
			t.Fatalf("offset %d (key %s, tombstone %v, ts %d; through %d, start %d, horizon %d): in view %v, model says %v",
				o, m.k, m.v == nil, m.ts, through, start, horizon, ok, want)
		}
		if ok && (r.K != m.k || (r.V == nil) != (m.v == nil) || r.V != nil && *r.V != *m.v) {
			t.Fatalf("offset %d: view has %+v, model %+v", o, r, m)
		}
	}
}

// checkCovered: once a covering view is published, the lossless stream
// starts at its cleaned point and readers of the view see its start.
func checkCovered(t *testing.T, ctx context.Context, c *stream.Core, id stream.ID, kind string, v stream.ViewInfo, end int64) {
	t.Helper()
	in, err := c.Describe(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Exists {
		if in.StartOffset != 0 {
			t.Fatalf("no view yet, lossless start %d", in.StartOffset)
		}
		return
	}
	if !v.Covers || v.Start != 0 || in.StartOffset != v.Through {
		t.Fatalf("covering view %+v, lossless start %d: want a covering view from 0 and the lossless start at its cleaned point", v, in.StartOffset)
	}
	vs, ve, err := c.ViewBounds(ctx, id, kind)
	if err != nil || vs != 0 || ve != end {
		t.Fatalf("ViewBounds = [%d, %d) %v, want [0, %d)", vs, ve, err, end)
	}
	if v.Through > 0 {
		if _, err := c.Read(ctx, id, 0, stream.ReadOptions{}); !errors.Is(err, stream.ErrOffsetOutOfRange) {
			t.Fatalf("lossless Read(0) below the reclaimed start %d: %v", in.StartOffset, err)
		}
	}
	res, err := c.ReadView(ctx, id, kind, end, stream.ReadOptions{})
	if err != nil || res.StartOffset != 0 {
		t.Fatalf("ReadView at the end: start %d, %v; want 0", res.StartOffset, err)
	}
}

func checkLossless(t *testing.T, ctx context.Context, c *stream.Core, id stream.ID, model map[int64]modelRec, start, end int64) {
	t.Helper()
	got := readKV(t, ctx, func(from int64) (stream.ReadResult, error) {
		return c.Read(ctx, id, from, stream.ReadOptions{})
	}, start, end)
	for o := start; o < end; o++ {
		if _, ok := got[o]; !ok {
			t.Fatalf("lossless offset %d missing", o)
		}
	}
}

// TestViewKindRefused: view kinds are validated.
func TestViewKindRefused(t *testing.T) {
	c := newLCEnv(t).open(t, "w1")
	_, err := c.ReadView(context.Background(), 1, "a/b", 0, stream.ReadOptions{})
	if !errors.Is(err, stream.ErrInvalidArgument) || !strings.Contains(err.Error(), "view kind") {
		t.Fatalf("err = %v", err)
	}
}

// TestViewReadsDuringCompactionAndGC: readers keep reading through the view
// while compaction passes replace it and GC deletes the replaced objects
// (grace 50 ms, far below the readers' 1 s view-record cache; the readers
// are another core): no read fails, and every record a reader sees is the
// record appended at that offset. The covering variant also trims the
// lossless log below every cleaned point (GC then collects it) while the
// readers, whose cached view record lags, keep reading from 0.
func TestViewReadsDuringCompactionAndGC(t *testing.T) {
	for _, covering := range []bool{false, true} {
		t.Run(fmt.Sprintf("covering=%v", covering), func(t *testing.T) { runViewReadsDuringGC(t, covering) })
	}
}

func runViewReadsDuringGC(t *testing.T, covering bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := newLCEnv(t)
	env.lc.GenerationBytes = 1 << 10
	c := env.open(t, "w1")
	info, s := createWithSession(ctx, t, c, "view-gc", "w1")
	const kind = "test-compact"
	// The readers use another core (another node): its cached view record
	// goes stale while this one publishes and collects.
	rc := env.open(t, "w2")
	var mu sync.Mutex
	appended := map[int64]kvRec{}
	appendRound := func(round int) {
		for i := 0; i < 20; i++ {
			v := fmt.Sprintf("v%d-%d", round, i)
			r := kvRec{K: fmt.Sprintf("k%d", i%7), V: &v}
			p, _ := json.Marshal([]kvRec{r})
			res, err := c.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: p, RecordCount: 1, Timestamp: int64(round)}}})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			appended[res.Start] = r
			mu.Unlock()
		}
	}
	appendRound(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	reads := make([]int, 2)
	for rd := 0; rd < 2; rd++ {
		wg.Add(1)
		go func(rd int) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				next := int64(0)
				for {
					res, err := rc.ReadView(ctx, info.ID, kind, next, stream.ReadOptions{MaxBytes: 200})
					if err != nil {
						t.Errorf("reader %d at %d: %v", rd, next, err)
						return
					}
					if len(res.Entries) == 0 {
						break
					}
					for _, e := range res.Entries {
						var rs []kvRec
						if err := json.Unmarshal(e.Payload, &rs); err != nil {
							t.Errorf("reader %d: payload at %d: %v", rd, e.Offset, err)
							return
						}
						mu.Lock()
						want, known := appended[e.Offset]
						mu.Unlock()
						if !known {
							continue // committed, its Append has not returned yet
						}
						if len(rs) != 1 || rs[0].K != want.K || *rs[0].V != *want.V {
							t.Errorf("reader %d: offset %d holds %+v, appended %+v", rd, e.Offset, rs, want)
							return
						}
					}
					next = res.Next
					reads[rd]++
				}
			}
		}(rd)
	}
	for round := 1; round <= 15 && !t.Failed(); round++ {
		appendRound(round)
		end, _, _ := c.Notify(ctx, info.ID)
		if _, err := c.Compact(ctx, info.ID, kind, end, &kvCompactor{latest: map[string]int64{}, maxKeys: 100, replaces: covering}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Millisecond)
		if _, err := c.CollectGarbage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	st := c.LifecycleStats()
	if st.Compactions < 10 || st.GCObjects == 0 || reads[0] == 0 || reads[1] == 0 || covering && st.ViewTrims < 10 {
		t.Fatalf("the test did not exercise what it is about: %d compactions, %d objects collected, %d trims, reads %v", st.Compactions, st.GCObjects, st.ViewTrims, reads)
	}
	t.Logf("%d compactions, %d objects collected, reads %v, %d reads resolved again after GC", st.Compactions, st.GCObjects, reads, rc.Stats().ReadRetries)
}

// TestViewRecleanWithoutNewData: a view whose compactor asked for a pass
// at some time (Kafka: a tombstone's delete horizon) gets one with nothing
// new to compact once that time has come, rewriting the view alone at the
// same cleaned point; before it, a pass with nothing new does nothing.
// Covering and not.
func TestViewRecleanWithoutNewData(t *testing.T) {
	for _, covering := range []bool{false, true} {
		t.Run(fmt.Sprintf("covering=%v", covering), func(t *testing.T) {
			ctx := context.Background()
			env := newLCEnv(t)
			c := env.open(t, "w1")
			info, s := createWithSession(ctx, t, c, "view-reclean", "w1")
			const kind = "test-compact"
			v1 := "1"
			var end int64
			for _, r := range []kvRec{{K: "a", V: &v1}, {K: "b"}, {K: "c", V: &v1}} { // b: tombstone
				p, _ := json.Marshal([]kvRec{r})
				res, err := c.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: p, RecordCount: 1, Timestamp: 5}}})
				if err != nil {
					t.Fatal(err)
				}
				end = res.End
			}
			later := time.Now().Add(time.Hour).UnixMilli()
			cmp := func(horizon, recleanAt int64) *recleanCompactor {
				return &recleanCompactor{kvCompactor{latest: map[string]int64{}, maxKeys: 10, horizon: horizon, replaces: covering}, recleanAt}
			}
			appendOne := func(r kvRec) {
				p, _ := json.Marshal([]kvRec{r})
				res, err := c.Append(ctx, s, stream.AppendRequest{ExpectedStart: -1, Entries: []stream.Entry{{Payload: p, RecordCount: 1, Timestamp: 5}}})
				if err != nil {
					t.Fatal(err)
				}
				end = res.End
			}
			keys := func() string {
				got := readKV(t, ctx, func(from int64) (stream.ReadResult, error) {
					return c.ReadView(ctx, info.ID, kind, from, stream.ReadOptions{})
				}, 0, end)
				var ks []string
				for o := int64(0); o < end; o++ {
					if r, ok := got[o]; ok {
						ks = append(ks, r.K)
					}
				}
				return strings.Join(ks, ",")
			}
			// Pass 1 keeps the tombstone and asks for a pass in an hour:
			// a pass with nothing new before then does nothing.
			st, err := c.Compact(ctx, info.ID, kind, end, cmp(0, later))
			if err != nil || !st.Published || st.View.RecleanAt.UnixMilli() != later {
				t.Fatalf("pass 1: %+v %v", st, err)
			}
			st, err = c.Compact(ctx, info.ID, kind, end, cmp(100, 0))
			if err != nil || st.Published || keys() != "a,b,c" {
				t.Fatalf("a pass with nothing new before the reclean time: %+v %v, view %s", st, err, keys())
			}
			// Pass 2 (new data) asks for a pass at once.
			appendOne(kvRec{K: "d", V: &v1})
			if st, err = c.Compact(ctx, info.ID, kind, end, cmp(0, 1)); err != nil || !st.Published {
				t.Fatalf("pass 2: %+v %v", st, err)
			}
			through := st.View.Through
			// Pass 3, nothing new: the view alone is rewritten (the
			// compactor now drops the tombstone), same cleaned point.
			st, err = c.Compact(ctx, info.ID, kind, end, cmp(100, 0))
			if err != nil || !st.Published || st.View.Through != through || !st.View.RecleanAt.IsZero() {
				t.Fatalf("reclean pass: %+v %v", st, err)
			}
			if got := keys(); got != "a,c,d" {
				t.Fatalf("after the reclean the view holds %s, want a,c,d", got)
			}
			if st, err = c.Compact(ctx, info.ID, kind, end, cmp(100, 0)); err != nil || st.Published {
				t.Fatalf("a pass after the reclean: %+v %v", st, err)
			}
		})
	}
}
