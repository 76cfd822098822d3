package kbatch

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func sample() []byte {
	return Build(BuildOptions{BaseTimestamp: 1000, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 5},
		[]Record{{Key: []byte("a"), Value: []byte("1")}, {Value: []byte("2"), TimestampDelta: 3}, {Key: []byte("c")}})
}

func TestValidateProducedAcceptsBuiltBatch(t *testing.T) {
	b := sample()
	h, err := ValidateProduced(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.NumRecords != 3 || h.MaxTimestamp != 1003 || h.ProducerID != 7 || h.BaseSequence != 5 || h.LastSequence() != 7 {
		t.Fatalf("header %+v", h)
	}
	// kmsg (the client-side codec) agrees on the layout and CRC.
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	if rb.NumRecords != 3 || uint32(rb.CRC) != h.CRC {
		t.Fatalf("kmsg read %+v", rb)
	}
}

func TestValidateProducedRejects(t *testing.T) {
	cases := map[string]struct {
		mut  func([]byte) []byte
		want error
	}{
		"crc":           {func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, ErrCorrupt},
		"magic":         {func(b []byte) []byte { b[posMagic] = 1; return b }, ErrMagic},
		"short":         {func(b []byte) []byte { return b[:40] }, ErrCorrupt},
		"two batches":   {func(b []byte) []byte { return append(b, b...) }, ErrInvalid},
		"length":        {func(b []byte) []byte { binary.BigEndian.PutUint32(b[posLength:], 5); return b }, ErrInvalid},
		"control":       {func(b []byte) []byte { return rewriteAttr(b, AttrControl) }, ErrInvalid},
		"codec":         {func(b []byte) []byte { return rewriteAttr(b, 7) }, ErrCorrupt},
		"count":         {func(b []byte) []byte { return rewriteU32(b, posRecordCount, 4) }, ErrInvalid},
		"records short": {func(b []byte) []byte { return rewriteBoth(b, 4) }, ErrCorrupt},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ValidateProduced(c.mut(sample()))
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func resum(b []byte) []byte {
	binary.BigEndian.PutUint32(b[posCRC:], crc32c(b[posAttributes:]))
	return b
}

func rewriteAttr(b []byte, attr int16) []byte {
	binary.BigEndian.PutUint16(b[posAttributes:], uint16(attr))
	return resum(b)
}

func rewriteU32(b []byte, pos int, v uint32) []byte {
	binary.BigEndian.PutUint32(b[pos:], v)
	return resum(b)
}

// rewriteBoth claims n records with a consistent lastOffsetDelta so only the
// record walk can notice.
func rewriteBoth(b []byte, n uint32) []byte {
	binary.BigEndian.PutUint32(b[posRecordCount:], n)
	binary.BigEndian.PutUint32(b[posLastOffsetDelta:], n-1)
	return resum(b)
}

func TestPatchesOutsideCRC(t *testing.T) {
	b := sample()
	SetBaseOffset(b, 12345)
	SetLeaderEpoch(b, 9)
	if err := CheckCRC(b); err != nil {
		t.Fatal(err)
	}
	h, _ := ParseHeader(b)
	if h.BaseOffset != 12345 || h.LeaderEpoch != 9 {
		t.Fatalf("%+v", h)
	}
	SetLogAppendTime(b, 99999)
	if err := CheckCRC(b); err != nil {
		t.Fatal(err)
	}
	h, _ = ParseHeader(b)
	if h.MaxTimestamp != 99999 || h.Attributes&AttrLogAppendTime == 0 {
		t.Fatalf("%+v", h)
	}
}

func TestLastSequenceWraps(t *testing.T) {
	h := Header{BaseSequence: 1<<31 - 2, LastOffsetDelta: 3}
	if got := h.LastSequence(); got != 1 {
		t.Fatalf("got %d", got)
	}
}

func FuzzValidateProduced(f *testing.F) {
	f.Add(sample())
	f.Add(sample()[:61])
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ValidateProduced(b)
		if err != nil {
			return
		}
		if h.TotalSize() != len(b) || CheckCRC(b) != nil {
			t.Fatalf("accepted an inconsistent batch: %+v", h)
		}
		if h.Codec() == CodecNone {
			n := 0
			if err := WalkRecords(b, func(RecordInfo) bool { n++; return true }); err != nil || int32(n) != h.NumRecords {
				t.Fatalf("walk %d records, err %v, header says %d", n, err, h.NumRecords)
			}
		}
	})
}

func TestControlRoundTrip(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := BuildControl(4242, 7, commit, 3, 1700000000000)
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.ProducerID != 4242 || h.ProducerEpoch != 7 || h.BaseSequence != -1 ||
			h.Attributes != AttrTransactional|AttrControl || h.NumRecords != 1 {
			t.Fatalf("header %+v", h)
		}
		if err := CheckCRC(b); err != nil {
			t.Fatal(err)
		}
		typ, err := ControlType(b)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int16{false: ControlAbort, true: ControlCommit}[commit]; typ != want {
			t.Fatalf("type %d, want %d", typ, want)
		}
	}
	if _, err := ControlType(sample()); err == nil {
		t.Fatal("a data batch parsed as a control batch")
	}
}
