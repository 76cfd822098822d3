// Package generation owns the byte format of generation objects and reading
// them back. A generation object is a read-optimized, immutable copy of a
// committed offset range [Start, End) of one stream: its entries contiguous
// in offset order, each payload kept byte for byte (a Kafka RecordBatch or a
// Pulsar entry comes back exactly as it went in), a CRC32C per entry and per
// block, a SHA-256 digest of the object, and a footer index so that a read at
// any offset costs one ranged GET once the footer is known (Reader caches
// parsed footers).
//
// It must never decide visibility (whether a generation is published, which
// generation serves an offset, whether a range is still committed: that is
// the stream core's generation index), never serve bytes that fail a
// checksum, and never interpret payloads. It imports nothing above
// objectstore and internal/...; the core imports it.
//
// # Model
//
// A Builder appends entries (each covering [Offset, Offset+RecordCount),
// RecordCount >= 1, each starting where the previous one ended) into one
// output buffer, cutting blocks of about BlockBytes, and Finish seals the
// object and returns its Info: the identity, range and counts (Meta), the
// object size, where its footer is, and its digest. The core stores the Info
// in its generation-index record; every read passes it back, and ParseFooter
// refuses a footer that does not match it field for field (stream, generation,
// range, counts, size, digest), so an object at a key can only be read as
// the object the metadata says is there.
//
// Read path: Footer.Span maps an offset to the byte range of the block that
// holds it (plus following blocks up to a byte budget and, with
// Footer.SpanEntries, only as many as an entry bound needs), one GetRange fetches
// exactly those blocks, and DecodeSpan verifies each block's CRC32C and each
// entry's CRC32C before returning entries. Returned payloads alias the
// fetched buffer (no copy): the buffer is never reused, so callers may keep
// them, but a kept payload keeps its whole span buffer reachable. On a
// store that reads a range in pieces (objectstore.PieceReader: fsstore) the
// span is read in 512 KiB pieces (verifyPiece) through one open and each
// block is checked as soon as its bytes are in, while the store reads the
// next piece, so a read from the device overlaps its own checking; nothing
// is returned before every block of the span passed, and a bad block stops
// the read. With
// Reader.SetReadAhead, the span after a sequential read is fetched in the
// background, into a pooled span buffer, once the read's own bytes are in
// hand and before they are verified (and verified like any other when it
// is read); a store that can tell (objectstore.CacheProber) is asked first,
// and a span already in memory is not fetched ahead, so a warm reader runs
// as without read-ahead.
//
// Verify checks a whole object without any metadata (header, footer, digest,
// every block and entry, all counts): it is the content proof of a PUT whose
// outcome was unknown and the basis of index repair, since every object
// names its stream, generation and range.
//
// Hostile bytes: every length is checked against the bytes at hand before it
// is used, allocations are bounded by the input size, decoders never panic,
// and every integrity failure wraps ErrCorrupt.
//
// # Byte layout (version 1)
//
// All integers are little-endian; CRC32C is CRC-32 with the Castagnoli
// polynomial; offsets and timestamps are two's-complement int64.
//
//	object := header | block+ | footer
//
//	header (36 bytes):
//	  magic "NGEN" [4] | version u16 (=1) | flags u16 |
//	  (flags: bit 0 = KindView, a lossy read view in which an entry with
//	  an empty payload is a gap; every other bit must be 0. Objects written
//	  before session 9 have flags 0 = KindLossless, byte for byte as before.)
//	  stream u64 | generation u64 | start i64 |
//	  crc32c u32 (covers the 32 bytes before it)
//
//	block := entry+
//	  Blocks tile [36, footer_offset) with no gaps. A block holds whole
//	  entries and is at most BlockBytes long unless it is one entry that
//	  alone is longer. Its first entry starts at its first offset (from the
//	  block index); each next entry starts where the previous one ended.
//
//	entry := payload_len u32 | record_count u32 | timestamp i64 |
//	         crc32c u32 | payload [payload_len]
//	  crc32c covers the 16 bytes before it and the payload.
//	  record_count >= 1; payload_len <= MaxEntryBytes.
//
//	footer := meta | block_index | trailer
//	  footer_offset = object size - footer_len
//
//	meta (64 bytes):
//	  stream u64 | generation u64 | start i64 | end i64 |
//	  payload_bytes i64 | min_ts i64 | max_ts i64 |
//	  entries u32 | block_count u32
//
//	block_index := block_count × (20 bytes):
//	  first_offset i64 | length u32 | entries u32 | crc32c u32
//	  crc32c covers the block's entry headers (the 20 bytes before each
//	  payload, concatenated in order). Each header carries its entry's
//	  CRC32C over header and payload, so every byte of the block is
//	  covered, a block cannot lose, gain, reorder or swap an entry
//	  unnoticed, and a read checks each payload byte once, not twice.
//	  A block's position is 36 plus the lengths of the blocks before it;
//	  first offsets strictly increase, the first is start, and each
//	  block's records end where the next block (or, for the last, end)
//	  begins.
//
//	trailer (46 bytes, the last bytes of the object):
//	  digest [32] | footer_len u32 | version u16 (=1) | crc32c u32 |
//	  magic "NGEN" [4]
//	  digest = SHA-256 of every byte of the object before the trailer;
//	  crc32c covers the footer from its first byte through version.
//
// Checks that hold for every accepted object: header, meta and block index
// agree on stream, generation and start; entries and payload_bytes are the
// sums over the blocks (payload_bytes = Σ length − 20 × entries); min_ts and
// max_ts bound every entry's timestamp; start < end.
//
// # Versions
//
// Readers accept version 1 (the header and trailer versions must match). To
// change the format: add version N+1, keep reading N (readers accept the
// current version and the one before it), write only the newest, and add a
// golden fixture for N+1 next to testdata/v1.gen; TestGoldenV1 must keep
// passing unchanged.
package generation
