package meta

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/nereusstream/nereus-go/bookkeeper/proto"
)

// The sample from /work/shared/notes/bookkeeper.md §11.3 (computed, and
// decoded by protoc against DataFormats.proto).
const sampleHex = "426f6f6b69654d65746164617461466f726d617456657273696f6e09330a" + "6d" +
	"08021003180020ffffffffffffffffff01280132320a0e3132372e302e302e313a333138310a0e3132372e302e302e313a333138320a0e3132372e302e302e313a33313833100038034200480250808081f5ac335a120a0b6170706c69636174696f6e120377616c60959aef3a"

func TestSampleRoundTrip(t *testing.T) {
	data, _ := hex.DecodeString(sampleHex)
	m, err := Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if m.EnsembleSize != 3 || m.WriteQuorum != 2 || m.AckQuorum != 2 || m.State != StateOpen ||
		m.DigestType != proto.DigestCRC32C || len(m.Password) != 0 || m.CToken != 123456789 ||
		string(m.Custom["application"]) != "wal" || len(m.Segments) != 1 ||
		m.Segments[0].Ensemble[2] != "127.0.0.1:3183" || !m.HasCtime {
		t.Fatalf("decoded %+v", m)
	}
	again, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Fatalf("re-encoded bytes differ\n got %x\nwant %x", again, data)
	}
}

func TestClosedRoundTripAndValidation(t *testing.T) {
	m := &LedgerMetadata{
		EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2, State: StateClosed, LastEntryID: 41, Length: 4096 * 42,
		Segments:   []Segment{{0, []string{"a:1", "b:2", "c:3"}}, {10, []string{"a:1", "d:4", "c:3"}}},
		DigestType: proto.DigestHMAC, Password: []byte("pw"), HasCToken: true, CToken: 7,
	}
	b, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastEntryID != 41 || got.Length != 4096*42 || got.SegmentFor(9).FirstEntryID != 0 ||
		got.SegmentFor(10).Ensemble[1] != "d:4" || got.SegmentFor(1000).FirstEntryID != 10 {
		t.Fatalf("%+v", got)
	}
	bad := m.Clone()
	bad.AckQuorum = 4
	if _, err := Marshal(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("AQ > WQ accepted: %v", err)
	}
	bad = m.Clone()
	bad.Segments[1].Ensemble[1] = "a:1"
	if _, err := Marshal(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("repeated bookie accepted: %v", err)
	}
	if _, err := Unmarshal([]byte("BookieMetadataFormatVersion\t2\nquorumSize: 2\n")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("v2 text accepted: %v", err)
	}
	for i := 0; i < len(b); i++ {
		if _, err := Unmarshal(b[:i]); err == nil {
			t.Fatalf("truncated metadata (%d of %d bytes) accepted", i, len(b))
		}
	}
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct {
		layout Layout
		id     int64
		want   string
	}{
		{LayoutHierarchical, 0, "/ledgers/00/0000/L0000"},
		{LayoutHierarchical, 1234567890, "/ledgers/12/3456/L7890"},
		{LayoutHierarchical, 2147483646, "/ledgers/21/4748/L3646"},
		{LayoutHierarchical, 2147483647, "/ledgers/000/0000/0021/4748/L3647"},
		{LayoutHierarchical, 4611686018427387904, "/ledgers/461/1686/0184/2738/L7904"},
		{LayoutLongHierarchical, 5, "/ledgers/000/0000/0000/0000/L0005"},
	} {
		if got := LedgerPath("/ledgers", tc.layout, tc.id); got != tc.want {
			t.Errorf("LedgerPath(%d, %d) = %s, want %s", tc.layout, tc.id, got, tc.want)
		}
	}
	l, err := ParseLayout([]byte("2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"))
	if err != nil || l != LayoutHierarchical {
		t.Fatal(l, err)
	}
	l, err = ParseLayout([]byte("2\nshaded.org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory:1\n"))
	if err != nil || l != LayoutLongHierarchical {
		t.Fatal(l, err)
	}
	if _, err := ParseLayout([]byte("2\norg.apache.bookkeeper.meta.FlatLedgerManagerFactory:1")); err == nil {
		t.Fatal("flat layout accepted")
	}
	eps, err := ParseBookieServiceInfo(AppendBookieServiceInfo(nil, "127.0.0.1", 3181))
	if err != nil || len(eps) != 1 || eps[0].Protocol != "bookie-rpc" || eps[0].Port != 3181 || eps[0].Host != "127.0.0.1" {
		t.Fatal(eps, err)
	}
}

func FuzzUnmarshal(f *testing.F) {
	data, _ := hex.DecodeString(sampleHex)
	f.Add(data)
	f.Add([]byte("BookieMetadataFormatVersion\t3\n\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Unmarshal(b)
		if err != nil {
			return
		}
		// Whatever decodes is valid and survives a round trip.
		out, err := Marshal(m)
		if err != nil {
			t.Fatalf("decoded metadata does not re-encode: %v", err)
		}
		m2, err := Unmarshal(out)
		if err != nil || m2.State != m.State || m2.LastEntryID != m.LastEntryID && m.State == StateClosed {
			t.Fatalf("round trip changed metadata: %v", err)
		}
		_, _ = ParseBookieServiceInfo(b)
		_, _ = ParseLayout(b)
	})
}
