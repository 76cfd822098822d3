package stream

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// TestCommittedPendingNeverChanges: successive heads of a stream share the
// array behind their Pending lists (appendPending), so this checks what
// the sharing must never break. Through commits, index publications that
// drop confirmed runs, rejected CASes, unknown outcomes settled both ways,
// heads adopted from a read and rounds without appends, every head that was ever the machine's
// committed head keeps exactly the Pending list (caches included) it had
// when it was committed and still encodes to the bytes its CAS sent. (A
// head whose CAS did not apply is dropped, and its slot reused.)
func TestCommittedPendingNeverChanges(t *testing.T) {
	nr := nameRecord{ID: 9, Name: "p", Profile: ObjectWALAsyncObject}
	h := newHead(nr)
	h.Session = sessionRecord{Epoch: 1, Token: 5, Writer: "w\x00i", ExpiresMs: 1 << 40}
	sess := Session{Stream: 9, Epoch: 1, Token: 5, WriterID: "w"}
	m := newCommitMachine(h, 1, sess, "mem", 30_000, 256)

	type snap struct {
		h       *head
		pending []descriptor
	}
	deep := func(l []descriptor) []descriptor {
		if l == nil {
			return nil
		}
		out := make([]descriptor, len(l))
		for i, d := range l {
			d.Parts = append([]part(nil), d.Parts...)
			d.encV3 = bytes.Clone(d.encV3)
			out[i] = d
		}
		return out
	}
	var committed []snap
	remember := func() {
		if n := len(committed); n == 0 || committed[n-1].h != m.head {
			committed = append(committed, snap{m.head, deep(m.head.Pending)})
		}
	}
	type sent struct {
		h   *head
		val []byte
	}
	var sentHeads []sent
	stored := h.encode() // what the store holds for the head
	version := metadata.Version(1)
	now := int64(1000)
	for i := 0; i < 400; i++ {
		remember()
		if i%11 == 8 || i%11 == 9 {
			// A round without appends right after adopting a read head
			// (the unknown outcome at i%11 == 7 is settled as applied at 8).
			m.mutate(&mutationOp{done: make(chan struct{}), m: func(h *head) (bool, error) {
				h.Retention.Bytes++
				return true, nil
			}})
		} else {
			m.admit(sess, AppendRequest{ExpectedStart: -1, Entries: []Entry{{Payload: []byte("x"), RecordCount: 1, Timestamp: int64(i)}}}, NewAppendFuture())
		}
		for range 4 { // let the machine's effects settle
			rd := m.takeReady()
			if rd == nil {
				break
			}
			for _, op := range rd.writes {
				m.walDone(op, provider.Target(fmt.Sprintf("segment-%06d/%d", i/3, i)), nil)
			}
			m.recycleReady(rd)
		}
		now++
		ops := m.prepareRound(nil, now)
		res := make([]metadata.Result, len(ops))
		for k, op := range ops {
			switch {
			case op.Kind == metadata.OpGet: // settling read
				res[k] = metadata.Result{Record: metadata.Record{Key: op.Key, Value: stored, Version: version}}
			case op.Key != m.headKey: // index put
				if i%13 == 0 {
					res[k].Err = metadata.ErrUnavailable
				}
			default:
				for _, r := range m.round {
					if r.kind == roundHeadCAS {
						sentHeads = append(sentHeads, sent{r.cas.next, bytes.Clone(op.Value)})
					}
				}
				switch {
				case i%17 == 5:
					res[k].Err = metadata.ErrInvalidArgument // rejected: not applied
				case i%11 == 3:
					res[k].Err = metadata.ErrUnavailable // unknown, and it did not apply
				case i%11 == 7:
					res[k].Err = metadata.ErrUnavailable // unknown, but it applied
					version++
					stored = op.Value
				default:
					version++
					stored = op.Value
					res[k].Version = version
				}
			}
		}
		m.stepRound(res, nil, now)
		remember()
	}
	if len(committed) < 200 {
		t.Fatalf("only %d heads were committed", len(committed))
	}
	maxPending := 0
	for i, s := range committed {
		maxPending = max(maxPending, len(s.pending))
		if !reflect.DeepEqual(s.h.Pending, s.pending) {
			t.Fatalf("committed head %d (End %d) changed its Pending list after it was committed:\n got %+v\nwant %+v", i, s.h.End, s.h.Pending, s.pending)
		}
	}
	if maxPending < 2 {
		t.Fatalf("heads never carried more than %d descriptors: the test does not exercise sharing", maxPending)
	}
	checked, trusted := 0, 0
	for _, s := range sentHeads {
		for _, c := range committed {
			if c.h == s.h {
				checked++
				if s.h.pendCached && len(s.h.Pending) > 1 {
					trusted++
				}
				if got := s.h.encode(); !bytes.Equal(got, s.val) {
					t.Fatalf("committed head (End %d) no longer encodes to the bytes it was sent with", s.h.End)
				}
				// The cached encodings (copied unchecked when the head is
				// pendCached) are exactly what encoding from scratch gives.
				fresh := *s.h
				fresh.pendCached = false
				fresh.Pending = deep(s.h.Pending)
				for i := range fresh.Pending {
					fresh.Pending[i].encV3 = nil
				}
				if got := fresh.encode(); !bytes.Equal(got, s.val) {
					t.Fatalf("committed head (End %d) was sent with bytes its fields do not encode to (stale cached descriptor encoding)", s.h.End)
				}
			}
		}
	}
	if checked < 100 || trusted < 50 {
		t.Fatalf("only %d committed heads were checked against their sent bytes (%d encoded from trusted caches)", checked, trusted)
	}
	if m.fatal != nil {
		t.Fatalf("machine failed: %v", m.fatal)
	}
}
