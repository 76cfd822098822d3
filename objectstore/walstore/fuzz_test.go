package walstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
)

// FuzzOpen: whatever bytes follow a valid file header in the only log
// file, Open either fails with ErrCorrupt or opens, and then every listed
// object reads back or fails with ErrCorrupt — never a panic, never
// another error. A record that round-trips through appendRecord decodes
// to what was encoded.
func FuzzOpen(f *testing.F) {
	rec := func(seq, synced uint64, key string, value []byte) []byte {
		return appendRecord(nil, recordHead{kind: recPut, seq: seq, synced: synced, version: seq, modTime: 1}, key, value)
	}
	two := append(rec(1, 0, "a", []byte("x")), rec(2, 1, "b", bytes.Repeat([]byte{7}, 20<<10))...)
	f.Add(two)
	f.Add(two[:len(two)-5])
	f.Add(append(rec(1, 0, "a", nil), appendRecord(nil, recordHead{kind: recTombstone, seq: 2, synced: 1}, "a", nil)...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		if h, key, sums, ok := decodeHead(body); ok {
			if int(h.keyLen) != len(key) || len(sums) != numBlocks(h.valueLen) {
				t.Fatalf("decodeHead: key %d/%d bytes, %d sums for %d value bytes", h.keyLen, len(key), len(sums), h.valueLen)
			}
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, fileName(1)), append(fileHeader(1, 1), body...), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, Options{PreallocBytes: 4 << 10})
		if err != nil {
			if !errors.Is(err, objectstore.ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt or success", err)
			}
			return
		}
		defer func() { _ = s.Close() }()
		ctx := context.Background()
		for info, err := range s.List(ctx, "") {
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if _, _, err := s.Get(ctx, info.Key); err != nil && !errors.Is(err, objectstore.ErrCorrupt) {
				t.Fatalf("Get %q: %v", info.Key, err)
			}
		}
		if _, err := s.Put(ctx, "probe", []byte("p"), objectstore.PutOptions{}); err != nil {
			t.Fatalf("Put after Open: %v", err)
		}
	})
}
