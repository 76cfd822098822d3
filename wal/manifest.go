package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
)

// Footer/format constants.
const (
	// FooterVersion is the manifest footer version this package writes: the
	// v3 layout plus a CRC32C over the whole object. The manifest is the
	// ordering authority, so a silent flip here misdirects the whole log, not
	// one batch of records.
	FooterVersion uint16 = 4

	footerV1 uint16 = 1 // buffer footer: entries without Count, no snapshot block
	footerV2 uint16 = 2 // + snapshot block
	footerV3 uint16 = 3 // + per-entry record Count
	footerV4 uint16 = 4 // + CRC32C of everything before it

	// Sizes of the fixed parts of the layout (see the package doc).
	coreSizeV1toV3  = 4 + 8 + 8 + 2     // entry count, next sequence, epoch, version
	coreSizeV4      = 4 + 8 + 8 + 4 + 2 // ... plus crc32c before the version
	snapFixedSize   = 2 + 8 + 8         // loc_len, through_seq, created_ms
	entryLenSize    = 4                 // body_len prefix of every entry
	legacyBodyMin   = 8 + 2 + 4         // seq, loc_len, md_count
	currentBodyMin  = 8 + 4 + 2 + 4     // seq, count, loc_len, md_count
	recordMetaFixed = 4 + 8 + 4         // start_index, ingestion_ms, payload_len
)

// castagnoli is the CRC-32C table used for every checksum in this package
// (hardware-accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SnapshotPointer identifies the base snapshot a replica bootstraps from. The
// zero value (empty Location) means "no snapshot has been taken yet". The
// snapshot object's format belongs to the application; the wal package only
// carries the pointer.
type SnapshotPointer struct {
	// Location is the object key of the snapshot.
	Location string
	// ThroughSeq is the last record sequence the snapshot covers: a replica
	// restoring it continues at ThroughSeq+1.
	ThroughSeq uint64
	// CreatedUnixMs is when the snapshot was taken (milliseconds since epoch).
	CreatedUnixMs int64
}

// IsZero reports whether no snapshot has been recorded.
func (s SnapshotPointer) IsZero() bool { return s.Location == "" }

// RecordMeta is a per-range annotation attached to a manifest entry,
// delimiting the run of framed records beginning at StartIndex. The range
// ends where the next RecordMeta of the entry starts (or at the segment end).
type RecordMeta struct {
	// StartIndex is the index, within the segment, of the first record of
	// the range.
	StartIndex uint32
	// IngestionTimeMs is when the producer sealed the records (ms since epoch).
	IngestionTimeMs int64
	// Payload is the metadata passed to Producer.Append for these records.
	Payload []byte
}

// Entry is one committed manifest entry: a segment object plus the metadata
// ranges describing the framed records it holds. The entry owns the record
// sequence range [Sequence, Sequence+RangeSize()); record i has sequence
// Sequence+i. Count is the number of framed records in the segment; Count==0
// is the legacy per-entry sentinel (one sequence slot, all records share
// Sequence).
type Entry struct {
	Sequence uint64
	Count    uint32
	Location string
	Metadata []RecordMeta
}

// RangeSize is the number of record sequences the entry occupies: Count for a
// per-record entry, or 1 for a legacy (Count==0) entry.
func (e Entry) RangeSize() uint64 {
	if e.Count == 0 {
		return 1
	}
	return uint64(e.Count)
}

// End is the exclusive upper bound of the entry's record-sequence range.
func (e Entry) End() uint64 { return e.Sequence + e.RangeSize() }

// Contains reports whether record sequence seq falls within this entry.
func (e Entry) Contains(seq uint64) bool { return seq >= e.Sequence && seq < e.End() }

// entryRef locates one encoded entry inside Manifest.enc.
type entryRef struct {
	off   int // offset of the entry's body_len word
	seq   uint64
	count uint32
}

func (r entryRef) end() uint64 {
	if r.count == 0 {
		return r.seq + 1
	}
	return r.seq + uint64(r.count)
}

// Manifest is the in-memory, mutable view of a replication-log manifest.
//
// Live entries are held encoded, back to back, in the current (v3/v4) entry
// encoding, with a small index of (offset, sequence, count) per entry; a
// parsed legacy manifest is normalized to that encoding on load. Append is
// amortized O(1); lookups (Locate, EntriesContaining, ...) binary-search the
// index and decode only the entries they return; Bytes and TruncateThrough are
// O(size).
//
// Invariants (checked by ParseManifest, kept by every method):
//   - entries tile the sequence space: entry i+1 starts at entry i's End();
//   - the last entry's End() is at most NextSequence() (equal for every
//     manifest this package writes; tolerated below it for legacy objects);
//   - metadata StartIndex values of an entry are non-decreasing and, for a
//     per-record entry, below Count.
//
// Manifest is not safe for concurrent mutation; the writer owns one instance.
type Manifest struct {
	enc          []byte
	refs         []entryRef
	nextSequence uint64
	epoch        uint64
	snapshot     SnapshotPointer
}

// NewManifest returns an empty manifest at epoch 0 with no snapshot.
func NewManifest() *Manifest { return &Manifest{} }

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// ParseManifest decodes a serialized manifest. It accepts v4 (this package),
// v3, v2 and v1. Legacy (v1/v2) entries are normalized in memory to the
// current encoding with Count==0, so downstream decoding is uniform; a
// re-commit upgrades the object to v4. Every failure wraps ErrCorrupt: v4
// objects are verified by their CRC32C before any field is trusted, and all
// versions are checked structurally (lengths, tiling of sequences). Legacy
// versions carry no checksum, so a flipped bit inside one of their payload
// bytes cannot be detected. data is not retained.
func ParseManifest(data []byte) (*Manifest, error) {
	n := len(data)
	if n < coreSizeV1toV3 {
		return nil, corruptf("manifest too short for a footer (%d bytes)", n)
	}
	version := binary.LittleEndian.Uint16(data[n-2:])
	tail := n - 2
	switch version {
	case footerV1, footerV2, footerV3:
	case footerV4:
		if n < coreSizeV4+snapFixedSize {
			return nil, corruptf("manifest too short for a v4 footer (%d bytes)", n)
		}
		want := binary.LittleEndian.Uint32(data[n-6 : n-2])
		if got := crc32.Checksum(data[:n-6], castagnoli); got != want {
			return nil, corruptf("manifest crc32c %08x, stored %08x", got, want)
		}
		tail -= 4
	default:
		return nil, corruptf("unsupported manifest footer version %d", version)
	}
	m := &Manifest{
		epoch:        binary.LittleEndian.Uint64(data[tail-8 : tail]),
		nextSequence: binary.LittleEndian.Uint64(data[tail-16 : tail-8]),
	}
	count := uint64(binary.LittleEndian.Uint32(data[tail-20 : tail-16]))
	bodyEnd := tail - 20
	if version >= footerV2 {
		if bodyEnd < snapFixedSize {
			return nil, corruptf("manifest too short for the snapshot block (%d bytes)", n)
		}
		created := int64(binary.LittleEndian.Uint64(data[bodyEnd-8 : bodyEnd]))
		through := binary.LittleEndian.Uint64(data[bodyEnd-16 : bodyEnd-8])
		locLen := int(binary.LittleEndian.Uint16(data[bodyEnd-18 : bodyEnd-16]))
		locStart := bodyEnd - snapFixedSize - locLen
		if locStart < 0 {
			return nil, corruptf("snapshot location length %d overruns the manifest", locLen)
		}
		m.snapshot = SnapshotPointer{
			Location:      string(data[locStart : bodyEnd-snapFixedSize]),
			ThroughSeq:    through,
			CreatedUnixMs: created,
		}
		bodyEnd = locStart
	}
	region := data[:bodyEnd]
	hasCount := version >= footerV3
	minEntry := entryLenSize + legacyBodyMin
	if hasCount {
		minEntry = entryLenSize + currentBodyMin
	}
	if count > uint64(len(region)/minEntry) {
		return nil, corruptf("entry count %d cannot fit in %d bytes", count, len(region))
	}
	m.refs = make([]entryRef, 0, count)
	if hasCount {
		m.enc = make([]byte, 0, len(region))
	} else {
		m.enc = make([]byte, 0, len(region)+4*int(count))
	}
	off := 0
	for i := uint64(0); i < count; i++ {
		h, next, err := scanEntry(region, off, hasCount)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		ref := entryRef{off: len(m.enc), seq: h.seq, count: h.count}
		if hasCount {
			m.enc = append(m.enc, region[off:next]...)
		} else {
			// Insert a zero Count after the sequence: body_len grows by 4.
			body := region[off+entryLenSize : next]
			m.enc = binary.LittleEndian.AppendUint32(m.enc, uint32(len(body)+4))
			m.enc = append(m.enc, body[:8]...)
			m.enc = binary.LittleEndian.AppendUint32(m.enc, 0)
			m.enc = append(m.enc, body[8:]...)
		}
		if len(m.refs) > 0 {
			prev := m.refs[len(m.refs)-1]
			if ref.seq != prev.end() {
				return nil, corruptf("entry %d starts at sequence %d, previous entry ends at %d", i, ref.seq, prev.end())
			}
		}
		if ref.end() < ref.seq {
			return nil, corruptf("entry %d sequence range overflows", i)
		}
		m.refs = append(m.refs, ref)
		off = next
	}
	if off != len(region) {
		return nil, corruptf("%d unexplained bytes after %d entries", len(region)-off, count)
	}
	if len(m.refs) > 0 {
		last := m.refs[len(m.refs)-1].end()
		if last > m.nextSequence {
			return nil, corruptf("last entry ends at %d but next sequence is %d", last, m.nextSequence)
		}
	}
	return m, nil
}

type entryHeader struct {
	seq   uint64
	count uint32
}

// scanEntry validates the structure of the entry at off without allocating
// and returns its header and the offset just past it.
func scanEntry(data []byte, off int, hasCount bool) (entryHeader, int, error) {
	var h entryHeader
	if len(data)-off < entryLenSize {
		return h, 0, corruptf("truncated entry length at offset %d", off)
	}
	bodyLen := int(binary.LittleEndian.Uint32(data[off:]))
	p := off + entryLenSize
	minBody := legacyBodyMin
	if hasCount {
		minBody = currentBodyMin
	}
	if bodyLen < minBody || bodyLen > len(data)-p {
		return h, 0, corruptf("entry body length %d invalid at offset %d", bodyLen, off)
	}
	end := p + bodyLen
	h.seq = binary.LittleEndian.Uint64(data[p:])
	p += 8
	if hasCount {
		h.count = binary.LittleEndian.Uint32(data[p:])
		p += 4
	}
	locLen := int(binary.LittleEndian.Uint16(data[p:]))
	p += 2
	if locLen > end-p-4 {
		return h, 0, corruptf("entry location overruns its body")
	}
	p += locLen
	mdCount := uint64(binary.LittleEndian.Uint32(data[p:]))
	p += 4
	if mdCount > uint64((end-p)/recordMetaFixed) {
		return h, 0, corruptf("entry metadata count %d overruns its body", mdCount)
	}
	var prevStart uint32
	for i := uint64(0); i < mdCount; i++ {
		if end-p < recordMetaFixed {
			return h, 0, corruptf("truncated record metadata")
		}
		start := binary.LittleEndian.Uint32(data[p:])
		plen := int(binary.LittleEndian.Uint32(data[p+12:]))
		p += recordMetaFixed
		if plen > end-p {
			return h, 0, corruptf("record metadata payload overruns its entry")
		}
		p += plen
		if (i > 0 && start < prevStart) || (h.count > 0 && start >= h.count) {
			return h, 0, corruptf("record metadata start index %d out of order or range", start)
		}
		prevStart = start
	}
	if p != end {
		return h, 0, corruptf("entry body has %d trailing bytes", end-p)
	}
	return h, end, nil
}

// decodeEntry decodes the (already validated) current-encoding entry at off.
func decodeEntry(data []byte, off int) Entry {
	p := off + entryLenSize
	e := Entry{Sequence: binary.LittleEndian.Uint64(data[p:])}
	p += 8
	e.Count = binary.LittleEndian.Uint32(data[p:])
	p += 4
	locLen := int(binary.LittleEndian.Uint16(data[p:]))
	p += 2
	e.Location = string(data[p : p+locLen])
	p += locLen
	mdCount := int(binary.LittleEndian.Uint32(data[p:]))
	p += 4
	if mdCount > 0 {
		e.Metadata = make([]RecordMeta, mdCount)
	}
	for i := range e.Metadata {
		md := &e.Metadata[i]
		md.StartIndex = binary.LittleEndian.Uint32(data[p:])
		md.IngestionTimeMs = int64(binary.LittleEndian.Uint64(data[p+4:]))
		plen := int(binary.LittleEndian.Uint32(data[p+12:]))
		p += recordMetaFixed
		md.Payload = append([]byte(nil), data[p:p+plen]...)
		p += plen
	}
	return e
}

// decodeLocation returns only the location of the entry at off.
func decodeLocation(data []byte, off int) string {
	p := off + entryLenSize + 8 + 4
	locLen := int(binary.LittleEndian.Uint16(data[p:]))
	return string(data[p+2 : p+2+locLen])
}

func appendEntry(buf []byte, e Entry) ([]byte, error) {
	if len(e.Location) > math.MaxUint16 {
		return buf, fmt.Errorf("nereus/wal: location length %d exceeds 65535", len(e.Location))
	}
	if uint64(len(e.Metadata)) > math.MaxUint32 {
		return buf, fmt.Errorf("nereus/wal: %d metadata ranges exceed u32", len(e.Metadata))
	}
	body := uint64(currentBodyMin + len(e.Location))
	for _, md := range e.Metadata {
		body += recordMetaFixed + uint64(len(md.Payload))
	}
	if body > math.MaxUint32 {
		return buf, fmt.Errorf("nereus/wal: entry body of %d bytes exceeds u32", body)
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(body))
	buf = binary.LittleEndian.AppendUint64(buf, e.Sequence)
	buf = binary.LittleEndian.AppendUint32(buf, e.Count)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(e.Location)))
	buf = append(buf, e.Location...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(e.Metadata)))
	for _, md := range e.Metadata {
		buf = binary.LittleEndian.AppendUint32(buf, md.StartIndex)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(md.IngestionTimeMs))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(md.Payload)))
		buf = append(buf, md.Payload...)
	}
	return buf, nil
}

// Bytes serializes the manifest in the current (v4) form.
func (m *Manifest) Bytes() ([]byte, error) {
	if uint64(len(m.refs)) > math.MaxUint32 {
		return nil, fmt.Errorf("nereus/wal: entry count %d exceeds u32", len(m.refs))
	}
	loc := m.snapshot.Location
	if len(loc) > math.MaxUint16 {
		return nil, fmt.Errorf("nereus/wal: snapshot location length %d exceeds 65535", len(loc))
	}
	buf := make([]byte, 0, len(m.enc)+len(loc)+snapFixedSize+coreSizeV4)
	buf = append(buf, m.enc...)
	buf = append(buf, loc...)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(loc)))
	buf = binary.LittleEndian.AppendUint64(buf, m.snapshot.ThroughSeq)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(m.snapshot.CreatedUnixMs))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(m.refs)))
	buf = binary.LittleEndian.AppendUint64(buf, m.nextSequence)
	buf = binary.LittleEndian.AppendUint64(buf, m.epoch)
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
	buf = binary.LittleEndian.AppendUint16(buf, FooterVersion)
	return buf, nil
}

// Append assigns a record-sequence range to a new entry pointing at a segment
// object holding count framed records, and returns the sequence of the first
// record (the entry's base sequence). nextSequence advances by count. count
// must be >= 1; md StartIndex values must be non-decreasing and below count.
// On error the manifest is unchanged.
func (m *Manifest) Append(location string, md []RecordMeta, count int) (uint64, error) {
	if count < 1 || uint64(count) > math.MaxUint32 {
		return 0, fmt.Errorf("nereus/wal: Append count must be in [1, 2^32), got %d", count)
	}
	if location == "" {
		return 0, fmt.Errorf("nereus/wal: Append needs a segment location")
	}
	for i, r := range md {
		if r.StartIndex >= uint32(count) || (i > 0 && r.StartIndex < md[i-1].StartIndex) {
			return 0, fmt.Errorf("nereus/wal: metadata start index %d out of order or range (count %d)", r.StartIndex, count)
		}
	}
	seq := m.nextSequence
	if seq+uint64(count) < seq {
		return 0, fmt.Errorf("nereus/wal: sequence space exhausted")
	}
	off := len(m.enc)
	enc, err := appendEntry(m.enc, Entry{Sequence: seq, Count: uint32(count), Location: location, Metadata: md})
	if err != nil {
		return 0, err
	}
	m.enc = enc
	m.refs = append(m.refs, entryRef{off: off, seq: seq, count: uint32(count)})
	m.nextSequence += uint64(count)
	return seq, nil
}

// SetSnapshot records a new base snapshot. The next Bytes/commit carries it.
func (m *Manifest) SetSnapshot(p SnapshotPointer) { m.snapshot = p }

// Snapshot returns the current snapshot pointer (zero value if none).
func (m *Manifest) Snapshot() SnapshotPointer { return m.snapshot }

// SetEpoch sets the fencing epoch (used by writer-fenced failover).
func (m *Manifest) SetEpoch(e uint64) { m.epoch = e }

// Epoch returns the current fencing epoch.
func (m *Manifest) Epoch() uint64 { return m.epoch }

// NextSequence returns the sequence the next appended record will receive.
func (m *Manifest) NextSequence() uint64 { return m.nextSequence }

// Count returns the number of live entries.
func (m *Manifest) Count() int { return len(m.refs) }

// firstLive returns the first live record sequence (NextSequence when there
// are no live entries).
func (m *Manifest) firstLive() uint64 {
	if len(m.refs) == 0 {
		return m.nextSequence
	}
	return m.refs[0].seq
}

func (m *Manifest) decodeFrom(i int) []Entry {
	out := make([]Entry, 0, len(m.refs)-i)
	for _, r := range m.refs[i:] {
		out = append(out, decodeEntry(m.enc, r.off))
	}
	return out
}

// Entries decodes and returns all live entries in sequence order. The error
// is always nil for a manifest built by this package; it is kept for
// signature compatibility.
func (m *Manifest) Entries() ([]Entry, error) { return m.decodeFrom(0), nil }

// EntriesAfter returns live entries with Sequence > afterSeq, in order.
func (m *Manifest) EntriesAfter(afterSeq uint64) ([]Entry, error) {
	i := sort.Search(len(m.refs), func(i int) bool { return m.refs[i].seq > afterSeq })
	return m.decodeFrom(i), nil
}

// EntriesFrom returns live entries with Sequence >= minSeq, in order.
func (m *Manifest) EntriesFrom(minSeq uint64) ([]Entry, error) {
	i := sort.Search(len(m.refs), func(i int) bool { return m.refs[i].seq >= minSeq })
	return m.decodeFrom(i), nil
}

// EntriesContaining returns the entries needed to replay from record sequence
// seq onward: every entry whose range end is > seq, in order. The first entry
// returned is the one whose range contains seq (or, if seq is below all live
// entries, the earliest entry); a consumer skips records before seq in that
// first segment. This is the record-addressable read path.
func (m *Manifest) EntriesContaining(seq uint64) ([]Entry, error) {
	return m.decodeFrom(m.searchEnd(seq)), nil
}

// searchEnd returns the index of the first entry whose End() > seq.
func (m *Manifest) searchEnd(seq uint64) int {
	return sort.Search(len(m.refs), func(i int) bool { return m.refs[i].end() > seq })
}

// Locate returns the entry whose record-sequence range contains seq, along with
// the index of that record within the segment (seq - entry.Sequence) and a
// found flag. A consumer reads only the manifest, calls Locate(seq) to learn
// which segment to fetch and how many leading records to skip, then streams
// forward. For a legacy (Count==0) entry the offset is always 0. Not found if
// seq is outside [firstLiveSequence, NextSequence).
func (m *Manifest) Locate(seq uint64) (Entry, int, bool) {
	i := m.searchEnd(seq)
	if i == len(m.refs) || m.refs[i].seq > seq {
		return Entry{}, 0, false
	}
	e := decodeEntry(m.enc, m.refs[i].off)
	if e.Count == 0 {
		return e, 0, true
	}
	return e, int(seq - e.Sequence), true
}

// TailLocations maps the last `limit` live entries by segment location.
// Locations are unique per (runID, ordinal), so a writer that lost a CAS
// response can check whether its entries landed. Only the tail is scanned:
// those entries are necessarily last.
func (m *Manifest) TailLocations(limit int) (map[string]Entry, error) {
	if limit <= 0 {
		return map[string]Entry{}, nil
	}
	i := max(len(m.refs)-limit, 0)
	out := make(map[string]Entry, len(m.refs)-i)
	for _, r := range m.refs[i:] {
		e := decodeEntry(m.enc, r.off)
		out[e.Location] = e
	}
	return out, nil
}

// TruncateThrough removes every entry whose records are all <= throughSeq (its
// End()-1 <= throughSeq), i.e. entries fully superseded by a snapshot covering
// up to throughSeq. An entry with any record > throughSeq is kept whole (a
// segment is never split). Returns the number of entries removed.
// NextSequence and the epoch are unchanged.
func (m *Manifest) TruncateThrough(throughSeq uint64) (int, error) {
	i := sort.Search(len(m.refs), func(i int) bool { return m.refs[i].end()-1 > throughSeq })
	if i == 0 {
		return 0, nil
	}
	cut := len(m.enc)
	if i < len(m.refs) {
		cut = m.refs[i].off
	}
	m.enc = append([]byte(nil), m.enc[cut:]...)
	refs := make([]entryRef, len(m.refs)-i)
	for j, r := range m.refs[i:] {
		r.off -= cut
		refs[j] = r
	}
	m.refs = refs
	return i, nil
}

// locations returns the segment location of every live entry, in order.
func (m *Manifest) locations() []string {
	out := make([]string, len(m.refs))
	for i, r := range m.refs {
		out[i] = decodeLocation(m.enc, r.off)
	}
	return out
}

// clone returns a copy that can be mutated (Append, TruncateThrough, Set*)
// without affecting m. The encoded entries are shared until either side
// appends: capacities are clipped so an append reallocates.
func (m *Manifest) clone() *Manifest {
	c := *m
	c.enc = m.enc[:len(m.enc):len(m.enc)]
	c.refs = m.refs[:len(m.refs):len(m.refs)]
	return &c
}
