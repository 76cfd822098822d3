package generation

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// randomEntries returns n contiguous entries from start with payload sizes
// drawn log-uniformly from [minSize, maxSize] and record counts from
// [1, maxRecords].
func randomEntries(rng *rand.Rand, start int64, n, minSize, maxSize int, maxRecords uint32) []Entry {
	out := make([]Entry, n)
	var seed [32]byte
	for i := range seed {
		seed[i] = byte(rng.Uint32())
	}
	fill := rand.NewChaCha8(seed)
	off := start
	ts := int64(1_700_000_000_000)
	for i := range out {
		size := logUniform(rng, minSize, maxSize)
		p := make([]byte, size)
		_, _ = fill.Read(p)
		rc := 1 + rng.Uint32N(maxRecords)
		// Timestamps mostly rise but sometimes step back (Kafka producers
		// set them), and can be negative (-1: no timestamp).
		ts += int64(rng.IntN(2000)) - 500
		if rng.IntN(50) == 0 {
			ts = -1
		}
		out[i] = Entry{Offset: off, RecordCount: rc, Timestamp: ts, Payload: p}
		off += int64(rc)
	}
	return out
}

func logUniform(rng *rand.Rand, lo, hi int) int {
	if hi <= lo {
		return lo
	}
	// Pick a bit length, then a value of about that size.
	bitsLo, bitsHi := bitLen(lo), bitLen(hi)
	b := bitsLo + rng.IntN(bitsHi-bitsLo+1)
	v := 1 << b
	v += rng.IntN(v)
	return min(max(v, lo), hi)
}

func bitLen(v int) int {
	n := 0
	for v > 1 {
		v >>= 1
		n++
	}
	return n
}

// build encodes entries into one object.
func build(t testing.TB, stream, gen uint64, entries []Entry, opts BuilderOptions) ([]byte, Info) {
	t.Helper()
	b := NewBuilder(stream, gen, entries[0].Offset, opts)
	for _, e := range entries {
		if err := b.Add(e); err != nil {
			t.Fatalf("Add(%d): %v", e.Offset, err)
		}
	}
	obj, info, err := b.Finish()
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return obj, info
}

// indexOf returns the index of the entry containing offset.
func indexOf(entries []Entry, offset int64) int {
	lo, hi := 0, len(entries)
	for lo < hi {
		m := (lo + hi) / 2
		if entries[m].End() <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// checkPrefix verifies that got is a non-empty run of want starting at the
// entry containing from: the read contract.
func checkPrefix(got, want []Entry, from int64) error {
	i := indexOf(want, from)
	if len(got) == 0 {
		return fmt.Errorf("read at %d returned no entries", from)
	}
	if len(got) > len(want)-i {
		return fmt.Errorf("read at %d returned %d entries, only %d exist from there", from, len(got), len(want)-i)
	}
	for k, g := range got {
		w := want[i+k]
		if g.Offset != w.Offset || g.RecordCount != w.RecordCount || g.Timestamp != w.Timestamp || !bytes.Equal(g.Payload, w.Payload) {
			return fmt.Errorf("read at %d: entry %d is {off %d, n %d, ts %d, %d B}, want {off %d, n %d, ts %d, %d B}",
				from, k, g.Offset, g.RecordCount, g.Timestamp, len(g.Payload), w.Offset, w.RecordCount, w.Timestamp, len(w.Payload))
		}
		if cap(g.Payload) != len(g.Payload) {
			return fmt.Errorf("read at %d: entry %d payload capacity %d exceeds its length %d", from, k, cap(g.Payload), len(g.Payload))
		}
	}
	return nil
}

// readSpan is the Reader's path without a store: Span then DecodeSpan on
// the object's bytes.
func readSpan(f *Footer, obj []byte, from int64, maxBytes int) ([]Entry, error) {
	off, n, err := f.Span(from, maxBytes)
	if err != nil {
		return nil, err
	}
	lo, hi := min(off, int64(len(obj))), min(off+n, int64(len(obj)))
	return DecodeSpan(f, obj[lo:hi], off, from)
}

func mustCorrupt(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: got %v, want ErrCorrupt", what, err)
	}
}
