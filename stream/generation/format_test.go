package generation

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRoundTripRandomStreams: random entry streams (payloads 1 B .. 2 MiB,
// record counts > 1) under several block sizes survive Finish -> Verify ->
// ParseFooter -> Span/DecodeSpan byte for byte, and Info is the same from
// every path.
func TestRoundTripRandomStreams(t *testing.T) {
	cases := []struct {
		name             string
		n, minSz, maxSz  int
		maxRecords       uint32
		blockBytes       int
		capacity         int
		expectMultiBlock bool
	}{
		{"tiny-entries-small-blocks", 400, 1, 64, 9, 512, 0, true},
		{"mixed-default-blocks", 120, 1, 256 << 10, 500, 0, 0, true},
		{"large-entries", 12, 256 << 10, 2 << 20, 3000, 0, 0, true},
		{"single-entry", 1, 1, 1, 1, 0, 0, false},
		{"huge-blocks", 60, 100, 64 << 10, 100, 8 << 20, 4 << 20, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			start := int64(rng.IntN(1 << 40))
			want := randomEntries(rng, start, c.n, c.minSz, c.maxSz, c.maxRecords)
			obj, info := build(t, 11, 4, want, BuilderOptions{BlockBytes: c.blockBytes, Capacity: c.capacity})

			if info.Size != int64(len(obj)) || info.FooterOffset+info.FooterLength != info.Size {
				t.Fatalf("info sizes %+v for a %d-byte object", info, len(obj))
			}
			if info.Start != start || info.End != want[len(want)-1].End() || info.Entries != uint32(len(want)) ||
				info.Stream != 11 || info.Generation != 4 {
				t.Fatalf("info meta %+v", info.Meta)
			}
			var payload int64
			minTS, maxTS := int64(math.MaxInt64), int64(math.MinInt64)
			for _, e := range want {
				payload += int64(len(e.Payload))
				minTS, maxTS = min(minTS, e.Timestamp), max(maxTS, e.Timestamp)
			}
			if info.Bytes != payload || info.MinTS != minTS || info.MaxTS != maxTS {
				t.Fatalf("info counts %+v, want bytes %d ts [%d,%d]", info.Meta, payload, minTS, maxTS)
			}
			if info.Digest != sha256.Sum256(obj[:len(obj)-trailerLen]) {
				t.Fatal("digest is not the SHA-256 of the bytes before the trailer")
			}

			vinfo, err := Verify(obj)
			if err != nil || vinfo != info {
				t.Fatalf("Verify = %+v, %v; want %+v", vinfo, err, info)
			}
			f, err := ParseFooter(obj[info.FooterOffset:], info)
			if err != nil {
				t.Fatalf("ParseFooter: %v", err)
			}
			if multi := f.NumBlocks() > 1; multi != c.expectMultiBlock {
				t.Fatalf("%d blocks", f.NumBlocks())
			}
			bb := c.blockBytes
			if bb == 0 {
				bb = DefaultBlockBytes
			}
			for k := range f.NumBlocks() {
				if b := f.Block(k); b.Len > int64(bb) && b.Entries != 1 {
					t.Fatalf("block %d is %d bytes with %d entries, over the %d-byte target", k, b.Len, b.Entries, bb)
				}
			}

			// Read everything with a huge budget: one span, all entries.
			all, err := readSpan(f, obj, start, math.MaxInt)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkPrefix(all, want, start); err != nil || len(all) != len(want) {
				t.Fatalf("full read: %d entries, %v", len(all), err)
			}
			// Catch up with small and medium budgets: contiguous, complete.
			for _, budget := range []int{0, 1, 4 << 10, 1 << 20} {
				var got []Entry
				for from := start; from < info.End; {
					es, err := readSpan(f, obj, from, budget)
					if err != nil {
						t.Fatalf("budget %d at %d: %v", budget, from, err)
					}
					if err := checkPrefix(es, want, from); err != nil {
						t.Fatalf("budget %d: %v", budget, err)
					}
					got = append(got, es...)
					from = es[len(es)-1].End()
				}
				if len(got) != len(want) {
					t.Fatalf("budget %d: caught up %d entries, want %d", budget, len(got), len(want))
				}
			}
		})
	}
}

// TestReadAtEveryOffset: a read at any offset of the range returns exactly
// the entries from the one containing it (first entry, interior offsets and
// last offset alike), with small and large budgets.
func TestReadAtEveryOffset(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	want := randomEntries(rng, 1000, 300, 1, 300, 12)
	obj, info := build(t, 1, 1, want, BuilderOptions{BlockBytes: 1024})
	f, err := ParseFooter(obj[info.FooterOffset:], info)
	if err != nil {
		t.Fatal(err)
	}
	for _, budget := range []int{1, 3000, math.MaxInt} {
		for from := info.Start; from < info.End; from++ {
			got, err := readSpan(f, obj, from, budget)
			if err != nil {
				t.Fatalf("at %d: %v", from, err)
			}
			if err := checkPrefix(got, want, from); err != nil {
				t.Fatal(err)
			}
			if budget == math.MaxInt && got[len(got)-1].End() != info.End {
				t.Fatalf("unbounded read at %d stopped at %d", from, got[len(got)-1].End())
			}
		}
	}
	for _, from := range []int64{info.Start - 1, info.End, info.End + 5, math.MinInt64, math.MaxInt64} {
		if _, _, err := f.Span(from, 1<<20); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("Span(%d) = %v, want ErrOutOfRange", from, err)
		}
	}
	// DecodeSpan with from before the span's first entry returns the whole
	// span; from past the span returns nothing, without error.
	off, n, _ := f.Span(info.Start, 1)
	if es, err := DecodeSpan(f, obj[off:off+n], off, math.MinInt64); err != nil || es[0].Offset != info.Start {
		t.Fatalf("from=-inf: %v", err)
	}
	if es, err := DecodeSpan(f, obj[off:off+n], off, math.MaxInt64); err != nil || len(es) != 0 {
		t.Fatalf("from=+inf: %d entries, %v", len(es), err)
	}
	// A span that does not start at a block is a caller error, not
	// corruption.
	if _, err := DecodeSpan(f, obj[off+1:off+n], off+1, info.Start); err == nil || errors.Is(err, ErrCorrupt) {
		t.Fatalf("misaligned span: %v", err)
	}
}

// TestBuilderRefusals: invalid entries are refused and leave the builder
// unchanged; Len predicts the final size; an empty builder cannot finish.
func TestBuilderRefusals(t *testing.T) {
	b := NewBuilder(1, 2, 100, BuilderOptions{BlockBytes: 64})
	if _, _, err := b.Finish(); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty Finish: %v", err)
	}
	ok := Entry{Offset: 100, RecordCount: 3, Timestamp: 5, Payload: []byte("abc")}
	for _, bad := range []Entry{
		{Offset: 99, RecordCount: 1},
		{Offset: 101, RecordCount: 1},
		{Offset: 100, RecordCount: 0},
		{Offset: 100, RecordCount: 1, Payload: make([]byte, MaxEntryBytes+1)},
	} {
		if err := b.Add(bad); !errors.Is(err, ErrInvalidEntry) {
			t.Fatalf("Add(%+v) = %v", bad.Offset, err)
		}
	}
	if b.Entries() != 0 || b.End() != 100 {
		t.Fatalf("refusals changed the builder: %d entries, end %d", b.Entries(), b.End())
	}
	for i := range 20 {
		e := ok
		e.Offset = b.End()
		e.Payload = bytes.Repeat([]byte{byte(i)}, i*7)
		if err := b.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	predicted := b.Len()
	obj, info, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if predicted != len(obj) || info.End != 160 {
		t.Fatalf("Len predicted %d, object is %d bytes; end %d", predicted, len(obj), info.End)
	}
	if err := b.Add(Entry{Offset: 160, RecordCount: 1}); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("Add after Finish: %v", err)
	}
	if _, _, err := b.Finish(); err == nil {
		t.Fatal("second Finish succeeded")
	}
	// An entry whose end overflows int64 is refused.
	b2 := NewBuilder(1, 1, math.MaxInt64-1, BuilderOptions{})
	if err := b2.Add(Entry{Offset: math.MaxInt64 - 1, RecordCount: 5}); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("overflowing entry: %v", err)
	}
}

// TestBuilderReset: a reused builder writes the same bytes as a fresh one.
func TestBuilderReset(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	a := randomEntries(rng, 0, 50, 1, 5000, 4)
	c := randomEntries(rng, 777, 80, 1, 3000, 4)
	b := NewBuilder(1, 1, 0, BuilderOptions{BlockBytes: 4096, Capacity: 1 << 20})
	for _, e := range a {
		if err := b.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	b.Reset(9, 2, 777)
	for _, e := range c {
		if err := b.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	got, gotInfo, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	want, wantInfo := build(t, 9, 2, c, BuilderOptions{BlockBytes: 4096})
	if !bytes.Equal(got, want) || gotInfo != wantInfo {
		t.Fatal("a reset builder wrote different bytes than a fresh one")
	}
}

// TestBitFlipsDetected flips every bit of a small multi-block object, one at
// a time: Verify always reports ErrCorrupt, and a read through the trusted
// Info (ParseFooter + Span + DecodeSpan, the Reader's path) at every entry
// either fails with ErrCorrupt or, if the flip lies outside what it read,
// returns exactly the original entries. Never wrong bytes.
func TestBitFlipsDetected(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	want := randomEntries(rng, 50, 24, 1, 90, 3)
	obj, info := build(t, 3, 1, want, BuilderOptions{BlockBytes: 200})
	f0, err := ParseFooter(obj[info.FooterOffset:], info)
	if err != nil || f0.NumBlocks() < 4 {
		t.Fatalf("fixture: %d blocks, %v", f0.NumBlocks(), err)
	}
	bad := make([]byte, len(obj))
	detectedByRead := 0
	for bit := range len(obj) * 8 {
		copy(bad, obj)
		bad[bit/8] ^= 1 << (bit % 8)
		if _, err := Verify(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d: Verify = %v", bit, err)
		}
		f, err := ParseFooter(bad[info.FooterOffset:], info)
		if err != nil {
			mustCorrupt(t, "ParseFooter", err)
			if int64(bit/8) < info.FooterOffset {
				t.Fatalf("bit %d in the data failed the footer: %v", bit, err)
			}
			continue
		}
		if int64(bit/8) >= info.FooterOffset {
			t.Fatalf("bit %d in the footer passed ParseFooter", bit)
		}
		for _, e := range want {
			got, err := readSpan(f, bad, e.Offset, 1)
			if err != nil {
				mustCorrupt(t, "read", err)
				detectedByRead++
				continue
			}
			if err := checkPrefix(got, want, e.Offset); err != nil {
				t.Fatalf("bit %d: served wrong bytes: %v", bit, err)
			}
		}
	}
	if detectedByRead == 0 {
		t.Fatal("no read ever saw a flip")
	}
}

// TestTruncatedObjects: every strict prefix of an object, and every short
// span, is refused as corrupt.
func TestTruncatedObjects(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	want := randomEntries(rng, 0, 40, 1, 400, 2)
	obj, info := build(t, 1, 1, want, BuilderOptions{BlockBytes: 1000})
	f, err := ParseFooter(obj[info.FooterOffset:], info)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(obj) {
		if _, err := Verify(obj[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Verify(prefix %d) = %v", n, err)
		}
	}
	for n := range info.FooterLength {
		if _, err := ParseFooter(obj[info.FooterOffset:info.FooterOffset+n], info); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ParseFooter(footer prefix %d) = %v", n, err)
		}
	}
	// A short span: every cut inside a block is refused; a cut at a block
	// boundary decodes the whole blocks before it (what DecodeSpan
	// promises; Reader.Read also refuses a short GET, see reader_test.go).
	off, n, _ := f.Span(0, math.MaxInt)
	boundary := map[int64]bool{}
	for k := range f.NumBlocks() {
		boundary[f.Block(k).Pos-off] = true
	}
	for cut := range n {
		got, err := DecodeSpan(f, obj[off:off+cut], off, 0)
		if cut > 0 && boundary[cut] {
			if err != nil || checkPrefix(got, want, 0) != nil {
				t.Fatalf("DecodeSpan cut at block boundary %d: %v", cut, err)
			}
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeSpan cut at %d of %d: %v", cut, n, err)
		}
	}
	// A truncated object read through its original Info: the footer the
	// reader would fetch is short or wrong.
	short := obj[:len(obj)-1]
	if _, err := ParseFooter(short[info.FooterOffset:], info); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("footer of a truncated object: %v", err)
	}
}

// TestInfoMismatch: a footer is accepted only for the Info it was written
// with; any field that differs fails.
func TestInfoMismatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := randomEntries(rng, 10, 10, 1, 100, 2)
	obj, info := build(t, 5, 6, want, BuilderOptions{})
	footer := obj[info.FooterOffset:]
	muts := []func(*Info){
		func(i *Info) { i.Stream++ },
		func(i *Info) { i.Generation++ },
		func(i *Info) { i.Start-- },
		func(i *Info) { i.End++ },
		func(i *Info) { i.Entries++ },
		func(i *Info) { i.Bytes++ },
		func(i *Info) { i.MinTS-- },
		func(i *Info) { i.MaxTS++ },
		func(i *Info) { i.Digest[7] ^= 1 },
		func(i *Info) { i.Size++; i.FooterOffset++ },
	}
	for k, m := range muts {
		bad := info
		m(&bad)
		if _, err := ParseFooter(footer, bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("mutation %d accepted: %v", k, err)
		}
	}
	// Length fields that lie are refused before any slicing.
	for _, bad := range []Info{
		func() Info { i := info; i.FooterLength = -1; return i }(),
		func() Info { i := info; i.FooterOffset = -5; return i }(),
		func() Info { i := info; i.Size = math.MaxInt64; return i }(),
		{},
	} {
		if _, err := ParseFooter(footer, bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("lying lengths %+v accepted: %v", bad, err)
		}
	}
}
