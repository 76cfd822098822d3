package stream

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// TestCommitMachineIsPure: the machine's files import nothing that reads a
// clock, starts work, locks or does I/O, and start no goroutines.
func TestCommitMachineIsPure(t *testing.T) {
	forbidden := map[string]bool{"sync": true, "sync/atomic": true, "time": true, "context": true, "os": true, "net": true}
	fset := token.NewFileSet()
	for _, name := range []string{"commit_machine.go", "commit_ready.go"} {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if forbidden[p] {
				t.Errorf("%s imports %q", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s: go statement at %v", name, fset.Position(g.Pos()))
			}
			return true
		})
	}
}

// machineWithCommittedRoundUnknown builds a machine that sent one append's
// head CAS and got an unknown outcome back, then read a head showing that
// another session took over and indexed past the append: only the offset
// index can say whether it committed.
func machineWithFencedUnknown(t *testing.T) (*commitMachine, *AppendFuture, *head) {
	t.Helper()
	nr := nameRecord{ID: 7, Name: "s", Profile: ObjectWALAsyncObject}
	h := newHead(nr)
	h.Session = sessionRecord{Epoch: 1, Token: 11, Writer: "w\x00i", ExpiresMs: 10_000}
	sess := Session{Stream: 7, Epoch: 1, Token: 11, WriterID: "w"}
	m := newCommitMachine(h, 5, sess, "mem", 30_000, 256)
	f := NewAppendFuture()
	m.admit(sess, AppendRequest{ExpectedStart: -1, Entries: []Entry{{Payload: []byte("x"), RecordCount: 1}}}, f)
	rd := m.takeReady()
	if len(rd.writes) != 1 {
		t.Fatalf("admission wrote %d runs", len(rd.writes))
	}
	op := rd.writes[0]
	m.recycleReady(rd)
	m.walDone(op, provider.Target("t1"), nil)
	ops := m.prepareRound(nil, 1000)
	if len(ops) != 1 || ops[0].Kind != metadata.OpPut {
		t.Fatalf("round ops %+v", ops)
	}
	m.stepRound(nil, metadata.ErrUnavailable, 1001)
	m.recycleReady(m.takeReady())
	ops = m.prepareRound(nil, 1002)
	if len(ops) != 1 || ops[0].Kind != metadata.OpGet {
		t.Fatalf("settle ops %+v", ops)
	}
	// The stored head: fenced by epoch 2, our run (commit 1, [0,1)) already
	// indexed and dropped from Pending.
	fresh := h.clone()
	fresh.Session = sessionRecord{Epoch: 2, Token: 22, Writer: "v\x00j", ExpiresMs: 20_000}
	fresh.End, fresh.IndexedThrough, fresh.Commits = 1, 1, 0
	m.stepRound([]metadata.Result{{Record: metadata.Record{Value: fresh.encode(), Version: 9}}}, nil, 1003)
	return m, f, fresh
}

// TestFencedSettleProbeFailureStaysUnknown is the regression test of the
// runCommittedLocked bug: an index lookup that fails during settlement must
// not turn into "not committed" (ErrFenced, target released as garbage) —
// the append stays unresolved and its target kept until a lookup answers.
func TestFencedSettleProbeFailureStaysUnknown(t *testing.T) {
	m, f, fresh := machineWithFencedUnknown(t)
	rd := m.takeReady()
	if rd == nil || rd.probe == nil {
		t.Fatalf("settling a fenced unknown commit asked for no index probe: %+v", rd)
	}
	m.recycleReady(rd)
	m.probeResult(nil, errors.New("index scan timed out"), 1004)
	rd = m.takeReady()
	if len(rd.resolves) != 0 || len(rd.releases) != 0 {
		t.Fatalf("a failed probe settled the append: resolves %+v releases %+v", rd.resolves, rd.releases)
	}
	if rd.wakeAtMs == 0 {
		t.Fatal("no retry was scheduled")
	}
	m.recycleReady(rd)
	if ops := m.prepareRound(nil, 1005); len(ops) != 0 {
		t.Fatalf("settle read re-sent before its backoff: %+v", ops)
	}
	m.recycleReady(m.takeReady())
	ops := m.prepareRound(nil, 1004+unknownBackoffMs)
	if len(ops) != 1 || ops[0].Kind != metadata.OpGet {
		t.Fatalf("no settle read after the backoff: %+v", ops)
	}
	m.stepRound([]metadata.Result{{Record: metadata.Record{Value: fresh.encode(), Version: 9}}}, nil, 1030)
	rd = m.takeReady()
	if rd.probe == nil {
		t.Fatal("no second probe")
	}
	m.recycleReady(rd)
	// This time the index answers: the entry holds our run.
	d := descriptor{Start: 0, End: 1, Entries: 1, Bytes: 1, CumBytes: 1, Epoch: 1, Token: 11, FirstCommit: 1, Commit: 1,
		Provider: "mem", Parts: []part{{Start: 0, Target: []byte("t1")}}}
	m.probeResult([]metadata.Record{{Value: d.encodeIndexRecord()}}, nil, 1031)
	rd = m.takeReady()
	if len(rd.resolves) != 1 || rd.resolves[0].future != f || rd.resolves[0].err != nil || rd.resolves[0].result.End != 1 {
		t.Fatalf("want the append resolved committed, got %+v", rd.resolves)
	}
	if len(rd.releases) != 1 || !rd.releases[0].committed {
		t.Fatalf("want the target released as committed, got %+v", rd.releases)
	}
	if !rd.drop {
		t.Fatal("a fenced machine must be dropped")
	}
}

// TestFencedSettleProbeNotFound: an index that answers without our run
// proves the append was not committed.
func TestFencedSettleProbeNotFound(t *testing.T) {
	m, _, _ := machineWithFencedUnknown(t)
	m.recycleReady(m.takeReady())
	m.probeResult(nil, nil, 1004)
	rd := m.takeReady()
	if len(rd.resolves) != 1 || !errors.Is(rd.resolves[0].err, ErrFenced) {
		t.Fatalf("want ErrFenced, got %+v", rd.resolves)
	}
	if len(rd.releases) != 1 || rd.releases[0].committed {
		t.Fatalf("want the target released as not committed, got %+v", rd.releases)
	}
}

// TestMonotonicAfterFailedPredecessorIsNotAdmitted: Pulsar dedup allows
// gaps, so once a producer's append failed in the WAL, a later append of
// the same connection (After = the failed one's LastSeq) must fail too.
// Admitted and committed, it would raise the producer's highest sequence
// past the failed one, whose resend would then be answered as a duplicate
// without ever having been stored (found by stream/bkwal/outagetest:
// Pulsar messages acknowledged -1:-1 after a bookie outage and lost).
func TestMonotonicAfterFailedPredecessorIsNotAdmitted(t *testing.T) {
	nr := nameRecord{ID: 7, Name: "s", Profile: ObjectWALAsyncObject}
	h := newHead(nr)
	h.Session = sessionRecord{Epoch: 1, Token: 11, Writer: "w\x00i", ExpiresMs: 10_000}
	sess := Session{Stream: 7, Epoch: 1, Token: 11, WriterID: "w"}
	m := newCommitMachine(h, 5, sess, "mem", 30_000, 256)
	appendSeq := func(n int64, after *int64) *AppendFuture {
		q := &ProducerSequence{Mode: SequenceMonotonic, Producer: "p", FirstSeq: n, LastSeq: n}
		if after != nil {
			q.HasAfter, q.After = true, *after
		}
		f := NewAppendFuture()
		m.admit(sess, AppendRequest{ExpectedStart: -1, Entries: []Entry{{Payload: []byte("x"), RecordCount: 1}}, Sequence: q}, f)
		return f
	}
	resolved := func(rd *commitReady, f *AppendFuture) (bool, error) {
		for _, r := range rd.resolves {
			if r.future == f {
				return true, r.err
			}
		}
		return false, nil
	}
	seq := func(n int64) *int64 { return &n }

	f1 := appendSeq(1, nil)
	rd := m.takeReady()
	if len(rd.writes) != 1 {
		t.Fatalf("admission wrote %d runs", len(rd.writes))
	}
	op1 := rd.writes[0]
	m.recycleReady(rd)
	// While 1 is queued, 2 after it is admitted (pipelining).
	f2 := appendSeq(2, seq(1))
	rd = m.takeReady()
	if len(rd.writes) != 1 {
		t.Fatalf("pipelined admission wrote %d runs", len(rd.writes))
	}
	op2 := rd.writes[0]
	m.recycleReady(rd)
	// 1's WAL write fails: 1 and 2 fail, not committed.
	m.walDone(op1, nil, errors.New("bookie down"))
	m.walDone(op2, provider.Target("t2"), nil)
	m.prepareRound(nil, 1000)
	rd = m.takeReady()
	for i, f := range []*AppendFuture{f1, f2} {
		if ok, err := resolved(rd, f); !ok || !errors.Is(err, ErrStorageUnavailable) {
			t.Fatalf("append %d after the WAL failure: resolved %v, %v", i+1, ok, err)
		}
	}
	m.recycleReady(rd)
	// 3, sent on the same connection after 2, must not be admitted.
	f3 := appendSeq(3, seq(2))
	rd = m.takeReady()
	if ok, err := resolved(rd, f3); !ok || !errors.Is(err, ErrStorageUnavailable) || CommitCertainty(err) != NotCommitted || len(rd.writes) != 0 {
		t.Fatalf("append 3 after its failed predecessor: resolved %v, %v, %d WAL writes; want not committed, no write", ok, err, len(rd.writes))
	}
	m.recycleReady(rd)
	// The client's resend from 1 (new connection: no predecessor) is new.
	appendSeq(1, nil)
	rd = m.takeReady()
	if len(rd.writes) != 1 || len(rd.resolves) != 0 {
		t.Fatalf("resend of 1: %d WAL writes, %d resolutions; want it admitted as new", len(rd.writes), len(rd.resolves))
	}
	m.recycleReady(rd)
	// And 2 after it is admitted while 1 is queued.
	appendSeq(2, seq(1))
	if rd = m.takeReady(); len(rd.writes) != 1 {
		t.Fatalf("resend of 2 after 1: %d WAL writes", len(rd.writes))
	}
}

// TestMonotonicResendBelowTheWindowJoinsItsQueuedOriginal: a producer has
// more appends queued than the dedup window holds (5), and its connection
// drops; the client resends from the first. That sequence is below the
// projection's window but only queued, not committed: the resend must wait
// for its original, not be answered (-1, -1) at once — if the original
// then fails, the client was told "stored" for bytes that never were
// (found by the managedledger simulation once it counted (-1, -1) answers
// as acknowledgements, as Pulsar clients do).
func TestMonotonicResendBelowTheWindowJoinsItsQueuedOriginal(t *testing.T) {
	nr := nameRecord{ID: 7, Name: "s", Profile: ObjectWALAsyncObject}
	h := newHead(nr)
	h.Session = sessionRecord{Epoch: 1, Token: 11, Writer: "w\x00i", ExpiresMs: 10_000}
	sess := Session{Stream: 7, Epoch: 1, Token: 11, WriterID: "w"}
	m := newCommitMachine(h, 5, sess, "mem", 30_000, 256)
	appendSeq := func(n int64) *AppendFuture {
		f := NewAppendFuture()
		m.admit(sess, AppendRequest{ExpectedStart: -1, Entries: []Entry{{Payload: []byte("x"), RecordCount: 1}},
			Sequence: &ProducerSequence{Mode: SequenceMonotonic, Producer: "p", FirstSeq: n, LastSeq: n}}, f)
		return f
	}
	var ops []*appendOp
	for n := int64(1); n <= 7; n++ {
		appendSeq(n)
		rd := m.takeReady()
		ops = append(ops, rd.writes...)
		m.recycleReady(rd)
	}
	if len(ops) != 7 {
		t.Fatalf("%d WAL writes for 7 appends", len(ops))
	}
	resend := appendSeq(1)
	rd := m.takeReady()
	if len(rd.resolves) != 0 || len(rd.writes) != 0 {
		t.Fatalf("resend of 1 below the window: %d resolutions, %d writes; want it to wait for its queued original", len(rd.resolves), len(rd.writes))
	}
	m.recycleReady(rd)
	// The original's WAL write fails: the resend fails with it.
	m.walDone(ops[0], nil, errors.New("bookie down"))
	for i, op := range ops[1:] {
		m.walDone(op, provider.Target("t"+strconv.Itoa(i)), nil)
	}
	m.prepareRound(nil, 1000)
	rd = m.takeReady()
	found := false
	for _, r := range rd.resolves {
		if r.future == resend {
			found = true
			if CommitCertainty(r.err) == Committed {
				t.Fatalf("resend answered committed (%+v) though its original failed", r.result)
			}
		}
	}
	if !found {
		t.Fatal("the resend was not resolved with its failed original")
	}
}
