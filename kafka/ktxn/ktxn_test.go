package ktxn

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/nereusstream/nereus-go/metadata/faultstore"
	"github.com/nereusstream/nereus-go/metadata/memstore"
)

type marker struct {
	tp     TopicPartition
	pid    int64
	epoch  int16
	commit bool
}

type fakeStorage struct {
	mu      sync.Mutex
	nextPID int64
	markers []marker
	offsets map[string][]Offset
	fail    error         // WriteMarker fails with this while set
	gate    chan struct{} // WriteMarker waits for it while set
}

func (f *fakeStorage) AllocateProducerID(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextPID++
	return 1000 + f.nextPID, nil
}

func (f *fakeStorage) WriteMarker(_ context.Context, tp TopicPartition, pid int64, epoch int16, commit bool, _ int32) error {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.markers = append(f.markers, marker{tp, pid, epoch, commit})
	return nil
}

func (f *fakeStorage) CommitOffsets(_ context.Context, group string, offs []Offset) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.offsets == nil {
		f.offsets = map[string][]Offset{}
	}
	f.offsets[group] = append(f.offsets[group], offs...)
	return nil
}

func (f *fakeStorage) setFail(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

func (f *fakeStorage) takeMarkers() []marker {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.markers
	f.markers = nil
	return m
}

var tpA, tpB = TopicPartition{"a", 0}, TopicPartition{"b", 3}

func TestInitFencesAndBumps(t *testing.T) {
	r := Record{}
	d := DecideInit(r, "x", 1000, -1, -1, -1, 0)
	if !d.NeedNewPID {
		t.Fatalf("new id without a pid: %+v", d)
	}
	d = DecideInit(r, "x", 1000, -1, -1, 7, 0)
	r = d.Next
	if r.ProducerID != 7 || r.Epoch != 0 || r.State != Empty {
		t.Fatalf("first init %+v", r)
	}
	// A second instance bumps the epoch; the first is fenced.
	r = DecideInit(r, "x", 1000, -1, -1, -1, 0).Next
	if r.Epoch != 1 {
		t.Fatalf("bump %+v", r)
	}
	if _, c := DecideAddPartitions(r, 7, 0, []TopicPartition{tpA}, 0); c != kerr.ProducerFenced.Code {
		t.Fatalf("old epoch added partitions: %d", c)
	}
	if _, c := DecideAddPartitions(r, 8, 1, []TopicPartition{tpA}, 0); c != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("wrong pid: %d", c)
	}
	// KIP-360: the owner asks for a bump; its retry gets the same answer;
	// a stale epoch is fenced.
	r2 := DecideInit(r, "x", 1000, 7, 1, -1, 0).Next
	if r2.Epoch != 2 {
		t.Fatalf("KIP-360 bump %+v", r2)
	}
	if again := DecideInit(r2, "x", 1000, 7, 1, -1, 0).Next; again.Epoch != 2 {
		t.Fatalf("retried bump %+v", again)
	}
	if d := DecideInit(r2, "x", 1000, 7, 0, -1, 0); d.Code != kerr.ProducerFenced.Code {
		t.Fatalf("stale bump %+v", d)
	}
	// Epoch exhaustion moves to a new producer id.
	r2.Epoch = maxEpoch
	if d := DecideInit(r2, "x", 1000, -1, -1, -1, 0); !d.NeedNewPID {
		t.Fatalf("exhausted %+v", d)
	}
	if n := DecideInit(r2, "x", 1000, -1, -1, 99, 0).Next; n.ProducerID != 99 || n.Epoch != 0 || n.LastProducerID != 7 {
		t.Fatalf("exhausted %+v", n)
	}
	// An ongoing transaction is aborted first.
	on, _ := DecideAddPartitions(r, 7, 1, []TopicPartition{tpA}, 5)
	if d := DecideInit(on, "x", 1000, -1, -1, -1, 0); !d.AbortFirst {
		t.Fatalf("ongoing %+v", d)
	}
}

func TestEndAndTimeout(t *testing.T) {
	r := DecideInit(Record{}, "x", 1000, -1, -1, 7, 0).Next
	if d := DecideEnd(r, 7, 0, true, 0); d.Code != kerr.InvalidTxnState.Code {
		t.Fatalf("end without a transaction %+v", d)
	}
	on, _ := DecideAddPartitions(r, 7, 0, []TopicPartition{tpB, tpA, tpA}, 10)
	if len(on.Partitions) != 2 || on.Partitions[0] != tpA || on.State != Ongoing || on.StartMs != 10 {
		t.Fatalf("ongoing %+v", on)
	}
	if _, c := DecideStageOffsets(on, 7, 0, "g", []Offset{{Topic: "a", Offset: 5}}, 10); c != kerr.InvalidTxnState.Code {
		t.Fatalf("offsets without AddOffsetsToTxn: %d", c)
	}
	on, _ = DecideAddGroup(on, 7, 0, "g", 10)
	on, _ = DecideStageOffsets(on, 7, 0, "g", []Offset{{Topic: "a", Offset: 5}}, 10)
	on, _ = DecideStageOffsets(on, 7, 0, "g", []Offset{{Topic: "a", Offset: 9}}, 10)
	if len(on.Offsets["g"]) != 1 || on.Offsets["g"][0].Offset != 9 {
		t.Fatalf("staged %+v", on.Offsets)
	}
	d := DecideEnd(on, 7, 0, true, 20)
	if !d.Persist || !d.Complete || d.Next.State != PrepareCommit {
		t.Fatalf("commit %+v", d)
	}
	if d2 := DecideEnd(d.Next, 7, 0, false, 20); d2.Code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort of a prepared commit %+v", d2)
	}
	if d2 := DecideEnd(d.Next, 7, 0, true, 20); !d2.Complete || d2.Persist {
		t.Fatalf("retried commit %+v", d2)
	}
	done := Completed(d.Next, 30)
	if done.State != CompleteCommit || len(done.Partitions) != 0 || done.Offsets != nil {
		t.Fatalf("completed %+v", done)
	}
	if d2 := DecideEnd(done, 7, 0, true, 30); d2.Code != 0 || d2.Complete {
		t.Fatalf("commit after completion %+v", d2)
	}
	if _, expired := DecideTimeout(on, 10+999); expired {
		t.Fatal("expired early")
	}
	ab, expired := DecideTimeout(on, 10+1000)
	if !expired || ab.State != PrepareAbort || ab.Epoch != 1 || ab.Offsets != nil {
		t.Fatalf("timeout %+v", ab)
	}
}

func newCoord(t *testing.T, meta *memstore.Store, st *fakeStorage) *Coordinator {
	t.Helper()
	c := New(meta, st, Config{CheckInterval: 20 * time.Millisecond})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestCoordinatorCommitAbortAndVerify(t *testing.T) {
	ctx := context.Background()
	meta, st := memstore.New(), &fakeStorage{}
	c := newCoord(t, meta, st)
	pid, epoch, code := c.InitProducerID(ctx, "t1", 60000, -1, -1)
	if code != 0 {
		t.Fatal(code)
	}
	if c.Verify("t1", pid, epoch, tpA) == 0 {
		t.Fatal("verified before AddPartitions")
	}
	if code := c.AddPartitions(ctx, "t1", pid, epoch, []TopicPartition{tpA, tpB}); code != 0 {
		t.Fatal(code)
	}
	if c.Verify("t1", pid, epoch, tpA) != 0 || c.Verify("t1", pid, epoch+1, tpA) == 0 || c.Verify("t1", pid, epoch, TopicPartition{"c", 0}) == 0 {
		t.Fatal("verify")
	}
	if code := c.AddGroup(ctx, "t1", pid, epoch, "g"); code != 0 {
		t.Fatal(code)
	}
	if code := c.StageOffsets(ctx, "t1", pid, epoch, "g", []Offset{{Topic: "a", Partition: 0, Offset: 42}}); code != 0 {
		t.Fatal(code)
	}
	if !c.HasPendingOffsets("g", "a", 0) {
		t.Fatal("no pending offsets")
	}
	if code := c.EndTxn(ctx, "t1", pid, epoch, true); code != 0 {
		t.Fatal(code)
	}
	// EndTxn answered once decided; the completion holds the id's lock
	// until the markers and offsets are applied.
	if rec, _, _ := c.Describe(ctx, "t1"); rec.State != CompleteCommit {
		t.Fatalf("after EndTxn and its completion: %s", rec.State)
	}
	if c.HasPendingOffsets("g", "a", 0) || len(st.offsets["g"]) != 1 {
		t.Fatalf("offsets not applied: %+v", st.offsets)
	}
	if m := st.takeMarkers(); len(m) != 2 || !m[0].commit || m[0].pid != pid {
		t.Fatalf("markers %+v", m)
	}
	if c.Verify("t1", pid, epoch, tpA) == 0 {
		t.Fatal("verified after the end")
	}
	// A new instance fences the old one and aborts its ongoing transaction.
	_ = c.AddPartitions(ctx, "t1", pid, epoch, []TopicPartition{tpA})
	pid2, epoch2, code := c.InitProducerID(ctx, "t1", 60000, -1, -1)
	if code != 0 || pid2 != pid || epoch2 <= epoch {
		t.Fatalf("second instance %d/%d code %d", pid2, epoch2, code)
	}
	if m := st.takeMarkers(); len(m) != 1 || m[0].commit || m[0].epoch <= epoch {
		t.Fatalf("fencing abort markers %+v", m)
	}
	if code := c.EndTxn(ctx, "t1", pid, epoch, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("zombie commit: %d", code)
	}
	// Timeout abort.
	_ = c.AddPartitions(ctx, "t1", pid2, epoch2, []TopicPartition{tpB})
	pid3, epoch3, _ := c.InitProducerID(ctx, "t2", 1, -1, -1)
	_ = c.AddPartitions(ctx, "t2", pid3, epoch3, []TopicPartition{tpA})
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, _, _ := c.Describe(ctx, "t2")
		if rec.State == CompleteAbort {
			if rec.Epoch != epoch3+1 {
				t.Fatalf("timeout abort did not bump the epoch: %+v", rec)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed-out transaction still %s", rec.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var list []string
	for _, r := range c.List() {
		list = append(list, r.TxnID+":"+string(r.State))
	}
	if len(list) != 2 || list[0] != "t1:Ongoing" || list[1] != "t2:CompleteAbort" {
		t.Fatalf("list %v", list)
	}
}

// TestCoordinatorRecoversDecidedOutcome: a coordinator that stored
// PrepareCommit and then died (markers unwritten: the storage failed) is
// completed by the next coordinator's Start, offsets included; one that
// died with the transaction Ongoing leaves it Ongoing for its producer.
func TestCoordinatorRecoversDecidedOutcome(t *testing.T) {
	ctx := context.Background()
	meta, st := memstore.New(), &fakeStorage{}
	c1 := New(meta, st, Config{CheckInterval: time.Hour})
	if err := c1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid, epoch, _ := c1.InitProducerID(ctx, "in-doubt", 60000, -1, -1)
	_ = c1.AddPartitions(ctx, "in-doubt", pid, epoch, []TopicPartition{tpA, tpB})
	_ = c1.AddGroup(ctx, "in-doubt", pid, epoch, "g")
	_ = c1.StageOffsets(ctx, "in-doubt", pid, epoch, "g", []Offset{{Topic: "a", Offset: 7}})
	pidO, epochO, _ := c1.InitProducerID(ctx, "ongoing", 60000, -1, -1)
	_ = c1.AddPartitions(ctx, "ongoing", pidO, epochO, []TopicPartition{tpA})
	st.setFail(errors.New("partition leader unreachable"))
	// The decision is stored: EndTxn succeeds (as in Kafka); the
	// completion fails and the producer's next step is told to retry.
	if code := c1.EndTxn(ctx, "in-doubt", pid, epoch, true); code != 0 {
		t.Fatalf("end with failing markers: %d", code)
	}
	if code := c1.AddPartitions(ctx, "in-doubt", pid, epoch, []TopicPartition{tpA}); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("next transaction while the markers fail: %d", code)
	}
	if !c1.HasPendingOffsets("g", "a", 0) {
		t.Fatal("staged offsets not pending while undecided")
	}
	c1.Close() // "crash": the record stays PrepareCommit
	if st.offsets != nil {
		t.Fatal("offsets applied before the markers")
	}
	st.setFail(nil)
	c2 := newCoord(t, meta, st)
	rec, _, _ := c2.Describe(ctx, "in-doubt")
	if rec.State != CompleteCommit {
		t.Fatalf("after restart: %s", rec.State)
	}
	if m := st.takeMarkers(); len(m) != 2 || !m[0].commit || !m[1].commit {
		t.Fatalf("markers %+v", m)
	}
	if len(st.offsets["g"]) != 1 || st.offsets["g"][0].Offset != 7 {
		t.Fatalf("offsets %+v", st.offsets)
	}
	if code := c2.EndTxn(ctx, "in-doubt", pid, epoch, true); code != 0 {
		t.Fatalf("client's retried commit: %d", code)
	}
	if rec, _, _ := c2.Describe(ctx, "ongoing"); rec.State != Ongoing || c2.Verify("ongoing", pidO, epochO, tpA) != 0 {
		t.Fatalf("ongoing after restart: %+v", rec)
	}
}

// TestCoordinatorUnknownOutcome: a CAS whose answer is lost is settled by
// re-reading (the nonce tells whether it applied), never guessed.
func TestCoordinatorUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	fs := faultstore.Wrap(memstore.New(), faultstore.Config{})
	st := &fakeStorage{}
	c := New(fs, st, Config{CheckInterval: time.Hour})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid, epoch, _ := c.InitProducerID(ctx, "u", 60000, -1, -1)
	// The next write applies, its answer is lost.
	fs.SetRules(faultstore.Rule{Kinds: faultstore.Put, Prefix: keyTxns, LoseRate: 1, Limit: 1})
	if code := c.AddPartitions(ctx, "u", pid, epoch, []TopicPartition{tpA}); code != 0 {
		t.Fatalf("applied write with a lost answer: %d", code)
	}
	if c.Verify("u", pid, epoch, tpA) != 0 {
		t.Fatal("the settled write is not in effect")
	}
}

// TestLazyCompletion: EndTxn answers once the markers are written without
// writing Complete* (the next transition CASes over the Prepare* record);
// a restart in between repeats the completion; an idle id gets its
// Complete* record from the sweep.
func TestLazyCompletion(t *testing.T) {
	ctx := context.Background()
	meta, st := memstore.New(), &fakeStorage{}
	c1 := New(meta, st, Config{CheckInterval: time.Hour})
	if err := c1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid, epoch, _ := c1.InitProducerID(ctx, "lz", 60000, -1, -1)
	_ = c1.AddPartitions(ctx, "lz", pid, epoch, []TopicPartition{tpA})
	if code := c1.EndTxn(ctx, "lz", pid, epoch, true); code != 0 {
		t.Fatal(code)
	}
	if rec, _, _ := c1.Describe(ctx, "lz"); rec.State != CompleteCommit {
		t.Fatalf("state after EndTxn %s", rec.State)
	}
	stored := func() State {
		r, err := meta.Get(ctx, txnKey("lz"))
		if err != nil {
			t.Fatal(err)
		}
		var rec Record
		if err := json.Unmarshal(r.Value, &rec); err != nil {
			t.Fatal(err)
		}
		return rec.State
	}
	if s := stored(); s != PrepareCommit {
		t.Fatalf("stored %s, want the Prepare record until the next write", s)
	}
	// The next transaction's first write replaces it directly.
	if code := c1.AddPartitions(ctx, "lz", pid, epoch, []TopicPartition{tpB}); code != 0 {
		t.Fatal(code)
	}
	if s := stored(); s != Ongoing {
		t.Fatalf("stored %s after the next AddPartitions", s)
	}
	if code := c1.EndTxn(ctx, "lz", pid, epoch, false); code != 0 {
		t.Fatal(code)
	}
	c1.Close()
	st.takeMarkers()
	// Crash before any further write: the restarted coordinator repeats
	// the abort's markers and records it; its sweep writes Complete*.
	c2 := New(meta, st, Config{CheckInterval: 10 * time.Millisecond})
	if err := c2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if m := st.takeMarkers(); len(m) != 1 || m[0].commit || m[0].tp != tpB {
		t.Fatalf("repeated markers %+v", m)
	}
	deadline := time.Now().Add(10 * time.Second)
	for stored() != CompleteAbort {
		if time.Now().After(deadline) {
			t.Fatalf("stored %s: the sweep never wrote CompleteAbort", stored())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOwnershipMoves: a coordinator answers NOT_COORDINATOR for ids it does
// not own; when ownership moves to it, Reconcile loads the id's record and
// completes its decided transaction; the old owner forgets it.
func TestOwnershipMoves(t *testing.T) {
	ctx := context.Background()
	meta, st := memstore.New(), &fakeStorage{}
	var mu sync.Mutex
	owner := "a"
	owns := func(me string) func(string) bool {
		return func(string) bool { mu.Lock(); defer mu.Unlock(); return owner == me }
	}
	a := New(meta, st, Config{CheckInterval: time.Hour, Owns: owns("a")})
	b := New(meta, st, Config{CheckInterval: time.Hour, Owns: owns("b")})
	for _, c := range []*Coordinator{a, b} {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if _, _, code := b.InitProducerID(ctx, "moving", 60000, -1, -1); code != kerr.NotCoordinator.Code {
		t.Fatalf("non-owner answered %d", code)
	}
	pid, epoch, _ := a.InitProducerID(ctx, "moving", 60000, -1, -1)
	_ = a.AddPartitions(ctx, "moving", pid, epoch, []TopicPartition{tpA})
	st.setFail(errors.New("leader moving"))
	if code := a.EndTxn(ctx, "moving", pid, epoch, true); code != 0 {
		t.Fatalf("decided commit: %d", code)
	}
	if rec, _, _ := a.Describe(ctx, "moving"); rec.State != PrepareCommit {
		t.Fatalf("completed with failing markers: %s", rec.State)
	}
	st.setFail(nil)
	st.takeMarkers()
	mu.Lock()
	owner = "b"
	mu.Unlock()
	if err := a.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if code := a.Verify("moving", pid, epoch, tpA); code == 0 {
		t.Fatal("the old owner still verifies")
	}
	b.sweep(ctx)
	if rec, _, _ := b.Describe(ctx, "moving"); rec.State != CompleteCommit {
		t.Fatalf("new owner: %s", rec.State)
	}
	if m := st.takeMarkers(); len(m) != 1 || !m[0].commit {
		t.Fatalf("markers %+v", m)
	}
}

// TestEndTxnAnswersBeforeMarkers: EndTxn answers once the decision is
// stored; the markers follow, and the producer's next AddPartitions waits
// for them (so its next batches land after the markers) instead of being
// refused.
func TestEndTxnAnswersBeforeMarkers(t *testing.T) {
	ctx := context.Background()
	meta, st := memstore.New(), &fakeStorage{}
	c := newCoord(t, meta, st)
	pid, epoch, _ := c.InitProducerID(ctx, "early", 60000, -1, -1)
	if code := c.AddPartitions(ctx, "early", pid, epoch, []TopicPartition{tpA, tpB}); code != 0 {
		t.Fatal(code)
	}
	gate := make(chan struct{})
	st.mu.Lock()
	st.gate = gate
	st.mu.Unlock()
	if code := c.EndTxn(ctx, "early", pid, epoch, true); code != 0 {
		t.Fatal(code)
	}
	if m := st.takeMarkers(); len(m) != 0 {
		t.Fatalf("markers before the gate opened: %+v", m)
	}
	if c.Verify("early", pid, epoch, tpA) == 0 {
		t.Fatal("a decided transaction still verifies")
	}
	added := make(chan int16, 1)
	go func() { added <- c.AddPartitions(ctx, "early", pid, epoch, []TopicPartition{tpA}) }()
	select {
	case code := <-added:
		t.Fatalf("next AddPartitions answered (%d) before the markers were written", code)
	case <-time.After(50 * time.Millisecond): // best effort: it must still be waiting
	}
	st.mu.Lock()
	st.gate = nil
	st.mu.Unlock()
	close(gate)
	if code := <-added; code != 0 {
		t.Fatalf("next AddPartitions after the completion: %d", code)
	}
	if m := st.takeMarkers(); len(m) != 2 || !m[0].commit || !m[1].commit {
		t.Fatalf("markers %+v", m)
	}
	if c.Verify("early", pid, epoch, tpA) != 0 {
		t.Fatal("the next transaction does not verify")
	}
}
