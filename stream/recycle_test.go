package stream_test

import (
	"bytes"
	"testing"

	"github.com/nereusstream/nereus-go/stream"
)

// TestRecycledCatchUp: a catch-up with ReadOptions.Recycle on another core
// (generation spans in recycled buffers) returns every entry exactly; a
// result that is not released keeps its payloads intact while later reads
// recycle buffers around it; releasing a result twice (also through a
// copy) is harmless.
func TestRecycledCatchUp(t *testing.T) {
	e := newLCEnv(t)
	w := e.open(t, "w1")
	ctx := ctxT(t)
	info, err := w.Create(ctx, "recycle", stream.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := w.AcquireSession(ctx, info.ID, stream.SessionOptions{WriterID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	want := appendN(t, w, s, 0, 800)
	waitFor(t, "materialized", func() bool {
		in, err := w.Describe(ctx, info.ID)
		return err == nil && in.MaterializedThrough == 800
	})
	r := e.open(t, "r1")
	var held stream.ReadResult
	for round := range 3 {
		next, recycled := int64(0), 0
		for next < 800 {
			res, err := r.Read(ctx, info.ID, next, stream.ReadOptions{MaxBytes: 3000, Recycle: true})
			if err != nil {
				t.Fatalf("read at %d: %v", next, err)
			}
			if len(res.Entries) == 0 {
				t.Fatalf("no entries at %d", next)
			}
			for _, en := range res.Entries {
				if !bytes.Equal(want[en.Offset], en.Payload) {
					t.Fatalf("round %d offset %d: got %q want %q", round, en.Offset, en.Payload, want[en.Offset])
				}
			}
			switch {
			case round == 0 && next == 0:
				held = res // kept across every later read
			default:
				cp := res
				res.Release()
				cp.Release()
			}
			recycled++
			next = res.Next
		}
		if recycled == 0 {
			t.Fatal("no read")
		}
	}
	for _, en := range held.Entries {
		if !bytes.Equal(want[en.Offset], en.Payload) {
			t.Fatalf("held result, offset %d: payload changed to %q (its buffer was reused)", en.Offset, en.Payload)
		}
	}
	held.Release()
	if st := r.Stats(); st.GenerationReads == 0 {
		t.Fatalf("no generation reads: %+v", st)
	}
}
