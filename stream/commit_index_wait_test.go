package stream

import (
	"fmt"
	"testing"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// TestDueIndexRidesTheNextRound: an OBJECT_WAL_ASYNC_OBJECT stream whose
// index publication falls due while another of its WAL writes is in flight
// asks for no round of its own (a round is a metadata flush); the write's
// completion kicks the stream, and that round carries the publication with
// the head CAS. Without a write in flight, and for OBJECT_WAL_SYNC_OBJECT
// (whose acknowledgements wait for the index), the publication still asks
// for a round at once.
func TestDueIndexRidesTheNextRound(t *testing.T) {
	for _, tc := range []struct {
		name     string
		profile  Profile
		inFlight bool
		wantKick bool
	}{
		{"async, write in flight", ObjectWALAsyncObject, true, false},
		{"async, nothing in flight", ObjectWALAsyncObject, false, true},
		// Sync streams publish every round; the last commit's own index
		// put still needs a round.
		{"sync, write in flight", ObjectWALSyncObject, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nr := nameRecord{ID: 3, Name: "r", Profile: tc.profile}
			h := newHead(nr)
			h.Session = sessionRecord{Epoch: 1, Token: 5, Writer: "w\x00i", ExpiresMs: 1 << 40}
			sess := Session{Stream: 3, Epoch: 1, Token: 5, WriterID: "w"}
			m := newCommitMachine(h, 1, sess, "mem", 30_000, 256)
			version := metadata.Version(1)
			now := int64(1000)
			admit := func(i int) *appendOp {
				m.admit(sess, AppendRequest{ExpectedStart: -1, Entries: []Entry{{Payload: []byte("x"), RecordCount: 1, Timestamp: int64(i)}}}, NewAppendFuture())
				rd := m.takeReady()
				if rd == nil || len(rd.writes) != 1 {
					t.Fatalf("append %d: no WAL write", i)
				}
				op := rd.writes[0]
				m.recycleReady(rd)
				return op
			}
			// round answers every op of a round as applied and returns
			// the keys it carried.
			round := func() []string {
				now++
				ops := m.prepareRound(nil, now)
				res := make([]metadata.Result, len(ops))
				keys := make([]string, len(ops))
				for k, op := range ops {
					keys[k] = op.Key
					if op.Key == m.headKey {
						version++
						res[k].Version = version
					}
				}
				m.stepRound(res, nil, now)
				return keys
			}
			indexPuts := func(keys []string) int {
				n := 0
				for _, k := range keys {
					if k != m.headKey {
						n++
					}
				}
				return n
			}
			// Commit one run at a time until the next commit makes the
			// index due (indexBatchCommits commits unpublished).
			for i := 0; i < indexBatchCommits-1; i++ {
				op := admit(i)
				m.walDone(op, provider.Target(fmt.Sprintf("seg/%d", i)), nil)
				m.recycleReady(m.takeReady())
				if keys := round(); tc.profile == ObjectWALAsyncObject && (len(keys) != 1 || indexPuts(keys) != 0) {
					t.Fatalf("commit %d: round %q", i, keys)
				}
				m.recycleReady(m.takeReady())
			}
			last := admit(indexBatchCommits - 1)
			var next *appendOp
			if tc.inFlight {
				next = admit(indexBatchCommits)
			}
			m.walDone(last, provider.Target("seg/last"), nil)
			m.recycleReady(m.takeReady())
			if keys := round(); tc.profile == ObjectWALAsyncObject && indexPuts(keys) != 0 {
				t.Fatalf("last commit: round %q", keys)
			}
			if n, due := m.indexDue(); !due && tc.profile == ObjectWALAsyncObject {
				t.Fatalf("index not due after %d commits", n)
			}
			rd := m.takeReady()
			kick := rd != nil && rd.kick
			if rd != nil {
				m.recycleReady(rd)
			}
			if kick != tc.wantKick {
				t.Fatalf("kick after the commit that made the index due = %v, want %v", kick, tc.wantKick)
			}
			if !tc.inFlight || tc.profile != ObjectWALAsyncObject {
				return
			}
			// The write in flight completes: its round carries both.
			m.walDone(next, provider.Target("seg/next"), nil)
			rd = m.takeReady()
			if rd == nil || !rd.kick {
				t.Fatal("WAL completion did not kick the stream")
			}
			m.recycleReady(rd)
			keys := round()
			if len(keys) != 2 || indexPuts(keys) != 1 {
				t.Fatalf("round after the completion: %q, want the head CAS and one index put", keys)
			}
			if _, due := m.indexDue(); due {
				t.Fatal("index still due after its publication was applied")
			}
		})
	}
}
