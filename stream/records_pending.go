package stream

import (
	"github.com/nereusstream/nereus-go/internal/bin"
)

// Head record v3 writes the Pending list relative to itself: each
// descriptor after the first is encoded against its predecessor, which it
// almost always continues (its Start is the predecessor's End, same
// session, provider and generation, the next commit number, cumulative
// bytes that add up), and every part's target shares its prefix with the
// target before it (Object WAL targets of one stream differ in the last
// digits of the segment key and in the offsets). Those fields are then
// flags, and targets their differing tail: a descriptor of one Object WAL
// run shrinks from ~115 to ~40 bytes, and with it the head every commit
// writes. The rest of the head, GenPending included, is encoded as in v2;
// index records stay v2 (they stand alone).
//
// Everything derived is checked against the same invariants as before
// (descriptor.valid) after decoding, and the record is sealed as before.

// Flags of a v3 Pending descriptor: which fields equal what the
// predecessor implies and are therefore not written.
const (
	pdStartFollows = 1 << iota // Start == prev.End
	pdSameSession              // Epoch, Token == prev's
	pdSameProvider             // Provider == prev's
	pdNextCommit               // FirstCommit == prev.Commit + 1
	pdCumAdds                  // CumBytes == prev.CumBytes + Bytes
	pdSameGen                  // Generation == prev's
	pdHasLineage               // a Lineage list follows
)

// pendingKey identifies the predecessor a cached v3 encoding was made
// against: a run's (epoch, token, commit) is unique forever, and the other
// fields make a rebuilt descriptor with the same identity miss the cache
// rather than reuse a stale delta.
type pendingKey struct {
	ok                   bool
	end, cum, maxTS      int64
	epoch, token, commit uint64
	parts                int
}

func keyOf(p *descriptor) pendingKey {
	if p == nil {
		return pendingKey{}
	}
	return pendingKey{ok: true, end: p.End, cum: p.CumBytes, maxTS: p.MaxTS, epoch: p.Epoch, token: p.Token, commit: p.Commit, parts: len(p.Parts)}
}

// encodePendingV3 appends d's v3 encoding against prev (nil: the first).
func (d *descriptor) encodePendingV3(w *bin.Writer, prev *descriptor) {
	if d.encV3 != nil && d.encV3Prev == keyOf(prev) {
		w.B = append(w.B, d.encV3...)
		return
	}
	var flags uint8
	var prevTarget []byte
	if prev != nil {
		if d.Start == prev.End {
			flags |= pdStartFollows
		}
		if d.Epoch == prev.Epoch && d.Token == prev.Token {
			flags |= pdSameSession
		}
		if d.Provider == prev.Provider {
			flags |= pdSameProvider
		}
		if d.FirstCommit == prev.Commit+1 {
			flags |= pdNextCommit
		}
		if d.CumBytes == prev.CumBytes+d.Bytes {
			flags |= pdCumAdds
		}
		if d.Generation == prev.Generation {
			flags |= pdSameGen
		}
		if n := len(prev.Parts); n > 0 {
			prevTarget = prev.Parts[n-1].Target
		}
	}
	if len(d.Lineage) > 0 {
		flags |= pdHasLineage
	}
	w.U8(flags)
	if flags&pdStartFollows == 0 {
		w.Varint(d.Start)
	}
	w.Uvarint(uint64(d.End - d.Start))
	w.Uvarint(uint64(d.Entries))
	w.Varint(d.Bytes)
	if flags&pdCumAdds == 0 {
		w.Varint(d.CumBytes)
	}
	var prevMaxTS int64
	if prev != nil {
		prevMaxTS = prev.MaxTS
	}
	w.Varint(d.MinTS - prevMaxTS) // wrapping: any pair round-trips
	w.Varint(d.MaxTS - d.MinTS)
	if flags&pdSameSession == 0 {
		w.Uvarint(d.Epoch)
		w.U64(d.Token)
	}
	if flags&pdNextCommit == 0 {
		w.Uvarint(d.FirstCommit)
	}
	w.Uvarint(d.Commit - d.FirstCommit)
	if flags&pdSameGen == 0 {
		w.Uvarint(uint64(d.Generation))
	}
	if flags&pdSameProvider == 0 {
		w.String(d.Provider)
	}
	w.Uvarint(uint64(len(d.Parts)))
	at := d.Start
	for _, p := range d.Parts {
		w.Varint(p.Start - at)
		at = p.Start
		n := commonPrefix(prevTarget, p.Target)
		w.Uvarint(uint64(n))
		w.Bytes(p.Target[n:])
		prevTarget = p.Target
	}
	if flags&pdHasLineage != 0 {
		w.Uvarint(uint64(len(d.Lineage)))
		for _, l := range d.Lineage {
			w.Uvarint(l.Epoch)
			w.U64(l.Token)
			w.Uvarint(l.FirstCommit)
			w.Uvarint(l.Commit)
		}
	}
}

// cachePendingV3 stores d's v3 encoding against prev in d, so the heads of
// later rounds that carry d after the same predecessor copy it instead.
//
// The bytes are appended to *arena (a chunk shared by one machine's
// descriptors, so a commit does not allocate a small slice of its own) when
// it has room, else to a new chunk that becomes *arena; nil arena: a slice of
// d's own. A cached encoding is capacity-clipped and the arena only ever
// grows past its length, so no byte anyone can see is written again.
func (d *descriptor) cachePendingV3(prev *descriptor, arena *[]byte) {
	if d.encV3 != nil && d.encV3Prev == keyOf(prev) {
		return
	}
	d.encV3 = nil
	hint := d.sizeHint()
	if arena == nil {
		w := bin.Writer{B: make([]byte, 0, hint)}
		d.encodePendingV3(&w, prev)
		d.encV3, d.encV3Prev = w.B, keyOf(prev)
		return
	}
	if cap(*arena)-len(*arena) < hint {
		*arena = make([]byte, 0, max(encArenaChunk, hint))
	}
	at := len(*arena)
	w := bin.Writer{B: *arena}
	d.encodePendingV3(&w, prev)
	if cap(w.B) != cap(*arena) {
		// Outgrew the chunk after all (sizeHint is an upper bound, so
		// not expected): w.B is a new array of its own.
		d.encV3, d.encV3Prev = w.B[at:len(w.B):len(w.B)], keyOf(prev)
		return
	}
	*arena = w.B
	d.encV3, d.encV3Prev = w.B[at:len(w.B):len(w.B)], keyOf(prev)
}

// encArenaChunk is the size of a cachePendingV3 arena chunk: a WAL run's
// descriptor encodes to ~40 bytes, so a chunk serves about a dozen commits
// of a stream, and a stream keeps at most about two chunks alive (a
// descriptor leaves Pending after about indexBatchCommits commits).
const encArenaChunk = 512

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// decodePendingV3 reads one descriptor encodePendingV3 wrote against prev.
func decodePendingV3(r *bin.Reader, prev *descriptor) descriptor {
	flags := r.U8()
	if prev == nil && flags&^pdHasLineage != 0 {
		r.Rest() // the first descriptor has no predecessor to refer to
		return descriptor{}
	}
	var d descriptor
	var prevTarget []byte
	var prevMaxTS int64
	if prev != nil {
		prevMaxTS = prev.MaxTS
		if n := len(prev.Parts); n > 0 {
			prevTarget = prev.Parts[n-1].Target
		}
	}
	if flags&pdStartFollows != 0 {
		d.Start = prev.End
	} else {
		d.Start = r.Varint()
	}
	d.End = d.Start + int64(r.Uvarint())
	d.Entries = uint32(r.Uvarint())
	d.Bytes = r.Varint()
	if flags&pdCumAdds != 0 {
		d.CumBytes = prev.CumBytes + d.Bytes
	} else {
		d.CumBytes = r.Varint()
	}
	d.MinTS = prevMaxTS + r.Varint()
	d.MaxTS = d.MinTS + r.Varint()
	if flags&pdSameSession != 0 {
		d.Epoch, d.Token = prev.Epoch, prev.Token
	} else {
		d.Epoch, d.Token = r.Uvarint(), r.U64()
	}
	if flags&pdNextCommit != 0 {
		d.FirstCommit = prev.Commit + 1
	} else {
		d.FirstCommit = r.Uvarint()
	}
	d.Commit = d.FirstCommit + r.Uvarint()
	if flags&pdSameGen != 0 {
		d.Generation = prev.Generation
	} else {
		d.Generation = uint32(r.Uvarint())
	}
	if flags&pdSameProvider != 0 {
		d.Provider = prev.Provider
	} else {
		d.Provider = r.String()
	}
	n := r.Len(1 << 16)
	at := d.Start
	for i := 0; i < n && r.Err() == nil; i++ {
		at += r.Varint()
		shared := int(r.Uvarint())
		tail := r.Bytes()
		if shared > len(prevTarget) {
			r.Rest()
			return descriptor{}
		}
		t := make([]byte, 0, shared+len(tail))
		t = append(append(t, prevTarget[:shared]...), tail...)
		d.Parts = append(d.Parts, part{Start: at, Target: t})
		prevTarget = t
	}
	if flags&pdHasLineage != 0 {
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
