package stream

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/stream/internal/dedup"
)

// Metadata key layout. Every stream-scoped key is prefixed by the stream ID
// so a store that shards by key prefix keeps a stream's records together.
//
//	s/n/<name>                    name record: the stream's creation spec (create-only)
//	s/h/<id:016x>                 head: the commit point (version-CAS)
//	s/i/<id:016x>/<end:020d>      offset index: one committed run descriptor per key
//	s/g/<id:016x>/<end:020d>      generation index: one published generation per key
//	s/r/<id:016x>/<key hash>      retiring generation objects (GC journal)
//	s/p/<id:016x>/<holder>        durable reader protections (leases)
//	s/d/<id:016x>                 deleted streams awaiting physical GC
//	s/m/<id:016x>                 merge claim: the one merge of the stream in progress (merge_claim.go)
//
// Index keys are the run's (generation's) exclusive end offset, zero-padded,
// so a scan starting just past an offset finds the entry that contains it
// first.
const (
	nameKeyPrefix    = "s/n/"
	headKeyPrefix    = "s/h/"
	indexKeyPrefix   = "s/i/"
	genKeyPrefix     = "s/g/"
	retireKeyPrefix  = "s/r/"
	protectKeyPrefix = "s/p/"
	deletedKeyPrefix = "s/d/"
)

func nameKey(name string) string { return nameKeyPrefix + name }
func headKey(id ID) string       { return string(appendHex16([]byte(headKeyPrefix), uint64(id))) }
func indexPrefix(id ID) string   { return indexKeyPrefix + id.String() + "/" }
func indexKey(id ID, end int64) string {
	b := make([]byte, 0, len(indexKeyPrefix)+16+1+20)
	b = appendHex16(append(b, indexKeyPrefix...), uint64(id))
	return string(appendDec20(append(b, '/'), end))
}

// appendHex16 appends v as 16 lower-case hex digits (ID.String without
// fmt: keys are built per stream per commit round).
func appendHex16(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[v>>uint(shift)&0xf])
	}
	return b
}

// appendDec20 appends v zero-padded to 20 digits, as fmt's %020d does
// (index offsets are never negative).
func appendDec20(b []byte, v int64) []byte {
	if v < 0 {
		return fmt.Appendf(b, "%020d", v)
	}
	var d [20]byte
	for i := 19; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, d[:]...)
}

func genPrefix(id ID) string     { return genKeyPrefix + id.String() + "/" }
func retirePrefix(id ID) string  { return retireKeyPrefix + id.String() + "/" }
func protectPrefix(id ID) string { return protectKeyPrefix + id.String() + "/" }
func deletedKey(id ID) string    { return deletedKeyPrefix + id.String() }
func genKey(id ID, end int64) string {
	return genPrefix(id) + fmt.Sprintf("%020d", end)
}

func parseHeadKey(key string) (ID, bool) {
	if len(key) != len(headKeyPrefix)+16 || key[:len(headKeyPrefix)] != headKeyPrefix {
		return 0, false
	}
	v, err := strconv.ParseUint(key[len(headKeyPrefix):], 16, 64)
	return ID(v), err == nil
}

// Record format versions. Readers accept the current version only until a
// second one exists; then N and N-1 (see docs/ARCHITECTURE.md).
//
// v2 of the head adds the generation fields (GenThrough, GenIndexedThrough,
// NextGen, GenPending) and v2 descriptors add their Lineage; a v1 record
// reads as a head with no generations. v3 of the head encodes its Pending
// descriptors relative to each other (records_pending.go); everything else
// is as in v2. Writers write v3; readers read v1 to v3.
const (
	nameRecordV1 = 1
	headRecordV1 = 1
	headRecordV2 = 2
	headRecordV3 = 3
	descRecordV1 = 1
	descRecordV2 = 2
)

// nameRecord is the creation spec. Putting it create-only is the atomic
// creation point: the head is derived from it and created lazily by whoever
// finds it missing.
type nameRecord struct {
	ID         ID
	Name       string
	Profile    Profile
	CreatedMs  int64
	Attributes map[string]string
	Retention  Retention
}

func (r nameRecord) encode() []byte {
	w := bin.Writer{}
	w.U8(nameRecordV1)
	w.U64(uint64(r.ID))
	w.String(r.Name)
	w.U8(uint8(r.Profile))
	w.Varint(r.CreatedMs)
	encodeAttrs(&w, r.Attributes)
	w.Varint(int64(r.Retention.Time / time.Millisecond))
	w.Varint(r.Retention.Bytes)
	return w.Seal()
}

func decodeNameRecord(b []byte) (nameRecord, error) {
	body, err := bin.Open(b)
	if err != nil {
		return nameRecord{}, fmt.Errorf("%w: name record: %w", ErrCorrupt, err)
	}
	r := bin.Reader{B: body}
	if v := r.U8(); v != nameRecordV1 {
		return nameRecord{}, fmt.Errorf("%w: name record version %d", ErrCorrupt, v)
	}
	out := nameRecord{ID: ID(r.U64()), Name: r.String(), Profile: Profile(r.U8()), CreatedMs: r.Varint()}
	out.Attributes = decodeAttrs(&r)
	out.Retention = Retention{Time: time.Duration(r.Varint()) * time.Millisecond, Bytes: r.Varint()}
	if err := r.Done(); err != nil {
		return nameRecord{}, fmt.Errorf("%w: name record: %w", ErrCorrupt, err)
	}
	return out, nil
}

func encodeAttrs(w *bin.Writer, attrs map[string]string) {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		w.String(k)
		w.String(attrs[k])
	}
}

func decodeAttrs(r *bin.Reader) map[string]string {
	n := r.Len(1 << 16)
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for i := 0; i < n; i++ {
		k := r.String()
		out[k] = r.String()
	}
	return out
}

// descriptor is a commit: the runs of one stream committed by one head CAS,
// which are contiguous in offsets. It is the commit intent made durable:
// first inside the head (Pending) by the commit CAS itself, then in the
// offset index. Each part is one run's physical location (a WAL provider
// target); part i covers [Parts[i].Start, Parts[i+1].Start), the last part
// up to End. Merging a round's runs into one descriptor keeps metadata writes
// at one index entry per stream per commit round, however deep the pipeline.
type descriptor struct {
	Start, End int64
	Entries    uint32
	// Bytes is the payload size of the commit; CumBytes the stream's
	// cumulative committed payload size at End (drives size retention).
	Bytes, CumBytes int64
	MinTS, MaxTS    int64
	// Epoch and Token identify the writing session; the runs carry commit
	// numbers FirstCommit..Commit of it. Resolving an unknown commit outcome
	// looks for exactly these identities.
	Epoch, Token        uint64
	FirstCommit, Commit uint64
	// Generation is the physical generation the parts belong to: 0 for WAL
	// runs. Materialization will publish higher generations for the same
	// offsets without changing them.
	Generation uint32
	Provider   string
	Parts      []part
	// Lineage (generations only) lists the commits the generation's bytes
	// came from, so settling an unknown commit outcome still finds a run's
	// identity after its WAL descriptor was retired.
	Lineage []lineage

	// encV3 caches d's v3 Pending encoding against the predecessor
	// encV3Prev identifies (not stored itself): a descriptor in a head's
	// Pending list never changes, but the whole head is written by every
	// commit round, so each descriptor is encoded once instead of once per
	// round (cachePendingV3). Whoever changes a field of a descriptor that
	// may carry it must drop it.
	encV3     []byte
	encV3Prev pendingKey
}

// lineage is a span of one session's commits FirstCommit..Commit.
type lineage struct {
	Epoch, Token        uint64
	FirstCommit, Commit uint64
}

// lineageLost is the lineage of a generation record that rebuild-index
// restored from its object: the object names its range, not the commits its
// bytes came from. A lineage holding it proves nothing about a run's commit
// (contains never matches it: FirstCommit > Commit).
var lineageLost = lineage{Epoch: 1<<64 - 1, Token: 1<<64 - 1, FirstCommit: 1<<64 - 1, Commit: 0}

// lineageLost reports whether d's lineage is incomplete, so a run it does
// not list may still be one of its sources.
func (d descriptor) lineageLost() bool {
	for _, l := range d.Lineage {
		if l == lineageLost {
			return true
		}
	}
	return false
}

func (l lineage) contains(id runID) bool {
	return l.Epoch == id.Epoch && l.Token == id.Token && l.FirstCommit <= id.Commit && id.Commit <= l.Commit
}

// part is one run's location inside a descriptor.
type part struct {
	Start  int64
	Target []byte
}

// runID identifies one run: its session and commit number.
type runID struct {
	Epoch, Token, Commit uint64
}

func (d descriptor) contains(id runID) bool {
	if d.Generation > 0 {
		for _, l := range d.Lineage {
			if l.contains(id) {
				return true
			}
		}
		return false
	}
	return d.Epoch == id.Epoch && d.Token == id.Token && d.FirstCommit <= id.Commit && id.Commit <= d.Commit
}

// sizeHint is about the size of d's encoding (an upper bound, cheap).
func (d descriptor) sizeHint() int {
	n := 80 + len(d.Provider) + 36*len(d.Lineage)
	for _, p := range d.Parts {
		n += 12 + len(p.Target)
	}
	return n
}

// partEnd is the exclusive end offset of part i.
func (d descriptor) partEnd(i int) int64 {
	if i+1 < len(d.Parts) {
		return d.Parts[i+1].Start
	}
	return d.End
}

func (d descriptor) encodeTo(w *bin.Writer, version uint8) {
	w.Varint(d.Start)
	w.Varint(d.End)
	w.Uvarint(uint64(d.Entries))
	w.Varint(d.Bytes)
	w.Varint(d.CumBytes)
	w.Varint(d.MinTS)
	w.Varint(d.MaxTS)
	w.Uvarint(d.Epoch)
	w.U64(d.Token)
	w.Uvarint(d.FirstCommit)
	w.Uvarint(d.Commit)
	w.Uvarint(uint64(d.Generation))
	w.String(d.Provider)
	w.Uvarint(uint64(len(d.Parts)))
	for _, p := range d.Parts {
		w.Varint(p.Start)
		w.Bytes(p.Target)
	}
	if version >= 2 {
		w.Uvarint(uint64(len(d.Lineage)))
		for _, l := range d.Lineage {
			w.Uvarint(l.Epoch)
			w.U64(l.Token)
			w.Uvarint(l.FirstCommit)
			w.Uvarint(l.Commit)
		}
	}
}

func decodeDescriptorFrom(r *bin.Reader, version uint8) descriptor {
	d := descriptor{Start: r.Varint(), End: r.Varint(), Entries: uint32(r.Uvarint()), Bytes: r.Varint(), CumBytes: r.Varint(),
		MinTS: r.Varint(), MaxTS: r.Varint(), Epoch: r.Uvarint(), Token: r.U64(), FirstCommit: r.Uvarint(), Commit: r.Uvarint(),
		Generation: uint32(r.Uvarint()), Provider: r.String()}
	n := r.Len(1 << 16)
	for i := 0; i < n && r.Err() == nil; i++ {
		d.Parts = append(d.Parts, part{Start: r.Varint(), Target: append([]byte(nil), r.Bytes()...)})
	}
	if version >= 2 {
		n := r.Len(1 << 16)
		for i := 0; i < n && r.Err() == nil; i++ {
			d.Lineage = append(d.Lineage, lineage{Epoch: r.Uvarint(), Token: r.U64(), FirstCommit: r.Uvarint(), Commit: r.Uvarint()})
		}
	}
	if r.Err() == nil && !d.valid() {
		r.Rest()
		return descriptor{}
	}
	return d
}

// valid checks the structural invariants: a non-empty range, parts that
// start at Start and ascend strictly inside it.
func (d descriptor) valid() bool {
	if d.Start < 0 || d.End <= d.Start || len(d.Parts) == 0 || d.Parts[0].Start != d.Start || d.FirstCommit > d.Commit {
		return false
	}
	for i := 1; i < len(d.Parts); i++ {
		if d.Parts[i].Start <= d.Parts[i-1].Start || d.Parts[i].Start >= d.End {
			return false
		}
	}
	return true
}

// encodeIndexRecord is the value of an offset-index key.
func (d descriptor) encodeIndexRecord() []byte {
	w := bin.Writer{}
	w.U8(descRecordV2)
	d.encodeTo(&w, descRecordV2)
	return w.Seal()
}

func decodeIndexRecord(b []byte) (descriptor, error) {
	body, err := bin.Open(b)
	if err != nil {
		return descriptor{}, fmt.Errorf("%w: index record: %w", ErrCorrupt, err)
	}
	r := bin.Reader{B: body}
	v := r.U8()
	if v != descRecordV1 && v != descRecordV2 {
		return descriptor{}, fmt.Errorf("%w: index record version %d", ErrCorrupt, v)
	}
	d := decodeDescriptorFrom(&r, v)
	if err := r.Done(); err != nil || !d.valid() {
		return descriptor{}, fmt.Errorf("%w: index record", ErrCorrupt)
	}
	return d, nil
}

// sessionRecord is the append session stored in the head, so the same CAS
// that commits an append also validates the session that made it.
type sessionRecord struct {
	Epoch uint64
	Token uint64
	// Writer is "<WriterID>\x00<incarnation>": the incarnation distinguishes
	// a restarted process from the one it replaces.
	Writer    string
	Authority int64
	ExpiresMs int64
}

// head is the per-stream commit point. Invariants:
//   - 0 <= Start <= End; offsets [Start, End) are readable.
//   - Pending is sorted, contiguous, and every committed run with
//     End > IndexedThrough is in Pending; every committed run with
//     End <= IndexedThrough is in the offset index (or trimmed).
//   - Session.Epoch only grows.
type head struct {
	ID             ID
	Name           string
	Profile        Profile
	State          State
	CreatedMs      int64
	Attributes     map[string]string
	Retention      Retention
	Start, End     int64
	CommittedBytes int64
	// StartBytes is the cumulative payload size before Start (at run
	// granularity), so retained size = CommittedBytes - StartBytes.
	StartBytes     int64
	Session        sessionRecord
	Commits        uint64 // runs committed under the current session
	IndexedThrough int64
	Pending        []descriptor
	// Generations (physical evolution). Offsets [Start, GenThrough) are
	// served by published generations (>= 1) when GenThrough > Start;
	// generation descriptors ending at or before GenIndexedThrough are in
	// the generation index, later ones in GenPending (the same
	// publish-then-drop protocol as Pending and the offset index). NextGen
	// numbers the next generation; numbers are never reused.
	GenThrough        int64
	GenIndexedThrough int64
	// GenCumBytes is the cumulative committed payload size at GenThrough.
	GenCumBytes int64
	NextGen     uint64
	GenPending  []descriptor
	Producers   *dedup.Table
	// producersOwned is false while Producers is shared with the head this
	// one was cloned from (see clone).
	producersOwned bool
	// pendCached: every Pending descriptor carries its v3 encoding against
	// its predecessor in this list (encV3), so encode copies them without
	// checking each. Only commitMachine.cachePending sets it, after making
	// it so; Pending is never modified in place, and clone clears it (a
	// clone's Pending may be replaced).
	pendCached bool
}

func newHead(nr nameRecord) *head {
	return &head{ID: nr.ID, Name: nr.Name, Profile: nr.Profile, State: StateActive, CreatedMs: nr.CreatedMs,
		Attributes: nr.Attributes, Retention: nr.Retention, Producers: dedup.New()}
}

// clone copies h for building the next version. The producer table is
// shared, not copied: committed heads are never mutated, and the one caller
// that records sequences (the commit round) copies it first with
// ownProducers, so streams without producer sequences pay nothing.
//
// Pending is shared too (copying it was most of what a commit allocated:
// every descriptor of the head, once per commit). A head's Pending list is
// never modified in place, neither an element nor the slice: whoever
// changes it assigns a new slice (the commit machine builds it with
// appendPending / filterPending, which write only slots no existing head
// can see). The clone's capacity is clipped, so even an append on it
// copies instead of writing into h's array.
func (h *head) clone() *head {
	c := new(head)
	h.cloneInto(c)
	return c
}

// cloneInto is clone into storage the caller provides (the commit round
// keeps the next head inside its headCAS: one allocation instead of two).
func (h *head) cloneInto(c *head) {
	*c = *h
	c.Pending = h.Pending[:len(h.Pending):len(h.Pending)]
	c.GenPending = append([]descriptor(nil), h.GenPending...)
	c.producersOwned = false
	c.pendCached = false
}

// ownProducers makes h's producer table its own before a mutation.
func (h *head) ownProducers() *dedup.Table {
	if !h.producersOwned {
		h.Producers = h.Producers.Clone()
		h.producersOwned = true
	}
	return h.Producers
}

func (h *head) info() Info {
	writer := h.Session.Writer
	for i := 0; i < len(writer); i++ {
		if writer[i] == 0 {
			writer = writer[:i]
			break
		}
	}
	si := SessionInfo{Epoch: h.Session.Epoch, WriterID: writer, AuthorityEpoch: h.Session.Authority}
	if h.Session.ExpiresMs > 0 {
		si.Expires = time.UnixMilli(h.Session.ExpiresMs)
	}
	return Info{ID: h.ID, Name: h.Name, Profile: h.Profile, State: h.State, Attributes: h.Attributes, Retention: h.Retention,
		CreatedAt: time.UnixMilli(h.CreatedMs), StartOffset: h.Start, EndOffset: h.End, CommittedBytes: h.CommittedBytes,
		RetainedBytes: max(h.CommittedBytes-h.StartBytes, 0), MaterializedThrough: max(h.GenThrough, h.Start), Session: si}
}

func (h *head) encode() []byte {
	size := 256 + len(h.Name) + h.Producers.Len()*128
	for i := range h.Pending {
		d := &h.Pending[i]
		size += len(d.encV3)
		if d.encV3 == nil {
			size += d.sizeHint()
		}
	}
	for _, d := range h.GenPending {
		size += d.sizeHint()
	}
	w := bin.Writer{B: make([]byte, 0, size)}
	w.U8(headRecordV3)
	w.U64(uint64(h.ID))
	w.String(h.Name)
	w.U8(uint8(h.Profile))
	w.U8(uint8(h.State))
	w.Varint(h.CreatedMs)
	encodeAttrs(&w, h.Attributes)
	w.Varint(int64(h.Retention.Time / time.Millisecond))
	w.Varint(h.Retention.Bytes)
	w.Varint(h.Start)
	w.Varint(h.End)
	w.Varint(h.CommittedBytes)
	w.Varint(h.StartBytes)
	w.Uvarint(h.Session.Epoch)
	w.U64(h.Session.Token)
	w.String(h.Session.Writer)
	w.Varint(h.Session.Authority)
	w.Varint(h.Session.ExpiresMs)
	w.Uvarint(h.Commits)
	w.Varint(h.IndexedThrough)
	w.Uvarint(uint64(len(h.Pending)))
	for i := range h.Pending {
		if d := &h.Pending[i]; h.pendCached && d.encV3 != nil {
			w.B = append(w.B, d.encV3...) // valid: see pendCached
			continue
		}
		var prev *descriptor
		if i > 0 {
			prev = &h.Pending[i-1]
		}
		h.Pending[i].encodePendingV3(&w, prev)
	}
	w.Varint(h.GenThrough)
	w.Varint(h.GenIndexedThrough)
	w.Varint(h.GenCumBytes)
	w.Uvarint(h.NextGen)
	w.Uvarint(uint64(len(h.GenPending)))
	for _, d := range h.GenPending {
		d.encodeTo(&w, headRecordV2)
	}
	w.B = h.Producers.AppendEncode(w.B)
	return w.Seal()
}

func decodeHead(b []byte) (*head, error) {
	body, err := bin.Open(b)
	if err != nil {
		return nil, fmt.Errorf("%w: head: %w", ErrCorrupt, err)
	}
	r := bin.Reader{B: body}
	v := r.U8()
	if v != headRecordV1 && v != headRecordV2 && v != headRecordV3 {
		return nil, fmt.Errorf("%w: head version %d", ErrCorrupt, v)
	}
	h := &head{ID: ID(r.U64()), Name: r.String(), Profile: Profile(r.U8()), State: State(r.U8()), CreatedMs: r.Varint()}
	h.Attributes = decodeAttrs(&r)
	h.Retention = Retention{Time: time.Duration(r.Varint()) * time.Millisecond, Bytes: r.Varint()}
	h.Start, h.End, h.CommittedBytes, h.StartBytes = r.Varint(), r.Varint(), r.Varint(), r.Varint()
	h.Session = sessionRecord{Epoch: r.Uvarint(), Token: r.U64(), Writer: r.String(), Authority: r.Varint(), ExpiresMs: r.Varint()}
	h.Commits = r.Uvarint()
	h.IndexedThrough = r.Varint()
	n := r.Len(1 << 20)
	if v == headRecordV3 {
		h.Pending = make([]descriptor, 0, n)
		for i := 0; i < n && r.Err() == nil; i++ {
			var prev *descriptor
			if i > 0 {
				prev = &h.Pending[i-1]
			}
			h.Pending = append(h.Pending, decodePendingV3(&r, prev))
		}
	} else {
		for i := 0; i < n && r.Err() == nil; i++ {
			h.Pending = append(h.Pending, decodeDescriptorFrom(&r, v))
		}
	}
	if v >= headRecordV2 {
		// GenPending is encoded as in v2 in v3 heads too.
		dv := min(v, headRecordV2)
		h.GenThrough, h.GenIndexedThrough, h.GenCumBytes, h.NextGen = r.Varint(), r.Varint(), r.Varint(), r.Uvarint()
		n := r.Len(1 << 20)
		for i := 0; i < n && r.Err() == nil; i++ {
			h.GenPending = append(h.GenPending, decodeDescriptorFrom(&r, dv))
		}
	}
	if r.Err() != nil {
		return nil, fmt.Errorf("%w: head", ErrCorrupt)
	}
	rest := r.Rest()
	t, used, err := dedup.Decode(rest)
	if err == nil && used != len(rest) {
		err = fmt.Errorf("%d trailing bytes", len(rest)-used)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: head producers: %w", ErrCorrupt, err)
	}
	h.Producers = t
	if h.Start < 0 || h.End < h.Start {
		return nil, fmt.Errorf("%w: head offsets [%d, %d)", ErrCorrupt, h.Start, h.End)
	}
	return h, nil
}
