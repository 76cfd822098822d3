package stream_test

import (
	"bytes"
	"testing"

	"github.com/nereusstream/nereus-go/stream"
)

// TestGenerationReadEntryBound: reads from generations bounded by
// MaxEntries (the generation reader then fetches only the blocks those
// entries need) return exactly MaxEntries entries while that many remain,
// contiguous and exact, with and without Recycle, from any offset.
func TestGenerationReadEntryBound(t *testing.T) {
	e := newLCEnv(t)
	w := e.open(t, "w1")
	ctx := ctxT(t)
	info, err := w.Create(ctx, "entrybound", stream.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := w.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 600
	want := appendN(t, w, s, 0, n)
	waitFor(t, "materialized", func() bool {
		in, err := w.Describe(ctx, info.ID)
		return err == nil && in.MaterializedThrough == n
	})
	r := e.open(t, "r1")
	for _, maxEntries := range []int{1, 7, 64} {
		for _, recycle := range []bool{false, true} {
			for next := int64(maxEntries % 5); next < n; {
				res, err := r.Read(ctx, info.ID, next, stream.ReadOptions{MaxBytes: 1 << 20, MaxEntries: maxEntries, Recycle: recycle})
				if err != nil {
					t.Fatalf("read at %d: %v", next, err)
				}
				if got, wantN := len(res.Entries), min(maxEntries, n-int(next)); got != wantN {
					t.Fatalf("MaxEntries %d recycle %v at %d: %d entries, want %d", maxEntries, recycle, next, got, wantN)
				}
				for k, en := range res.Entries {
					if en.Offset != next+int64(k) || !bytes.Equal(want[en.Offset], en.Payload) {
						t.Fatalf("MaxEntries %d at %d: entry %d is offset %d %q", maxEntries, next, k, en.Offset, en.Payload)
					}
				}
				next = res.Next
				res.Release()
			}
		}
	}
	if st := r.Stats(); st.GenerationReads == 0 || st.WALReads != 0 {
		t.Fatalf("want generation reads only: %+v", st)
	}
}
