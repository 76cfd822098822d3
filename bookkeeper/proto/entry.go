package proto

import (
	"crypto/subtle"
	"encoding/binary"
	"fmt"
)

// EntryHeader is the fixed 32-byte header of a stored entry.
type EntryHeader struct {
	LedgerID int64
	EntryID  int64
	// LastAddConfirmed is the writer's LAC when it sent this entry (-1
	// before any entry was confirmed). Readers take the max over bookies.
	LastAddConfirmed int64
	// Length is the cumulative payload length of entries 0..EntryID.
	Length int64
}

func putEntryHeader(b []byte, h EntryHeader) {
	binary.BigEndian.PutUint64(b[0:], uint64(h.LedgerID))
	binary.BigEndian.PutUint64(b[8:], uint64(h.EntryID))
	binary.BigEndian.PutUint64(b[16:], uint64(h.LastAddConfirmed))
	binary.BigEndian.PutUint64(b[24:], uint64(h.Length))
}

// ParseEntryHeader decodes the 32-byte header at the start of b without
// checking the digest.
func ParseEntryHeader(b []byte) (EntryHeader, error) {
	if len(b) < EntryHeaderLen {
		return EntryHeader{}, fmt.Errorf("%w: entry of %d bytes is shorter than its header", ErrMalformed, len(b))
	}
	return EntryHeader{
		LedgerID:         int64(binary.BigEndian.Uint64(b[0:])),
		EntryID:          int64(binary.BigEndian.Uint64(b[8:])),
		LastAddConfirmed: int64(binary.BigEndian.Uint64(b[16:])),
		Length:           int64(binary.BigEndian.Uint64(b[24:])),
	}, nil
}

// EntrySize is the stored size of an entry with a payload of n bytes.
func (d *Digester) EntrySize(n int) int { return EntryHeaderLen + d.Size() + n }

// AppendEntry appends the stored form of an entry (header, digest, payload)
// to dst.
func (d *Digester) AppendEntry(dst []byte, h EntryHeader, payload []byte) []byte {
	start := len(dst)
	dst = grow(dst, d.EntrySize(len(payload)))
	e := dst[start:]
	putEntryHeader(e, h)
	d.sum(e[EntryHeaderLen:EntryHeaderLen+d.Size()], e[:EntryHeaderLen], payload)
	copy(e[EntryHeaderLen+d.Size():], payload)
	return dst
}

// AddFrameSize is the full ADD frame size (length prefix included) for a
// payload of n bytes.
func (d *Digester) AddFrameSize(n int) int { return 4 + 4 + MasterKeyLen + d.EntrySize(n) }

// AppendAddFrame appends a complete ADD frame (length prefix, header, master
// key, entry) to dst. The same bytes go to every bookie of the write set and,
// on a retry, again unchanged: a resend must be byte-identical.
func (d *Digester) AppendAddFrame(dst []byte, masterKey *[MasterKeyLen]byte, flags uint16, h EntryHeader, payload []byte) []byte {
	n := d.AddFrameSize(len(payload))
	start := len(dst)
	dst = grow(dst, 4+4+MasterKeyLen)
	f := dst[start:]
	binary.BigEndian.PutUint32(f[0:], uint32(n-4))
	binary.BigEndian.PutUint32(f[4:], PacketHeader(CurrentVersion, OpAdd, flags))
	copy(f[8:], masterKey[:])
	return d.AppendEntry(dst, h, payload)
}

// VerifyEntry checks a stored entry returned by a bookie: the digest over
// header‖payload, the ledger ID, and (unless wantEntry is LastEntry) the
// entry ID. It returns the header and the payload, which aliases b.
func (d *Digester) VerifyEntry(b []byte, wantLedger, wantEntry int64) (EntryHeader, []byte, error) {
	ds := d.Size()
	if len(b) < EntryHeaderLen+ds {
		return EntryHeader{}, nil, fmt.Errorf("%w: entry of %d bytes is shorter than header and %s digest",
			ErrDigestMismatch, len(b), d.typ)
	}
	h, _ := ParseEntryHeader(b)
	payload := b[EntryHeaderLen+ds:]
	var sum [20]byte
	d.sum(sum[:ds], b[:EntryHeaderLen], payload)
	if subtle.ConstantTimeCompare(sum[:ds], b[EntryHeaderLen:EntryHeaderLen+ds]) != 1 {
		return h, nil, fmt.Errorf("%w: ledger %d entry %d (%s)", ErrDigestMismatch, h.LedgerID, h.EntryID, d.typ)
	}
	if h.LedgerID != wantLedger {
		return h, nil, fmt.Errorf("%w: entry names ledger %d, want %d", ErrDigestMismatch, h.LedgerID, wantLedger)
	}
	if wantEntry != LastEntry && h.EntryID != wantEntry {
		return h, nil, fmt.Errorf("%w: entry names entry %d, want %d", ErrDigestMismatch, h.EntryID, wantEntry)
	}
	return h, payload, nil
}

func grow(b []byte, n int) []byte {
	// The compiler turns this into a grow without a temporary allocation.
	return append(b, make([]byte, n)...)
}

// AppendAddFrameForEntry appends an ADD frame carrying an already stored
// entry unchanged (recovery re-adds the bytes it read).
func AppendAddFrameForEntry(dst []byte, masterKey *[MasterKeyLen]byte, flags uint16, entry []byte) []byte {
	start := len(dst)
	dst = grow(dst, 4+4+MasterKeyLen)
	f := dst[start:]
	binary.BigEndian.PutUint32(f[0:], uint32(4+MasterKeyLen+len(entry)))
	binary.BigEndian.PutUint32(f[4:], PacketHeader(CurrentVersion, OpAdd, flags))
	copy(f[8:], masterKey[:])
	return append(dst, entry...)
}
