package stream

import (
	"sync"

	"github.com/nereusstream/nereus-go/stream/generation"
)

// readBuffers are the recycled buffers one ReadOptions.Recycle read's
// payloads alias. Releasing them twice would hand one buffer to two reads
// (the second would overwrite bytes the first still serves), so release
// runs once however many copies of the ReadResult call Release.
type readBuffers struct {
	once sync.Once
	bufs []*generation.Buffer
	// out is the result's Entries slice, recycled with the buffers: with
	// small entries a fresh one per read was the read's largest
	// allocation (48 bytes an entry, cleared on allocation).
	out []ReadEntry
}

// entrySlices recycles the Entries slices of Recycle reads.
var entrySlices sync.Pool // of *[]ReadEntry

// maxRecycledEntries bounds the slices kept for reuse (48 bytes each).
const maxRecycledEntries = 1 << 16

// entries returns an empty slice of capacity >= n for a read's result:
// a recycled one when one is large enough.
func (b *readBuffers) entries(n int) []ReadEntry {
	if p, _ := entrySlices.Get().(*[]ReadEntry); p != nil {
		if cap(*p) >= n {
			return (*p)[:0]
		}
		entrySlices.Put(p) // too small for this read; another may fit it
	}
	return make([]ReadEntry, 0, n)
}

func (b *readBuffers) add(buf *generation.Buffer) {
	if buf != nil {
		b.bufs = append(b.bufs, buf)
	}
}

func (b *readBuffers) release() {
	if b == nil {
		return
	}
	b.once.Do(func() {
		for _, buf := range b.bufs {
			buf.Release()
		}
		b.bufs = nil
		if poisonReleasedEntries {
			for i := range b.out {
				b.out[i] = ReadEntry{Offset: -1}
			}
		}
		if c := cap(b.out); c > 0 && c <= maxRecycledEntries {
			// The stale payload references alias recycled buffers (or
			// buffers the GC has since taken back with the slice's
			// pool): not cleared, to keep release O(1).
			s := b.out[:0]
			entrySlices.Put(&s)
		}
		b.out = nil
	})
}
