package wire

import (
	"bytes"
	"testing"
)

// FuzzDecodeFrame feeds arbitrary bytes to the frame reader and the payload
// and batch parsers. Invariants: no panic, no allocation beyond the frame
// limit, and a frame that decodes re-encodes to a frame that decodes to the
// same command type.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(sendFrame(f))
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 8, 0, 0, 0, 2, 8, 18})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), 1<<16)
		for i := 0; i < 8; i++ {
			fr, err := r.ReadFrame()
			if err != nil {
				return
			}
			out, err := AppendCommand(nil, fr.Cmd)
			if err == nil {
				back, err := NewReader(bytes.NewReader(out), 1<<20).ReadFrame()
				if err != nil {
					t.Fatalf("re-encoded frame does not decode: %v", err)
				}
				if back.Cmd.GetType() != fr.Cmd.GetType() {
					t.Fatalf("type changed %v -> %v", fr.Cmd.GetType(), back.Cmd.GetType())
				}
			}
			if fr.Payload != nil {
				p, err := ParsePayload(fr.Payload)
				if err == nil {
					_ = p.StickyKey()
					_, _ = ParseBatch(p.Body, p.NumMessages())
				}
			}
		}
	})
}
