package generation

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Version is the format version this package writes.
const Version = 1

// Limits and defaults of the format.
const (
	// DefaultBlockBytes is the block size a Builder aims for when
	// BuilderOptions.BlockBytes is zero: large enough that the block index
	// of a 64 MiB object stays around 20 KiB, small enough that a read for
	// one offset fetches little it does not need.
	DefaultBlockBytes = 64 << 10
	// MaxBlockBytes bounds BuilderOptions.BlockBytes.
	MaxBlockBytes = 64 << 20
	// MaxEntryBytes bounds one entry's payload.
	MaxEntryBytes = 256 << 20
	// MaxEntries bounds the entries of one object (the count is a u32).
	MaxEntries = 1<<32 - 1
)

// Byte sizes of the fixed parts (see the package doc).
const (
	headerLen      = 36
	entryHeaderLen = 20
	metaLen        = 64
	blockRecLen    = 20
	trailerLen     = 46
	// minObjectLen is the smallest well-formed object: one block holding
	// one empty entry.
	minObjectLen = headerLen + entryHeaderLen + metaLen + blockRecLen + trailerLen
)

const magic = "NGEN"

var (
	// ErrCorrupt wraps every integrity failure: a checksum, digest, length,
	// count or identity that does not match. Corrupt bytes are never
	// returned. Retrying re-reads the same bytes: report and repair rather
	// than spin. A corrupt response from the object store wraps both this
	// and objectstore.ErrCorrupt.
	ErrCorrupt = errors.New("nereus/generation: generation object failed its integrity check")
	// ErrNotFound is returned by Reader when the object does not exist; it
	// also wraps objectstore.ErrNotFound. Whether that is an error (a
	// published generation lost) or expected (a retired one) is the
	// caller's call.
	ErrNotFound = errors.New("nereus/generation: generation object not found")
	// ErrOutOfRange: the requested offset is outside the object's
	// [Start, End).
	ErrOutOfRange = errors.New("nereus/generation: offset outside the generation's range")
	// ErrInvalidEntry: Builder.Add refused an entry (not contiguous, no
	// records, too large) or the builder was already finished; nothing was
	// added.
	ErrInvalidEntry = errors.New("nereus/generation: invalid entry")
	// ErrEmpty: Finish on a builder without entries.
	ErrEmpty = errors.New("nereus/generation: generation without entries")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry is one stream entry: the payload (an opaque protocol unit, kept byte
// for byte) covering offsets [Offset, Offset+RecordCount).
type Entry struct {
	// Offset is the first offset the entry covers.
	Offset int64
	// RecordCount is the number of offsets the entry covers (>= 1).
	RecordCount uint32
	// Timestamp is the entry's event time (Unix milliseconds, as the core
	// records it); stored, never interpreted.
	Timestamp int64
	// Payload is the entry's bytes.
	Payload []byte
}

// End is the offset after the entry.
func (e Entry) End() int64 { return e.Offset + int64(e.RecordCount) }

// Meta is what a generation object holds, as recorded in its footer.
type Meta struct {
	// Stream and Generation identify the object.
	Stream     uint64
	Generation uint64
	// Start and End bound the offsets it covers: [Start, End).
	Start, End int64
	// Entries is the number of entries.
	Entries uint32
	// Bytes is the sum of the entries' payload lengths.
	Bytes int64
	// MinTS and MaxTS bound the entries' timestamps.
	MinTS, MaxTS int64
}

// Info is everything the core records about one generation object in its
// metadata: Meta plus where the footer is and the object's digest. A reader
// needs it to read the object with one footer GET (or none, when cached)
// and one data GET, and checks the object against it.
type Info struct {
	Meta
	// Size is the object's length in bytes.
	Size int64
	// FooterOffset and FooterLength locate the footer: the last
	// FooterLength bytes of the object (FooterOffset+FooterLength == Size).
	FooterOffset, FooterLength int64
	// Digest is the SHA-256 of every byte before the 46-byte trailer
	// (see the package doc); the trailer repeats it.
	Digest [32]byte
}

// corrupt wraps ErrCorrupt with a reason.
func corrupt(why string) error { return &corruptError{why: why} }

type corruptError struct {
	why   string
	cause error
}

func (e *corruptError) Error() string {
	s := ErrCorrupt.Error() + ": " + e.why
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *corruptError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrCorrupt, e.cause}
	}
	return []error{ErrCorrupt}
}

// supported reports whether a reader of this package accepts version v.
func supported(v uint16) bool { return v == Version }

var le = binary.LittleEndian

// Kind is what an object's entries mean to the core, recorded in the
// header's flags (and so covered by the digest): a lossless generation (the
// exact committed entries, flags 0, the only kind before session 9) or a
// view (a lossy rewrite such as a compacted topic). In a view, an entry with
// an empty payload is a gap: offsets that exist in the stream but were
// dropped from the view; its record_count says how many. Both kinds have
// the same byte layout, so every check of the format holds for both.
type Kind uint16

const (
	// KindLossless: the entries are the stream's committed entries byte
	// for byte. A reader of the lossless stream may only ever use these.
	KindLossless Kind = 0
	// KindView (flag bit 0): a lossy read view; empty entries are gaps.
	KindView Kind = 1
)

// knownFlags are the header flag bits this package understands.
const knownFlags = uint16(KindView)

func putHeader(b []byte, stream, generation uint64, start int64, kind Kind) {
	copy(b[0:4], magic)
	le.PutUint16(b[4:6], Version)
	le.PutUint16(b[6:8], uint16(kind))
	le.PutUint64(b[8:16], stream)
	le.PutUint64(b[16:24], generation)
	le.PutUint64(b[24:32], uint64(start))
	le.PutUint32(b[32:36], crc32.Checksum(b[:32], castagnoli))
}

// parseHeader checks the 36-byte header and returns what it names.
func parseHeader(b []byte) (stream, generation uint64, start int64, kind Kind, err error) {
	if len(b) < headerLen {
		return 0, 0, 0, 0, corrupt("short header")
	}
	if string(b[0:4]) != magic {
		return 0, 0, 0, 0, corrupt("bad header magic")
	}
	if crc32.Checksum(b[:32], castagnoli) != le.Uint32(b[32:36]) {
		return 0, 0, 0, 0, corrupt("header checksum mismatch")
	}
	if v := le.Uint16(b[4:6]); !supported(v) {
		return 0, 0, 0, 0, corrupt("unsupported header version")
	}
	flags := le.Uint16(b[6:8])
	if flags&^knownFlags != 0 {
		return 0, 0, 0, 0, corrupt("unknown header flags")
	}
	return le.Uint64(b[8:16]), le.Uint64(b[16:24]), int64(le.Uint64(b[24:32])), Kind(flags), nil
}

func putMeta(b []byte, m Meta, blocks uint32) {
	le.PutUint64(b[0:8], m.Stream)
	le.PutUint64(b[8:16], m.Generation)
	le.PutUint64(b[16:24], uint64(m.Start))
	le.PutUint64(b[24:32], uint64(m.End))
	le.PutUint64(b[32:40], uint64(m.Bytes))
	le.PutUint64(b[40:48], uint64(m.MinTS))
	le.PutUint64(b[48:56], uint64(m.MaxTS))
	le.PutUint32(b[56:60], m.Entries)
	le.PutUint32(b[60:64], blocks)
}

func parseMeta(b []byte) (m Meta, blocks uint32) {
	m.Stream = le.Uint64(b[0:8])
	m.Generation = le.Uint64(b[8:16])
	m.Start = int64(le.Uint64(b[16:24]))
	m.End = int64(le.Uint64(b[24:32]))
	m.Bytes = int64(le.Uint64(b[32:40]))
	m.MinTS = int64(le.Uint64(b[40:48]))
	m.MaxTS = int64(le.Uint64(b[48:56]))
	m.Entries = le.Uint32(b[56:60])
	return m, le.Uint32(b[60:64])
}

// readStoreError maps an object-store read error onto this package's
// sentinels, keeping the original in the chain.
func readStoreError(key string, err error) error {
	switch {
	case errors.Is(err, objectstore.ErrNotFound):
		return &notFoundError{key: key, cause: err}
	case errors.Is(err, objectstore.ErrCorrupt):
		return &corruptError{why: "object store reports " + key + " corrupt", cause: err}
	default:
		return err
	}
}

type notFoundError struct {
	key   string
	cause error
}

func (e *notFoundError) Error() string {
	return ErrNotFound.Error() + ": " + e.key + ": " + e.cause.Error()
}

func (e *notFoundError) Unwrap() []error { return []error{ErrNotFound, e.cause} }
