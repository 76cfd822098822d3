package generation

import (
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
)

// DecodeSpan decodes the blocks in raw, which holds the object's bytes
// starting at byte position off (a block start, as Span returns), and
// returns the entries that end after from, in offset order. Every entry of
// every block in raw is checked against its own CRC32C (header and
// payload), every block against its CRC32C from f (over its entry headers),
// and both against the index (offsets, counts, timestamp bounds) before
// anything is returned; any mismatch, or a block cut short by the end of
// raw, wraps ErrCorrupt and returns no entries. Whole blocks that fit in raw
// are decoded: a raw shorter than Span's length that ends on a block
// boundary yields fewer entries (Reader.Read refuses such a short read).
//
// The returned payloads alias raw (capacity clipped to each payload, so an
// append to one cannot overwrite another); DecodeSpan never modifies raw.
func DecodeSpan(f *Footer, raw []byte, off int64, from int64) ([]Entry, error) {
	return decodeSpanAppend(f, raw, off, from, nil)
}

// decodeSpanAppend is DecodeSpan appending to dst[:0] (a slice reused with
// a pooled Buffer), allocating only if dst is too small.
func decodeSpanAppend(f *Footer, raw []byte, off int64, from int64, dst []Entry) ([]Entry, error) {
	d, err := newSpanDecoder(f, off, int64(len(raw)), from, dst)
	if err != nil {
		return nil, err
	}
	if err := d.filled(raw); err != nil {
		return nil, err
	}
	return d.finish()
}

// spanDecoder decodes the n bytes of an object from byte position off (a
// block start) block by block as they arrive: filled decodes, and checks,
// every block that the bytes in hand now hold whole, so a reader can check
// the first pieces of a span while the rest is still being read. finish
// says whether every block of the span was decoded. Its checks are
// DecodeSpan's; nothing it returns was not checked.
type spanDecoder struct {
	f         *Footer
	off, from int64
	next, end int // blocks [next, end) of f are still to decode
	out       []Entry
}

func newSpanDecoder(f *Footer, off, n, from int64, dst []Entry) (spanDecoder, error) {
	i := sort.Search(len(f.blocks), func(i int) bool { return f.blocks[i].Pos >= off })
	if i == len(f.blocks) || f.blocks[i].Pos != off {
		return spanDecoder{}, fmt.Errorf("nereus/generation: span at byte %d is not a block start", off)
	}
	end := off + n
	j, entries := i, 0
	for ; j < len(f.blocks) && f.blocks[j].Pos < end; j++ {
		if f.blocks[j].Pos+f.blocks[j].Len > end {
			return spanDecoder{}, corrupt(fmt.Sprintf("span ends inside block %d (short read or truncated object)", j))
		}
		entries += int(f.blocks[j].Entries)
	}
	if j == i {
		return spanDecoder{}, corrupt("empty span (short read or truncated object)")
	}
	// Entries wholly before from are skipped, so this may over-allocate by
	// part of one block; counts are bounded by the span length (every
	// entry has a 20-byte header), so it never exceeds n/20.
	out := dst[:0]
	if cap(out) < entries {
		out = make([]Entry, 0, entries)
	}
	return spanDecoder{f: f, off: off, from: from, next: i, end: j, out: out}, nil
}

// filled decodes the blocks that raw (the span's bytes from its start, a
// prefix that grows between calls; the bytes already decoded must not
// change) now holds whole and that are not decoded yet.
func (d *spanDecoder) filled(raw []byte) error {
	have := d.off + int64(len(raw))
	for ; d.next < d.end; d.next++ {
		b := d.f.blocks[d.next]
		if b.Pos+b.Len > have {
			return nil
		}
		var err error
		d.out, err = decodeBlock(d.f, d.next, raw[b.Pos-d.off:b.Pos-d.off+b.Len], d.from, d.out, nil)
		if err != nil {
			return err
		}
	}
	return nil
}

// finish returns the entries of a span whose every block was decoded.
func (d *spanDecoder) finish() ([]Entry, error) {
	if d.next < d.end {
		return nil, corrupt(fmt.Sprintf("span cut short at block %d (short read or truncated object)", d.next))
	}
	return d.out, nil
}

// blockStats accumulates what Verify cross-checks against the meta.
type blockStats struct {
	minTS, maxTS int64
}

// decodeBlock verifies block k of f held in data and appends its entries
// that end after from to out. With st non-nil it also accumulates stats and
// appends nothing.
func decodeBlock(f *Footer, k int, data []byte, from int64, out []Entry, st *blockStats) ([]Entry, error) {
	b := f.blocks[k]
	offset := b.First
	p := data
	var blockCRC uint32
	for e := uint32(0); e < b.Entries; e++ {
		if len(p) < entryHeaderLen {
			return nil, corrupt(fmt.Sprintf("block %d: entry %d header cut short", k, e))
		}
		size := uint64(le.Uint32(p[0:4]))
		count := le.Uint32(p[4:8])
		ts := int64(le.Uint64(p[8:16]))
		sum := le.Uint32(p[16:20])
		if size > uint64(len(p)-entryHeaderLen) || size > MaxEntryBytes {
			return nil, corrupt(fmt.Sprintf("block %d: entry %d length %d overruns the block", k, e, size))
		}
		payload := p[entryHeaderLen : entryHeaderLen+int(size) : entryHeaderLen+int(size)]
		blockCRC = crc32.Update(blockCRC, castagnoli, p[:entryHeaderLen])
		if crc32.Update(crc32.Checksum(p[:16], castagnoli), castagnoli, payload) != sum {
			return nil, corrupt(fmt.Sprintf("block %d: entry %d checksum mismatch", k, e))
		}
		if count == 0 {
			return nil, corrupt(fmt.Sprintf("block %d: entry %d has no records", k, e))
		}
		if ts < f.info.MinTS || ts > f.info.MaxTS {
			return nil, corrupt(fmt.Sprintf("block %d: entry %d timestamp outside the footer's bounds", k, e))
		}
		next := offset + int64(count)
		if next > f.blockEnd(k) || next < offset {
			return nil, corrupt(fmt.Sprintf("block %d: entry %d runs past the block's records", k, e))
		}
		switch {
		case st != nil:
			st.minTS = min(st.minTS, ts)
			st.maxTS = max(st.maxTS, ts)
		case next > from:
			out = append(out, Entry{Offset: offset, RecordCount: count, Timestamp: ts, Payload: payload})
		}
		offset = next
		p = p[entryHeaderLen+int(size):]
	}
	if len(p) != 0 {
		return nil, corrupt(fmt.Sprintf("block %d: %d bytes after its last entry", k, len(p)))
	}
	if blockCRC != b.CRC {
		return nil, corrupt(fmt.Sprintf("block %d checksum mismatch", k))
	}
	if offset != f.blockEnd(k) {
		return nil, corrupt(fmt.Sprintf("block %d: entries end at %d, the index says %d", k, offset, f.blockEnd(k)))
	}
	return out, nil
}

// Verify checks a whole object without any metadata: trailer, footer and
// header agree, the SHA-256 digest matches, and every block and entry
// passes its checksum and the index. It returns the object's Info, which
// equals the Info Finish returned for it. Use it as the content proof of a
// PUT whose outcome was unknown (compare the Info) and to rebuild an index
// from the objects themselves.
func Verify(obj []byte) (Info, error) {
	info, _, err := VerifyKind(obj)
	return info, err
}

// VerifyKind is Verify that also returns the object's Kind (from the
// header, which the digest covers). Whoever rebuilds an index from objects
// must use it: a view must never be taken for a lossless generation.
func VerifyKind(obj []byte) (Info, Kind, error) {
	info, kind, err := verify(obj)
	if err != nil {
		return Info{}, 0, err
	}
	return info, kind, nil
}

func verify(obj []byte) (Info, Kind, error) {
	if len(obj) < minObjectLen {
		return Info{}, 0, corrupt("object too short")
	}
	t := obj[len(obj)-trailerLen:]
	n := uint64(le.Uint32(t[32:36]))
	if n > uint64(len(obj)) {
		return Info{}, 0, corrupt("footer length exceeds the object")
	}
	f, err := parseFooter(obj[len(obj)-int(n):], int64(len(obj)))
	if err != nil {
		return Info{}, 0, err
	}
	stream, gen, start, kind, err := parseHeader(obj[:headerLen])
	if err != nil {
		return Info{}, 0, err
	}
	if stream != f.info.Stream || gen != f.info.Generation || start != f.info.Start {
		return Info{}, 0, corrupt("header and footer name different objects")
	}
	if sha256.Sum256(obj[:len(obj)-trailerLen]) != f.info.Digest {
		return Info{}, 0, corrupt("digest mismatch")
	}
	st := blockStats{minTS: math.MaxInt64, maxTS: math.MinInt64}
	for k, b := range f.blocks {
		if _, err := decodeBlock(f, k, obj[b.Pos:b.Pos+b.Len], 0, nil, &st); err != nil {
			return Info{}, 0, err
		}
	}
	if st.minTS != f.info.MinTS || st.maxTS != f.info.MaxTS {
		return Info{}, 0, corrupt("timestamp bounds do not match the entries")
	}
	return f.info, kind, nil
}
