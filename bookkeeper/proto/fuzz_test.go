package proto

import (
	"bufio"
	"bytes"
	"testing"
)

// FuzzParse feeds arbitrary bytes (what a hostile or buggy bookie or client
// could send) to every decoder. Invariants: no decoder panics; a decoded
// response's Body lies inside the frame; an entry that verifies re-encodes to
// the same bytes.
func FuzzParse(f *testing.F) {
	d, _ := NewDigester(DigestCRC32C, nil)
	mk := MasterKey(nil)
	f.Add(d.AppendAddFrame(nil, &mk, 0, EntryHeader{LedgerID: 1, LastAddConfirmed: -1, Length: 5}, []byte("hello")))
	f.Add(AppendReadRequest(nil, 1, LastEntry, FlagDoFencing, &mk))
	f.Add(AppendResponse(nil, 2, OpRead, EOK, 1, 0, d.AppendEntry(nil, EntryHeader{LedgerID: 1, Length: 1}, []byte("x"))))
	f.Add(AppendResponse(nil, 2, OpAdd, EOK, 1, 0, nil))
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReader(bytes.NewReader(b))
		for i := 0; i < 4; i++ {
			frame, err := ReadFrame(br, nil, 1<<16)
			if err != nil {
				break
			}
			if r, err := ParseResponse(frame); err == nil && len(r.Body) > len(frame) {
				t.Fatalf("body longer than frame")
			}
			if r, err := ParseRequest(frame); err == nil && r.Op == OpAdd {
				if h, p, err := d.VerifyEntry(r.Entry, r.LedgerID, r.EntryID); err == nil {
					if again := d.AppendEntry(nil, h, p); !bytes.Equal(again, r.Entry) {
						t.Fatalf("verified entry does not re-encode identically")
					}
				}
			}
		}
		for _, typ := range []DigestType{DigestCRC32, DigestCRC32C, DigestHMAC, DigestDummy} {
			dd, _ := NewDigester(typ, []byte("pw"))
			_, _, _ = dd.VerifyEntry(b, 1, LastEntry)
		}
	})
}
