package generation

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"hash/crc32"
	"math"
)

// BuilderOptions tunes a Builder. The zero value is valid.
type BuilderOptions struct {
	// BlockBytes is the target block size (default DefaultBlockBytes, at
	// most MaxBlockBytes). A read fetches whole blocks, so it is also the
	// smallest read; the block index costs 20 bytes per block.
	BlockBytes int
	// Capacity is the initial capacity of the output buffer. Set it to the
	// size at which the caller cuts objects (plus one entry) so the buffer
	// never regrows; zero starts small and grows by doubling.
	Capacity int
	// Kind is the object's kind (header flags); KindLossless by default.
	Kind Kind
}

// Builder encodes one generation object into a single buffer. Entries are
// framed and checksummed as they are added (one CRC pass over each payload);
// the running SHA-256 takes each block when it closes, while its bytes are
// still in cache. Add allocates nothing beyond amortized buffer growth. Not
// safe for concurrent use.
type Builder struct {
	stream, generation uint64
	start              int64
	blockBytes         int
	kind               Kind

	buf    []byte
	blocks []Block
	// cur is the open block (cur.Len == 0: none open).
	cur     Block
	hashed  int // buf[:hashed] has been written to digest
	digest  hash.Hash
	meta    Meta // running counts; End is the next expected offset
	done    bool
	scratch [entryHeaderLen]byte
}

// NewBuilder starts a generation object for stream and generation whose
// first entry starts at offset start.
func NewBuilder(stream, generation uint64, start int64, opts BuilderOptions) *Builder {
	bb := opts.BlockBytes
	switch {
	case bb <= 0:
		bb = DefaultBlockBytes
	case bb > MaxBlockBytes:
		bb = MaxBlockBytes
	}
	b := &Builder{blockBytes: bb, kind: opts.Kind, digest: sha256.New()}
	b.buf = make([]byte, 0, max(opts.Capacity, headerLen+entryHeaderLen))
	b.Reset(stream, generation, start)
	return b
}

// Reset starts a new object on the same buffers, so a caller building
// objects one after another (build, Put, build the next) allocates its
// output buffer once. It overwrites the bytes the previous Finish returned:
// call it only once they are no longer needed (objectstore.ObjectStore.Put
// does not retain them).
func (b *Builder) Reset(stream, generation uint64, start int64) {
	b.stream, b.generation, b.start = stream, generation, start
	b.buf = b.buf[:headerLen]
	putHeader(b.buf, stream, generation, start, b.kind)
	b.blocks = b.blocks[:0]
	b.cur = Block{}
	b.hashed = 0
	b.digest.Reset()
	b.meta = Meta{Stream: stream, Generation: generation, Start: start, End: start,
		MinTS: math.MaxInt64, MaxTS: math.MinInt64}
	b.done = false
}

// Rebase moves the start offset of a builder that holds no entry yet. A
// reader that finds the first entry it needs starting before the offset it
// planned (a trim inside a multi-record entry) rebases to that entry's
// offset: entries are indivisible, so the object must hold all of it.
func (b *Builder) Rebase(start int64) error {
	if b.done || b.meta.Entries > 0 {
		return fmt.Errorf("%w: rebase of a builder that already holds entries", ErrInvalidEntry)
	}
	b.Reset(b.stream, b.generation, start)
	return nil
}

// Add appends e. It must start where the previous entry ended (the first at
// the builder's start offset) and cover at least one record. A refused entry
// leaves the builder unchanged.
func (b *Builder) Add(e Entry) error {
	switch {
	case b.done:
		return fmt.Errorf("%w: builder already finished", ErrInvalidEntry)
	case e.Offset != b.meta.End:
		return fmt.Errorf("%w: entry at offset %d, expected %d", ErrInvalidEntry, e.Offset, b.meta.End)
	case e.RecordCount == 0:
		return fmt.Errorf("%w: entry at offset %d has no records", ErrInvalidEntry, e.Offset)
	case len(e.Payload) > MaxEntryBytes:
		return fmt.Errorf("%w: entry at offset %d is %d bytes, more than %d", ErrInvalidEntry, e.Offset, len(e.Payload), MaxEntryBytes)
	case b.meta.Entries == MaxEntries:
		return fmt.Errorf("%w: object already holds %d entries", ErrInvalidEntry, b.meta.Entries)
	case e.End() < e.Offset:
		return fmt.Errorf("%w: entry at offset %d overflows the offset space", ErrInvalidEntry, e.Offset)
	}
	frame := entryHeaderLen + len(e.Payload)
	if b.cur.Len > 0 && int(b.cur.Len)+frame > b.blockBytes {
		b.closeBlock()
	}
	if b.cur.Len == 0 {
		b.cur = Block{First: e.Offset, Pos: int64(len(b.buf))}
	}
	h := b.scratch[:]
	le.PutUint32(h[0:4], uint32(len(e.Payload)))
	le.PutUint32(h[4:8], e.RecordCount)
	le.PutUint64(h[8:16], uint64(e.Timestamp))
	crc := crc32.Update(crc32.Checksum(h[:16], castagnoli), castagnoli, e.Payload)
	le.PutUint32(h[16:20], crc)
	b.buf = append(b.buf, h...)
	b.buf = append(b.buf, e.Payload...)

	// The block CRC covers the entry headers (each carrying its entry's
	// CRC), so every payload byte is checksummed exactly once.
	b.cur.CRC = crc32.Update(b.cur.CRC, castagnoli, h)
	b.cur.Len += int64(frame)
	b.cur.Entries++
	b.meta.End = e.End()
	b.meta.Entries++
	b.meta.Bytes += int64(len(e.Payload))
	b.meta.MinTS = min(b.meta.MinTS, e.Timestamp)
	b.meta.MaxTS = max(b.meta.MaxTS, e.Timestamp)
	return nil
}

// closeBlock seals the open block: its index record, and its bytes (with
// everything before it not yet hashed) into the digest while they are still
// in cache.
func (b *Builder) closeBlock() {
	b.blocks = append(b.blocks, b.cur)
	b.digest.Write(b.buf[b.hashed:])
	b.hashed = len(b.buf)
	b.cur = Block{}
}

// Len is the size the object would have if Finish were called now (the
// caller cuts objects by it).
func (b *Builder) Len() int {
	n := len(b.blocks)
	if b.cur.Len > 0 {
		n++
	}
	return len(b.buf) + metaLen + n*blockRecLen + trailerLen
}

// Entries is the number of entries added so far.
func (b *Builder) Entries() int { return int(b.meta.Entries) }

// End is the offset the next entry must start at.
func (b *Builder) End() int64 { return b.meta.End }

// Finish seals the object and returns its bytes and Info. The bytes alias
// the builder's buffer until Reset. A builder without entries returns
// ErrEmpty; after Finish, Add fails.
func (b *Builder) Finish() ([]byte, Info, error) {
	if b.done {
		return nil, Info{}, fmt.Errorf("%w: builder already finished", ErrInvalidEntry)
	}
	if b.meta.Entries == 0 {
		return nil, Info{}, ErrEmpty
	}
	b.closeBlock()
	b.done = true
	footerOffset := len(b.buf)
	footerLen := metaLen + len(b.blocks)*blockRecLen + trailerLen
	b.buf = grow(b.buf, footerLen)
	f := b.buf[footerOffset : footerOffset+footerLen]
	putMeta(f, b.meta, uint32(len(b.blocks)))
	p := f[metaLen:]
	for _, blk := range b.blocks {
		le.PutUint64(p[0:8], uint64(blk.First))
		le.PutUint32(p[8:12], uint32(blk.Len))
		le.PutUint32(p[12:16], blk.Entries)
		le.PutUint32(p[16:20], blk.CRC)
		p = p[blockRecLen:]
	}
	// p is now the trailer.
	b.digest.Write(b.buf[b.hashed : len(b.buf)-trailerLen])
	var info Info
	info.Meta = b.meta
	info.Size = int64(len(b.buf))
	info.FooterOffset = int64(footerOffset)
	info.FooterLength = int64(footerLen)
	b.digest.Sum(info.Digest[:0])
	copy(p[0:32], info.Digest[:])
	le.PutUint32(p[32:36], uint32(footerLen))
	le.PutUint16(p[36:38], Version)
	le.PutUint32(p[38:42], crc32.Checksum(f[:footerLen-8], castagnoli))
	copy(p[42:46], magic)
	return b.buf, info, nil
}

// grow extends b by n bytes (contents of the new bytes unspecified).
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}
