package proto

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// Test vectors from /work/shared/notes/bookkeeper.md §6.6 (computed from
// BookKeeper's DigestManager; CRC32C cross-checked against the standard
// check value). Real-bookie tests prove them against Java.
func TestMasterKeyVectors(t *testing.T) {
	if got := MasterKey(nil); hex.EncodeToString(got[:]) != "850bf1071c5e3d8c24235676f8816ae0cbe2f14f" {
		t.Fatalf("masterKey(\"\") = %x", got)
	}
	if got := MasterKey([]byte("secret")); hex.EncodeToString(got[:]) != "e793cbc379107648537183605cd361d3bb789a39" {
		t.Fatalf("masterKey(secret) = %x", got)
	}
	if got := MACKey([]byte("secret")); hex.EncodeToString(got) != "190c685bae851574f5ab47c960a00c0466f96603" {
		t.Fatalf("macKey(secret) = %x", got)
	}
}

func TestDigestVectors(t *testing.T) {
	h := EntryHeader{LedgerID: 1, EntryID: 0, LastAddConfirmed: -1, Length: 5}
	payload := []byte("hello")
	header := "0000000000000001" + "0000000000000000" + "ffffffffffffffff" + "0000000000000005"
	for _, tc := range []struct {
		typ    DigestType
		pass   string
		digest string
	}{
		{DigestCRC32, "", "0000000030a56872"},
		{DigestCRC32C, "", "e3a5f74d"},
		{DigestHMAC, "secret", "985ff33d73766e6ab95e91f14097a562ffc64ae8"},
		{DigestDummy, "", ""},
	} {
		d, err := NewDigester(tc.typ, []byte(tc.pass))
		if err != nil {
			t.Fatal(err)
		}
		e := d.AppendEntry(nil, h, payload)
		want := header + tc.digest + hex.EncodeToString(payload)
		if got := hex.EncodeToString(e); got != want {
			t.Errorf("%s entry\n got %s\nwant %s", tc.typ, got, want)
		}
		gh, gp, err := d.VerifyEntry(e, 1, 0)
		if err != nil || gh != h || string(gp) != "hello" {
			t.Errorf("%s verify: %v %+v %q", tc.typ, err, gh, gp)
		}
		if _, _, err := d.VerifyEntry(e, 1, LastEntry); err != nil {
			t.Errorf("%s verify last-entry: %v", tc.typ, err)
		}
		if _, _, err := d.VerifyEntry(e, 2, 0); !errors.Is(err, ErrDigestMismatch) {
			t.Errorf("%s wrong ledger accepted: %v", tc.typ, err)
		}
		if _, _, err := d.VerifyEntry(e, 1, 1); !errors.Is(err, ErrDigestMismatch) {
			t.Errorf("%s wrong entry accepted: %v", tc.typ, err)
		}
		if tc.typ != DigestDummy {
			bad := append([]byte(nil), e...)
			bad[len(bad)-1] ^= 1
			if _, _, err := d.VerifyEntry(bad, 1, 0); !errors.Is(err, ErrDigestMismatch) {
				t.Errorf("%s corrupt payload accepted: %v", tc.typ, err)
			}
		}
	}
}

func TestFrameVectors(t *testing.T) {
	d, _ := NewDigester(DigestCRC32C, nil)
	mk := MasterKey(nil)
	add := d.AppendAddFrame(nil, &mk, FlagNone, EntryHeader{LedgerID: 1, EntryID: 0, LastAddConfirmed: -1, Length: 5}, []byte("hello"))
	want := "0000004102010000850bf1071c5e3d8c24235676f8816ae0cbe2f14f00000000000000010000000000000000ffffffffffffffff0000000000000005e3a5f74d68656c6c6f"
	if got := hex.EncodeToString(add); got != want {
		t.Fatalf("add frame\n got %s\nwant %s", got, want)
	}
	if len(add) != d.AddFrameSize(5) {
		t.Fatalf("AddFrameSize %d, frame %d", d.AddFrameSize(5), len(add))
	}
	fr := AppendReadRequest(nil, 1, LastEntry, FlagDoFencing, &mk)
	if got := hex.EncodeToString(fr); got != "00000028020200010000000000000001ffffffffffffffff850bf1071c5e3d8c24235676f8816ae0cbe2f14f" {
		t.Fatalf("fencing read frame %s", got)
	}

	// The fake bookie's decoder reads back what the client encodes.
	req, err := ParseRequest(add[4:])
	if err != nil || req.Op != OpAdd || req.LedgerID != 1 || req.EntryID != 0 || req.MasterKey != mk || len(req.Entry) != 32+4+5 {
		t.Fatalf("parse add: %v %+v", err, req)
	}
	req, err = ParseRequest(fr[4:])
	if err != nil || req.Op != OpRead || req.EntryID != LastEntry || !req.HasKey || req.Flags != FlagDoFencing {
		t.Fatalf("parse read: %v %+v", err, req)
	}
	plain := AppendReadRequest(nil, 7, 3, FlagNone, nil)
	if len(plain) != 4+ReadRequestLen {
		t.Fatalf("plain read frame %d bytes", len(plain))
	}
	if req, err = ParseRequest(plain[4:]); err != nil || req.HasKey || req.LedgerID != 7 || req.EntryID != 3 {
		t.Fatalf("parse plain read: %v %+v", err, req)
	}
}

func TestResponses(t *testing.T) {
	body := []byte("entrybytes-entrybytes-entrybytes-entry")
	rf := AppendResponse(nil, 2, OpRead, EOK, 9, LastEntry, body)
	br := bufio.NewReader(bytes.NewReader(append(rf, AppendResponse(nil, 2, OpAdd, EFENCED, 9, 4, nil)...)))
	f, err := ReadFrame(br, nil, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseResponse(f)
	if err != nil || r.Op != OpRead || r.RC != EOK || r.LedgerID != 9 || r.EntryID != LastEntry || !bytes.Equal(r.Body, body) {
		t.Fatalf("read response %v %+v", err, r)
	}
	f, err = ReadFrame(br, nil, DefaultMaxFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	r, err = ParseResponse(f)
	if err != nil || r.Op != OpAdd || r.RC != EFENCED || r.EntryID != 4 || r.Body != nil {
		t.Fatalf("add response %v %+v", err, r)
	}
	if _, err := ParseResponse(AppendResponse(nil, 2, OpAdd, EOK, 1, 1, []byte("x"))[4:]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("add response with body accepted: %v", err)
	}
	if _, err := ParseResponse(AppendResponse(nil, 2, OpRead, ENOENTRY, 1, 1, []byte("x"))[4:]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("error response with body accepted: %v", err)
	}
	if _, err := ReadFrame(bufio.NewReader(bytes.NewReader([]byte{0x7f, 0, 0, 0})), nil, DefaultMaxFrameSize); !errors.Is(err, ErrMalformed) {
		t.Fatalf("oversized frame accepted: %v", err)
	}
}
