package generation

import (
	"fmt"
	"hash/crc32"
	"sort"
)

// Block is one entry of a footer's block index.
type Block struct {
	// First is the offset of the block's first entry.
	First int64
	// Pos and Len are the block's byte range in the object.
	Pos, Len int64
	// Entries is the number of entries in the block.
	Entries uint32
	// CRC is the CRC32C of the block's entry headers (see the package
	// doc: each header carries its entry's own CRC32C).
	CRC uint32
}

// Footer is a parsed, verified footer: the object's Info and its block
// index. It is immutable and safe to share between goroutines.
type Footer struct {
	info   Info
	blocks []Block
}

// Info is the Info the footer was verified against (or, from Verify,
// derived from).
func (f *Footer) Info() Info { return f.info }

// NumBlocks is the number of blocks.
func (f *Footer) NumBlocks() int { return len(f.blocks) }

// Block returns block i (0 <= i < NumBlocks).
func (f *Footer) Block(i int) Block { return f.blocks[i] }

// blockEnd is the offset after block i's last record.
func (f *Footer) blockEnd(i int) int64 {
	if i+1 < len(f.blocks) {
		return f.blocks[i+1].First
	}
	return f.info.End
}

// memSize estimates the bytes a cached footer occupies.
func (f *Footer) memSize() int64 { return 160 + int64(len(f.blocks))*32 }

// ParseFooter parses the footer bytes of the object described by info (the
// last info.FooterLength bytes of the object) and checks them against info:
// structure and checksum first, then every field of the trailer and meta
// must equal what info says. Any mismatch wraps ErrCorrupt.
func ParseFooter(footer []byte, info Info) (*Footer, error) {
	if int64(len(footer)) != info.FooterLength {
		return nil, corrupt(fmt.Sprintf("footer is %d bytes, the metadata says %d", len(footer), info.FooterLength))
	}
	if info.Size < minObjectLen || info.FooterOffset < 0 || info.FooterOffset > info.Size-info.FooterLength ||
		info.FooterOffset+info.FooterLength != info.Size {
		return nil, corrupt("footer position inconsistent with the object size")
	}
	f, err := parseFooter(footer, info.Size)
	if err != nil {
		return nil, err
	}
	if f.info != info {
		return nil, corrupt(fmt.Sprintf("footer describes %+v, the metadata says %+v", f.info, info))
	}
	return f, nil
}

// parseFooter parses and checks a footer taken from the end of an object of
// size bytes, deriving the Info from the footer alone.
func parseFooter(footer []byte, size int64) (*Footer, error) {
	n := len(footer)
	if n < metaLen+blockRecLen+trailerLen {
		return nil, corrupt("short footer")
	}
	if int64(n) > size-headerLen-entryHeaderLen {
		return nil, corrupt("footer longer than the object allows")
	}
	t := footer[n-trailerLen:]
	if string(t[42:46]) != magic {
		return nil, corrupt("bad trailer magic")
	}
	if crc32.Checksum(footer[:n-8], castagnoli) != le.Uint32(t[38:42]) {
		return nil, corrupt("footer checksum mismatch")
	}
	if v := le.Uint16(t[36:38]); !supported(v) {
		return nil, corrupt(fmt.Sprintf("unsupported footer version %d", v))
	}
	if int(le.Uint32(t[32:36])) != n {
		return nil, corrupt("trailer footer length mismatch")
	}
	meta, count := parseMeta(footer[:metaLen])
	if uint64(count)*blockRecLen != uint64(n-metaLen-trailerLen) || count == 0 {
		return nil, corrupt("block count does not match the footer length")
	}
	f := &Footer{blocks: make([]Block, count)}
	f.info.Meta = meta
	f.info.Size = size
	f.info.FooterOffset = size - int64(n)
	f.info.FooterLength = int64(n)
	copy(f.info.Digest[:], t[0:32])

	if meta.Start >= meta.End {
		return nil, corrupt("empty or inverted range")
	}
	if meta.MinTS > meta.MaxTS {
		return nil, corrupt("inverted timestamp bounds")
	}
	idx := footer[metaLen : n-trailerLen]
	pos := int64(headerLen)
	var entries, framed int64
	for i := range f.blocks {
		r := idx[i*blockRecLen:]
		b := Block{
			First:   int64(le.Uint64(r[0:8])),
			Pos:     pos,
			Len:     int64(le.Uint32(r[8:12])),
			Entries: le.Uint32(r[12:16]),
			CRC:     le.Uint32(r[16:20]),
		}
		switch {
		case b.Entries == 0:
			return nil, corrupt(fmt.Sprintf("block %d holds no entries", i))
		case b.Len < int64(b.Entries)*entryHeaderLen:
			return nil, corrupt(fmt.Sprintf("block %d too short for its entries", i))
		case b.Len > f.info.FooterOffset-pos:
			return nil, corrupt(fmt.Sprintf("block %d runs into the footer", i))
		case i == 0 && b.First != meta.Start:
			return nil, corrupt("first block does not start at the range start")
		case i > 0 && b.First <= f.blocks[i-1].First:
			return nil, corrupt(fmt.Sprintf("block %d does not start after block %d", i, i-1))
		case i > 0 && b.First-f.blocks[i-1].First < int64(f.blocks[i-1].Entries):
			// Every entry covers at least one record. (A difference too
			// large for int64 wraps negative and is refused too: no real
			// block spans that many records.)
			return nil, corrupt(fmt.Sprintf("block %d starts before block %d's records end", i, i-1))
		}
		f.blocks[i] = b
		pos += b.Len
		entries += int64(b.Entries)
		framed += b.Len
	}
	last := f.blocks[count-1]
	switch {
	case pos != f.info.FooterOffset:
		return nil, corrupt("blocks do not end at the footer")
	case meta.End <= last.First || meta.End-last.First < int64(last.Entries):
		return nil, corrupt("last block does not end at the range end")
	case entries != int64(meta.Entries):
		return nil, corrupt("entry count mismatch")
	case framed-entries*entryHeaderLen != meta.Bytes:
		return nil, corrupt("payload byte count mismatch")
	}
	return f, nil
}

// blockFor returns the index of the block holding offset (Start <= offset <
// End).
func (f *Footer) blockFor(offset int64) int {
	return sort.Search(len(f.blocks), func(i int) bool { return f.blocks[i].First > offset }) - 1
}

// firstAt returns the first offset of the block starting at byte pos; ok
// is false when no block starts there (pos is the data's end, or not a
// block start).
func (f *Footer) firstAt(pos int64) (first int64, ok bool) {
	i := sort.Search(len(f.blocks), func(i int) bool { return f.blocks[i].Pos >= pos })
	if i == len(f.blocks) || f.blocks[i].Pos != pos {
		return 0, false
	}
	return f.blocks[i].First, true
}

// Span returns the byte range [off, off+length) to fetch for a read from
// offset from: the block holding from, then following blocks while the
// total stays within maxBytes (at least the first block, whatever
// maxBytes). from outside [Start, End) returns ErrOutOfRange.
func (f *Footer) Span(from int64, maxBytes int) (off, length int64, err error) {
	return f.SpanEntries(from, maxBytes, 0)
}

// SpanEntries is Span that also stops adding blocks once they hold
// maxEntries entries ending after from (maxEntries <= 0: no entry bound).
// A reader that will keep only that many entries then fetches and verifies
// about what it keeps instead of a whole byte budget's worth: a read of
// 1,000 entries of 1 KiB with an 8 MiB budget fetches ~1 MiB, not 8. How
// many entries of the block holding from end after from is only known once
// it is decoded; it is counted as the fewest possible (every entry before
// from covers at least one offset), so the span holds at least maxEntries
// such entries whenever the object and maxBytes allow, and at most one
// block more than they need when entries cover one offset each (or from
// starts a block).
func (f *Footer) SpanEntries(from int64, maxBytes, maxEntries int) (off, length int64, err error) {
	if from < f.info.Start || from >= f.info.End {
		return 0, 0, fmt.Errorf("%w: offset %d, generation covers [%d, %d)", ErrOutOfRange, from, f.info.Start, f.info.End)
	}
	i := f.blockFor(from)
	off, length = f.blocks[i].Pos, f.blocks[i].Len
	have := max(int64(f.blocks[i].Entries)-(from-f.blocks[i].First), 1)
	want := int64(maxEntries)
	if maxEntries <= 0 {
		want = int64(MaxEntries) + 1 // more than any object holds
	}
	budget := int64(maxBytes)
	for j := i + 1; j < len(f.blocks) && have < want && length+f.blocks[j].Len <= budget; j++ {
		length += f.blocks[j].Len
		have += int64(f.blocks[j].Entries)
	}
	return off, length, nil
}
