package generation

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Buffer is a pooled span buffer holding the bytes that entries returned
// by ReadPooled alias, and the entries slice itself. Release hands both
// back for a later read; after Release nothing may touch those entries or
// their payloads (a later read overwrites them). A Buffer that is never released is simply collected.
type Buffer struct {
	b       []byte
	entries []Entry     // the entries slice ReadPooled returned, reused by the next read
	class   int         // index into spanPools; -1: not pooled (too large, or a share)
	pooled  atomic.Bool // in its pool now (a second Release is a bug)
	// holds counts the holders of a pooled buffer's bytes: the Buffer
	// itself and each share (a prefetch's remainder kept for the next
	// Read while the first Read's entries alias the start); it goes back
	// to its pool when the last is released.
	holds atomic.Int32
	// parent is the buffer a share's bytes live in (nil: not a share).
	parent *Buffer
}

// Span buffers come in power-of-two classes from 64 KiB to 64 MiB: a
// catch-up reads spans of about the same size over and over (a Kafka fetch
// asks for partition_max_bytes each time), so a handful of buffers serve
// it. sync.Pool drops idle buffers at GC, so the pool never pins memory a
// quiet reader no longer needs.
const (
	minSpanClassShift = 16
	maxSpanClassShift = 26
)

var spanPools [maxSpanClassShift - minSpanClassShift + 1]sync.Pool

// poisonByte fills released buffers when poisonOnRelease is on.
const poisonByte = 0xDB

// getBuffer returns a Buffer of at least n bytes (its contents are
// whatever the last read left: every byte a read uses is overwritten by
// that read before it is verified).
func getBuffer(n int64) *Buffer {
	shift := minSpanClassShift
	if n > 1<<minSpanClassShift {
		shift = bits.Len64(uint64(n - 1))
	}
	if shift > maxSpanClassShift {
		return &Buffer{b: make([]byte, n), class: -1}
	}
	c := shift - minSpanClassShift
	if b, ok := spanPools[c].Get().(*Buffer); ok {
		b.pooled.Store(false)
		b.holds.Store(1)
		return b
	}
	b := &Buffer{b: make([]byte, 1<<shift), class: c}
	b.holds.Store(1)
	return b
}

// share returns a second holder of b's bytes with an entries slice of its
// own: b goes back to its pool only once b and the share are both
// released. nil for a nil b.
func (b *Buffer) share() *Buffer {
	if b == nil {
		return nil
	}
	b.holds.Add(1)
	return &Buffer{class: -1, parent: b}
}

// Release returns b to its pool (nil and unpooled Buffers: no-op). Call it
// once, when every payload aliasing b is no longer used. A second Release
// panics: it would hand one buffer to two reads, and one of them would
// serve bytes the other wrote over its verified ones.
func (b *Buffer) Release() {
	if b == nil {
		return
	}
	if b.parent != nil {
		if b.pooled.Swap(true) {
			panic("nereus/generation: Buffer released twice")
		}
		b.parent.Release()
		return
	}
	if b.class < 0 {
		return
	}
	if n := b.holds.Add(-1); n > 0 {
		return
	} else if n < 0 || b.pooled.Swap(true) {
		panic("nereus/generation: Buffer released twice")
	}
	if poisonOnRelease {
		for i := range b.b {
			b.b[i] = poisonByte
		}
	}
	spanPools[b.class].Put(b)
}
