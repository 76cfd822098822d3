package generation

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// FuzzDecoders feeds arbitrary bytes to every decoder of untrusted object
// bytes: Verify on the whole input, ParseFooter on its last bytes (with the
// Info the trailer itself claims, so the structure checks are reached), and
// Span + DecodeSpan at an arbitrary offset and budget. Invariants:
//   - nothing panics, and nothing allocates beyond the input's size (the
//     fuzzer's memory limit enforces it);
//   - every failure wraps ErrCorrupt (or ErrOutOfRange for an offset
//     outside the range);
//   - an input Verify accepts decodes, through the ranged path, to a
//     contiguous run of entries from the one holding the offset, ending at
//     End when the budget is unbounded, with every payload inside the input;
//   - an input ParseFooter accepts never makes DecodeSpan return an entry
//     outside the range or out of order.
func FuzzDecoders(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		n, maxSz   int
		maxRecords uint32
		blockBytes int
	}{{1, 10, 1, 0}, {5, 100, 3, 64}, {12, 60, 5, 200}, {3, 400, 1, 300}} {
		es := randomEntries(rng, int64(rng.IntN(1000)), c.n, 0, c.maxSz, c.maxRecords)
		obj, info := build(f, 1, 2, es, BuilderOptions{BlockBytes: c.blockBytes})
		f.Add(obj, info.Start, 1)
		f.Add(obj, info.End-1, math.MaxInt32)
	}
	// A view object (header flag bit 0) with gap entries (empty payloads).
	view, vinfo := build(f, 1, 3, []Entry{{Offset: 10, RecordCount: 2, Payload: []byte("ab")},
		{Offset: 12, RecordCount: 5}, {Offset: 17, RecordCount: 1, Payload: []byte("c")}}, BuilderOptions{Kind: KindView})
	f.Add(view, vinfo.Start, 1)
	f.Add([]byte("NGEN"), int64(0), 0)
	f.Fuzz(func(t *testing.T, obj []byte, from int64, budget int) {
		info, verr := Verify(obj)
		if verr != nil && !errors.Is(verr, ErrCorrupt) {
			t.Fatalf("Verify error does not wrap ErrCorrupt: %v", verr)
		}
		// The Info the object claims for itself, as an index repair would
		// derive it, without the digest check.
		claimed, ok := claimedInfo(obj)
		if verr == nil && (!ok || claimed != info) {
			t.Fatalf("Verify accepted an object whose footer claims %+v (ok %v), Verify says %+v", claimed, ok, info)
		}
		if !ok {
			return
		}
		footer, err := ParseFooter(obj[claimed.FooterOffset:], claimed)
		if err != nil {
			if verr == nil {
				t.Fatalf("Verify accepted what ParseFooter refuses: %v", err)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ParseFooter error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if verr == nil {
			// Unbounded read from the start returns every entry.
			all, err := readSpan(footer, obj, info.Start, math.MaxInt)
			if err != nil || len(all) != int(info.Entries) || all[len(all)-1].End() != info.End {
				t.Fatalf("verified object: full read %d of %d entries, %v", len(all), info.Entries, err)
			}
		}
		got, err := readSpan(footer, obj, from, budget)
		switch {
		case errors.Is(err, ErrOutOfRange):
			if from >= claimed.Start && from < claimed.End {
				t.Fatalf("in-range offset %d refused: %v", from, err)
			}
			return
		case err != nil:
			if verr == nil {
				t.Fatalf("verified object: read at %d failed: %v", from, err)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeSpan error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if len(got) == 0 || got[0].Offset > from || got[0].End() <= from {
			t.Fatalf("read at %d does not start with the entry holding it: %+v", from, got)
		}
		for k, e := range got {
			if e.RecordCount == 0 || e.Offset < claimed.Start || e.End() > claimed.End ||
				(k > 0 && e.Offset != got[k-1].End()) {
				t.Fatalf("entry %d {off %d, n %d} breaks the range [%d, %d) or order", k, e.Offset, e.RecordCount, claimed.Start, claimed.End)
			}
			if e.Timestamp < claimed.MinTS || e.Timestamp > claimed.MaxTS || cap(e.Payload) != len(e.Payload) {
				t.Fatalf("entry %d timestamp or payload bounds broken", k)
			}
		}
	})
}

// claimedInfo is the Info an object's own trailer and footer describe
// (structure checked, digest not).
func claimedInfo(obj []byte) (Info, bool) {
	if len(obj) < minObjectLen {
		return Info{}, false
	}
	n := uint64(le.Uint32(obj[len(obj)-trailerLen+32:]))
	if n > uint64(len(obj)) {
		return Info{}, false
	}
	f, err := parseFooter(obj[len(obj)-int(n):], int64(len(obj)))
	if err != nil {
		return Info{}, false
	}
	return f.info, true
}
