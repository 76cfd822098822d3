package stream

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// TestNewPartsCutsDisjointClippedLists: newParts hands out lists that
// never overlap (each commit's descriptor writes its parts into slots no
// other descriptor sees), whose capacity ends at the requested length (an
// append to one reallocates instead of writing into the next), from one
// allocation per partChunkLen single-part lists.
func TestNewPartsCutsDisjointClippedLists(t *testing.T) {
	m := &commitMachine{}
	var lists [][]part
	for i, n := range []int{1, 1, 3, 1, 8, 2, 1, 1, 1, 20, 1} {
		p := m.newParts(n)
		if len(p) != 0 || cap(p) != n {
			t.Fatalf("newParts(%d) = len %d cap %d", n, len(p), cap(p))
		}
		for k := range n {
			p = append(p, part{Start: int64(i*100 + k), Target: provider.Target(fmt.Sprint(i, k))})
		}
		lists = append(lists, p)
	}
	for i, p := range lists {
		for k, pt := range p {
			if pt.Start != int64(i*100+k) || string(pt.Target) != fmt.Sprint(i, k) {
				t.Fatalf("list %d part %d = %+v: overwritten by a later list", i, k, pt)
			}
		}
	}
	if got := testing.AllocsPerRun(100, func() {
		for range partChunkLen {
			_ = append(m.newParts(1), part{})
		}
	}); got != 1 {
		t.Fatalf("%d single-part lists cost %v allocations, want 1", partChunkLen, got)
	}
}

// TestCommitDescriptorsShareAPartChunk: the descriptors a machine commits
// take their Parts from newParts — consecutive one-run commits' parts are
// adjacent slots of one chunk — instead of one allocation each.
func TestCommitDescriptorsShareAPartChunk(t *testing.T) {
	h := newHead(nameRecord{ID: 9, Name: "p", Profile: ObjectWALAsyncObject})
	h.Session = sessionRecord{Epoch: 1, Token: 5, Writer: "w\x00i", ExpiresMs: 1 << 40}
	sess := Session{Stream: 9, Epoch: 1, Token: 5, WriterID: "w"}
	m := newCommitMachine(h, 1, sess, "mem", 30_000, 256)
	version := metadata.Version(1)
	var parts [][]part
	for i := range 6 {
		m.admit(sess, AppendRequest{ExpectedStart: -1, Entries: []Entry{{Payload: []byte("x"), RecordCount: 1}}}, NewAppendFuture())
		for range 4 {
			rd := m.takeReady()
			if rd == nil {
				break
			}
			for _, op := range rd.writes {
				m.walDone(op, provider.Target(fmt.Sprint("seg/", i)), nil)
			}
			m.recycleReady(rd)
		}
		ops := m.prepareRound(nil, int64(1000+i))
		res := make([]metadata.Result, len(ops))
		for k, op := range ops {
			if op.Key == m.headKey {
				version++
				res[k].Version = version
				for _, r := range m.round {
					if r.kind == roundHeadCAS && r.cas.desc.Parts != nil {
						parts = append(parts, r.cas.desc.Parts)
					}
				}
			}
		}
		m.stepRound(res, nil, int64(1000+i))
	}
	if len(parts) < 4 {
		t.Fatalf("only %d commits carried a descriptor", len(parts))
	}
	adjacent := 0
	for i := 1; i < len(parts); i++ {
		a, b := parts[i-1], parts[i]
		if len(a) != 1 || cap(a) != 1 {
			t.Fatalf("commit %d's Parts: len %d cap %d, want 1 and 1", i-1, len(a), cap(a))
		}
		if unsafe.Pointer(&b[0]) == unsafe.Add(unsafe.Pointer(&a[0]), unsafe.Sizeof(part{})) {
			adjacent++
		}
	}
	last := parts[len(parts)-1]
	chunk := m.partChunk[:cap(m.partChunk)]
	if len(chunk) == 0 || uintptr(unsafe.Pointer(&last[0])) < uintptr(unsafe.Pointer(&chunk[0])) ||
		uintptr(unsafe.Pointer(&last[0])) > uintptr(unsafe.Pointer(&chunk[len(chunk)-1])) {
		t.Fatalf("the last commit's parts are not in the machine's part chunk")
	}
	if adjacent < len(parts)-2 {
		t.Fatalf("only %d of %d consecutive commits' parts lie next to each other in one chunk", adjacent, len(parts)-1)
	}
}

// TestSingleEntryAppendUsesItsOpsEntry: a one-entry append's run keeps its
// entry in the op (appendOp.oneEntry: no allocation of its own), a
// multi-entry one in its own array; both carry the request's entries.
func TestSingleEntryAppendUsesItsOpsEntry(t *testing.T) {
	h := newHead(nameRecord{ID: 9, Name: "p", Profile: ObjectWALAsyncObject})
	h.Session = sessionRecord{Epoch: 1, Token: 5, Writer: "w\x00i", ExpiresMs: 1 << 40}
	sess := Session{Stream: 9, Epoch: 1, Token: 5, WriterID: "w"}
	m := newCommitMachine(h, 1, sess, "mem", 30_000, 256)
	one := []Entry{{Payload: []byte("a"), RecordCount: 2, Timestamp: 7}}
	three := []Entry{{Payload: []byte("b"), RecordCount: 1, Timestamp: 8}, {Payload: []byte("cc"), RecordCount: 3, Timestamp: 9}, {Payload: nil, RecordCount: 1, Timestamp: 10}}
	m.admit(sess, AppendRequest{ExpectedStart: -1, Entries: one}, NewAppendFuture())
	m.admit(sess, AppendRequest{ExpectedStart: -1, Entries: three}, NewAppendFuture())
	if len(m.queue) != 2 {
		t.Fatalf("%d ops queued, want 2", len(m.queue))
	}
	for i, req := range [][]Entry{one, three} {
		op := m.queue[i]
		if len(op.run.Entries) != len(req) || cap(op.run.Entries) != len(req) {
			t.Fatalf("op %d: %d entries (cap %d), want %d", i, len(op.run.Entries), cap(op.run.Entries), len(req))
		}
		for k, e := range req {
			if got := op.run.Entries[k]; string(got.Payload) != string(e.Payload) || got.RecordCount != e.RecordCount || got.Timestamp != e.Timestamp {
				t.Fatalf("op %d entry %d = %+v, want %+v", i, k, got, e)
			}
		}
	}
	if &m.queue[0].run.Entries[0] != &m.queue[0].oneEntry[0] {
		t.Fatalf("a one-entry append's entry is not held in its op")
	}
	if &m.queue[1].run.Entries[0] == &m.queue[1].oneEntry[0] {
		t.Fatalf("a three-entry append's entries are in its op's one-entry slot")
	}
}
