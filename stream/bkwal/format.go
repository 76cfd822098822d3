package bkwal

import (
	"fmt"
	"hash/crc32"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// Entry frame: the payload of every BookKeeper entry the provider writes
// (BookKeeper's CRC32C entry digest covers all of it):
//
//	"NBE1" stream(u64) epoch(uvarint) token(u64) commit(uvarint)
//	index(uvarint) count(uvarint) offset(varint) recordCount(uvarint)
//	timestamp(varint) payload
//
// index/count place the entry inside its run, so a ledger read back alone
// (recovery) yields the runs it holds and whether each is complete, and a
// read through a target checks that every entry belongs to the run it names.
const entryMagic = "NBE1"

type entryHeader struct {
	stream, epoch, token, commit uint64
	index, count                 uint64
	offset                       int64
	recordCount                  uint32
	timestamp                    int64
}

func appendEntryFrame(dst []byte, h entryHeader, payload []byte) []byte {
	w := bin.Writer{B: dst}
	w.Raw([]byte(entryMagic))
	w.U64(h.stream)
	w.Uvarint(h.epoch)
	w.U64(h.token)
	w.Uvarint(h.commit)
	w.Uvarint(h.index)
	w.Uvarint(h.count)
	w.Varint(h.offset)
	w.Uvarint(uint64(h.recordCount))
	w.Varint(h.timestamp)
	w.Raw(payload)
	return w.B
}

func parseEntryFrame(b []byte) (entryHeader, []byte, error) {
	if len(b) < len(entryMagic) || string(b[:len(entryMagic)]) != entryMagic {
		return entryHeader{}, nil, fmt.Errorf("%w: not a Nereus BookKeeper entry", provider.ErrCorrupt)
	}
	r := bin.Reader{B: b, Off: len(entryMagic)}
	h := entryHeader{stream: r.U64(), epoch: r.Uvarint(), token: r.U64(), commit: r.Uvarint(),
		index: r.Uvarint(), count: r.Uvarint(), offset: r.Varint()}
	rc := r.Uvarint()
	h.timestamp = r.Varint()
	payload := r.Rest()
	if r.Err() != nil || rc == 0 || rc > 1<<31 || h.count == 0 || h.index >= h.count {
		return entryHeader{}, nil, fmt.Errorf("%w: malformed entry frame", provider.ErrCorrupt)
	}
	h.recordCount = uint32(rc)
	return h, payload, nil
}

// Target (provider.Target), sealed with a CRC32C trailer:
//
//	v1(u8) alias(string) ledger(u64) first(uvarint) count(uvarint)
//	flags(u8: bit0 every entry has RecordCount 1) stream(u64)
//	epoch(uvarint) token(u64) commit(uvarint) rangeCRC(uvarint)
//
// rangeCRC is the CRC32C of the run's entry frames concatenated in order.
const targetV1 = 1

const flagUnitRecords = 1

type target struct {
	alias                        string
	ledger                       int64
	first                        int64
	count                        int64
	flags                        uint8
	stream, epoch, token, commit uint64
	rangeCRC                     uint32
}

func (t target) encode() provider.Target {
	w := bin.Writer{}
	w.U8(targetV1)
	w.String(t.alias)
	w.U64(uint64(t.ledger))
	w.Uvarint(uint64(t.first))
	w.Uvarint(uint64(t.count))
	w.U8(t.flags)
	w.U64(t.stream)
	w.Uvarint(t.epoch)
	w.U64(t.token)
	w.Uvarint(t.commit)
	w.Uvarint(uint64(t.rangeCRC))
	return w.Seal()
}

func decodeTarget(b provider.Target) (target, error) {
	body, err := bin.Open(b)
	if err != nil {
		return target{}, fmt.Errorf("%w: bookkeeper target checksum", provider.ErrCorrupt)
	}
	r := bin.Reader{B: body}
	if v := r.U8(); v != targetV1 {
		return target{}, fmt.Errorf("%w: bookkeeper target version %d", provider.ErrCorrupt, v)
	}
	t := target{alias: r.String(), ledger: int64(r.U64()), first: int64(r.Uvarint()), count: int64(r.Uvarint()),
		flags: r.U8(), stream: r.U64(), epoch: r.Uvarint(), token: r.U64(), commit: r.Uvarint()}
	crc := r.Uvarint()
	if err := r.Done(); err != nil || t.count <= 0 || t.ledger < 0 || crc > 1<<32-1 {
		return target{}, fmt.Errorf("%w: bookkeeper target", provider.ErrCorrupt)
	}
	t.rangeCRC = uint32(crc)
	return t, nil
}

// Ledger record: the provider's registry entry for one ledger it created,
// under <prefix>/w/<writerID>/<ledgerID:020d>, sealed with a CRC32C:
//
//	v2(u8) ledger(u64) stream(u64) epoch(uvarint) token(u64) state(u8)
//	lastEntry(varint) incarnation(string) createdMs(varint) committed(bool)
//	committedEnd(varint)
//
// committedEnd (v2) is the end offset of the last committed run in the
// ledger, -1 when unknown (a v1 record): physical GC deletes a SETTLED
// ledger once the core retires offsets below it. v1 records are read; v2
// is written.
type ledgerState uint8

const (
	// stateAllocated: the ID is allocated and the ledger may or may not
	// exist (written before the create).
	stateAllocated ledgerState = 1
	// stateOpen: the ledger exists and this writer appends to it.
	stateOpen ledgerState = 2
	// stateSealed: closed; its runs may still be unsettled.
	stateSealed ledgerState = 3
	// stateSettled: every run was settled and at least one committed: the
	// ledger is referenced by the offset index and kept.
	stateSettled ledgerState = 4
)

func (s ledgerState) String() string {
	switch s {
	case stateAllocated:
		return "ALLOCATED"
	case stateOpen:
		return "OPEN"
	case stateSealed:
		return "SEALED"
	case stateSettled:
		return "SETTLED"
	}
	return fmt.Sprintf("ledgerState(%d)", uint8(s))
}

const (
	recordV1       = 1
	ledgerRecordV2 = 2
)

type ledgerRecord struct {
	ledger               int64
	stream, epoch, token uint64
	state                ledgerState
	lastEntry            int64
	incarnation          string
	createdMs            int64
	committed            bool
	committedEnd         int64 // -1: unknown
}

func (r ledgerRecord) encode() []byte {
	w := bin.Writer{}
	w.U8(ledgerRecordV2)
	w.U64(uint64(r.ledger))
	w.U64(r.stream)
	w.Uvarint(r.epoch)
	w.U64(r.token)
	w.U8(uint8(r.state))
	w.Varint(r.lastEntry)
	w.String(r.incarnation)
	w.Varint(r.createdMs)
	w.Bool(r.committed)
	w.Varint(r.committedEnd)
	return w.Seal()
}

func decodeLedgerRecord(b []byte) (ledgerRecord, error) {
	body, err := bin.Open(b)
	if err != nil {
		return ledgerRecord{}, err
	}
	r := bin.Reader{B: body}
	v := r.U8()
	if v != recordV1 && v != ledgerRecordV2 {
		return ledgerRecord{}, fmt.Errorf("%w: ledger record version %d", bin.ErrCorrupt, v)
	}
	rec := ledgerRecord{ledger: int64(r.U64()), stream: r.U64(), epoch: r.Uvarint(), token: r.U64(),
		state: ledgerState(r.U8()), lastEntry: r.Varint(), incarnation: r.String(), createdMs: r.Varint(), committed: r.Bool(),
		committedEnd: -1}
	if v >= ledgerRecordV2 {
		rec.committedEnd = r.Varint()
	}
	if err := r.Done(); err != nil || rec.state < stateAllocated || rec.state > stateSettled {
		return ledgerRecord{}, bin.ErrCorrupt
	}
	return rec, nil
}

// Stream pointer: the ledger the stream's current session writes, under
// <prefix>/s/<stream:016x>; a new session reads it to recovery-open (fence
// and close) the previous session's ledger before it writes its own.
//
//	v1(u8) ledger(u64) epoch(uvarint) token(u64) writer(string)
type streamPointer struct {
	ledger       int64
	epoch, token uint64
	writer       string
}

func (p streamPointer) encode() []byte {
	w := bin.Writer{}
	w.U8(recordV1)
	w.U64(uint64(p.ledger))
	w.Uvarint(p.epoch)
	w.U64(p.token)
	w.String(p.writer)
	return w.Seal()
}

func decodeStreamPointer(b []byte) (streamPointer, error) {
	body, err := bin.Open(b)
	if err != nil {
		return streamPointer{}, err
	}
	r := bin.Reader{B: body}
	if v := r.U8(); v != recordV1 {
		return streamPointer{}, bin.ErrCorrupt
	}
	p := streamPointer{ledger: int64(r.U64()), epoch: r.Uvarint(), token: r.U64(), writer: r.String()}
	return p, r.Done()
}

func crc32Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// TargetLedger names where a target's run lies: its ledger and entry range
// (for tools and the simulator's oracle; nothing in the provider uses it).
func TargetLedger(tgt provider.Target) (ledger, first, count int64, err error) {
	t, err := decodeTarget(tgt)
	if err != nil {
		return 0, 0, 0, err
	}
	return t.ledger, t.first, t.count, nil
}

// ParseEntry decodes one BookKeeper entry the provider wrote (its frame)
// into the protocol entry it carries (for tools and the simulator's
// oracle, which read ledgers without a provider).
func ParseEntry(b []byte) (provider.ReadEntry, error) {
	h, payload, err := parseEntryFrame(b)
	if err != nil {
		return provider.ReadEntry{}, err
	}
	return provider.ReadEntry{Offset: h.offset, RecordCount: h.recordCount, Timestamp: h.timestamp, Payload: payload}, nil
}
