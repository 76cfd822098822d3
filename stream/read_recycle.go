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
	})
}
