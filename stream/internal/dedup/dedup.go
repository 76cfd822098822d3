// Package dedup is the producer-deduplication state machine of a stream: for
// each producer, its epoch and the sequence ranges of its last committed
// appends. It is pure (no I/O, no clocks) so the core can keep a committed
// copy in the stream head and a projected copy for in-flight appends.
//
// It must never decide anything from wall time; eviction is by commit order.
package dedup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
)

// Window is how many recent appends per producer are remembered, matching
// Kafka's max.in.flight.requests.per.connection limit for idempotence.
const Window = 5

// MaxProducers bounds the table; the least recently used producer is evicted
// beyond it. Kafka evicts by time (producer id expiry); eviction here only
// turns a very old producer into an unknown one.
const MaxProducers = 512

// Mode mirrors stream.SequenceMode.
type Mode uint8

const (
	Contiguous Mode = 1
	Monotonic  Mode = 2
)

// Verdict is what Check decided.
type Verdict uint8

const (
	Accept Verdict = iota + 1
	Duplicate
	OutOfOrder
	Fenced
	Unknown
)

// Batch is one remembered append: its sequence range and the offsets it got.
type Batch struct {
	FirstSeq, LastSeq int64
	Start, End        int64
}

// Producer is one producer's remembered state.
type Producer struct {
	Epoch   int64
	Batches []Batch // oldest first, at most Window
	// Touched orders producers for eviction (a commit counter).
	Touched uint64
}

// Table maps producer identity to state.
type Table struct {
	producers map[string]*Producer
	clock     uint64
	// enc caches the encoding while the table is unchanged: the stream
	// head is rewritten by every commit round, but its producer table
	// changes only with appends that carry sequences, so an unchanged
	// table is encoded (sorted, varint-packed) once, not once per round.
	// Atomic because a committed table is shared read-only between the
	// commit machine and readers that encode heads derived from it.
	enc atomic.Pointer[[]byte]
}

// New returns an empty table.
func New() *Table { return &Table{producers: map[string]*Producer{}} }

// Len is the number of producers remembered.
func (t *Table) Len() int { return len(t.producers) }

// Clone returns an independent copy.
func (t *Table) Clone() *Table {
	c := &Table{producers: make(map[string]*Producer, len(t.producers)), clock: t.clock}
	for k, p := range t.producers {
		cp := *p
		cp.Batches = append([]Batch(nil), p.Batches...)
		c.producers[k] = &cp
	}
	c.enc.Store(t.enc.Load()) // same contents, same encoding
	return c
}

// Check decides what to do with an append carrying (producer, epoch,
// first..last). For Duplicate it returns the original batch.
func (t *Table) Check(mode Mode, producer string, epoch, first, last int64) (Verdict, Batch) {
	p, ok := t.producers[producer]
	switch mode {
	case Monotonic:
		if !ok || len(p.Batches) == 0 {
			return Accept, Batch{}
		}
		top := p.Batches[len(p.Batches)-1]
		if last <= top.LastSeq {
			for _, b := range p.Batches {
				if b.FirstSeq == first && b.LastSeq == last {
					return Duplicate, b
				}
			}
			// Older than the window: still a duplicate, offsets unknown.
			return Duplicate, Batch{FirstSeq: first, LastSeq: last, Start: -1, End: -1}
		}
		return Accept, Batch{}
	default: // Contiguous
		if !ok {
			if first != 0 {
				return Unknown, Batch{}
			}
			return Accept, Batch{}
		}
		if epoch < p.Epoch {
			return Fenced, Batch{}
		}
		if epoch > p.Epoch {
			if first != 0 {
				return OutOfOrder, Batch{}
			}
			return Accept, Batch{}
		}
		for _, b := range p.Batches {
			if b.FirstSeq == first && b.LastSeq == last {
				return Duplicate, b
			}
		}
		if len(p.Batches) == 0 {
			if first != 0 {
				return OutOfOrder, Batch{}
			}
			return Accept, Batch{}
		}
		top := p.Batches[len(p.Batches)-1]
		if first != top.LastSeq+1 {
			// Kafka sequences wrap at int32 max.
			if !(top.LastSeq == 1<<31-1 && first == 0) {
				return OutOfOrder, Batch{}
			}
		}
		return Accept, Batch{}
	}
}

// Highest is the highest LastSeq recorded for producer, or -1 when it has
// none (Monotonic mode: every recorded batch ends above the previous one).
func (t *Table) Highest(producer string) int64 {
	p, ok := t.producers[producer]
	if !ok || len(p.Batches) == 0 {
		return -1
	}
	return p.Batches[len(p.Batches)-1].LastSeq
}

// Record remembers an accepted append. It must follow an Accept verdict.
func (t *Table) Record(producer string, epoch int64, b Batch) {
	t.enc.Store(nil)
	t.clock++
	p, ok := t.producers[producer]
	if !ok {
		p = &Producer{Epoch: epoch}
		t.producers[producer] = p
	}
	if epoch > p.Epoch {
		p.Epoch = epoch
		p.Batches = p.Batches[:0]
	}
	p.Batches = append(p.Batches, b)
	if len(p.Batches) > Window {
		p.Batches = append(p.Batches[:0], p.Batches[len(p.Batches)-Window:]...)
	}
	p.Touched = t.clock
	if len(t.producers) > MaxProducers {
		t.evictOldest()
	}
}

func (t *Table) evictOldest() {
	var oldest string
	var min uint64 = ^uint64(0)
	for k, p := range t.producers {
		if p.Touched < min {
			min, oldest = p.Touched, k
		}
	}
	delete(t.producers, oldest)
}

// ErrCorrupt reports an undecodable table.
var ErrCorrupt = errors.New("dedup: corrupt producer table")

// AppendEncode appends the table's binary form (version 1) to dst.
// Layout: u8 version=1, uvarint clock, uvarint n, then n producers sorted by
// name: uvarint len+name, varint epoch, uvarint touched, u8 nbatches, then
// per batch varint first,last,start,end.
func (t *Table) AppendEncode(dst []byte) []byte {
	if enc := t.enc.Load(); enc != nil {
		return append(dst, *enc...)
	}
	start := len(dst)
	dst = t.appendEncode(dst)
	enc := append([]byte(nil), dst[start:]...)
	t.enc.Store(&enc)
	return dst
}

func (t *Table) appendEncode(dst []byte) []byte {
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, t.clock)
	names := make([]string, 0, len(t.producers))
	for k := range t.producers {
		names = append(names, k)
	}
	sort.Strings(names)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, n := range names {
		p := t.producers[n]
		dst = binary.AppendUvarint(dst, uint64(len(n)))
		dst = append(dst, n...)
		dst = binary.AppendVarint(dst, p.Epoch)
		dst = binary.AppendUvarint(dst, p.Touched)
		dst = append(dst, byte(len(p.Batches)))
		for _, b := range p.Batches {
			dst = binary.AppendVarint(dst, b.FirstSeq)
			dst = binary.AppendVarint(dst, b.LastSeq)
			dst = binary.AppendVarint(dst, b.Start)
			dst = binary.AppendVarint(dst, b.End)
		}
	}
	return dst
}

// Decode parses a table written by AppendEncode and returns the bytes
// consumed.
func Decode(b []byte) (*Table, int, error) {
	r := reader{b: b}
	if v := r.byte(); v != 1 {
		return nil, 0, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	t := New()
	t.clock = r.uvarint()
	n := r.uvarint()
	if n > MaxProducers*2 {
		return nil, 0, fmt.Errorf("%w: %d producers", ErrCorrupt, n)
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		l := r.uvarint()
		name := string(r.bytes(l))
		p := &Producer{Epoch: r.varint(), Touched: r.uvarint()}
		nb := int(r.byte())
		if nb > Window {
			r.err = ErrCorrupt
			break
		}
		for j := 0; j < nb; j++ {
			p.Batches = append(p.Batches, Batch{FirstSeq: r.varint(), LastSeq: r.varint(), Start: r.varint(), End: r.varint()})
		}
		t.producers[name] = p
	}
	if r.err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrCorrupt, r.err)
	}
	return t, r.off, nil
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) byte() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.err = ErrCorrupt
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.err = ErrCorrupt
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.err = ErrCorrupt
		return 0
	}
	r.off += n
	return v
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil || n > uint64(len(r.b)-r.off) {
		r.err = ErrCorrupt
		return nil
	}
	v := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return v
}
