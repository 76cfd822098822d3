package fsstore

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecodeHeader feeds arbitrary bytes to the object-file header parser.
// Invariants: it never panics; whatever it accepts describes a file of
// exactly the given length, with a sane block size.
func FuzzDecodeHeader(f *testing.F) {
	for _, data := range [][]byte{nil, []byte("x"), pattern(defaultBlockSize + 1)} {
		prefix := encodePrefix(data, 7, 1)
		f.Add(append(prefix, data...), int64(len(prefix)+len(data)))
	}
	f.Add(make([]byte, headerSize), int64(headerSize))
	f.Fuzz(func(t *testing.T, b []byte, fileSize int64) {
		h, err := decodeHeader("k", b, fileSize)
		if err != nil {
			return
		}
		if h.fileSize() != fileSize || h.blockSize == 0 || h.blockSize > maxBlockSize {
			t.Fatalf("accepted inconsistent header %+v for file size %d", h, fileSize)
		}
		// Whole-object verification of the same bytes must not panic.
		if int64(len(b)) == fileSize {
			table := b[headerSize:h.dataOffset()]
			_ = verifyBlocks("k", h, 0, table, b[h.dataOffset():])
		}
	})
}

// FuzzKeyPath checks the key → path mapping for every key CheckKey accepts:
// the path stays inside the objects directory, names no "." or ".."
// component, and the mapping is reversible (so distinct keys never share a
// file).
func FuzzKeyPath(f *testing.F) {
	for _, k := range []string{"a", "a/b", "../x", "a/../b", "./a", "a//b", "x.d/y.o", "é/ü", "a.o", "/abs", ".."} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if checkKey(key) != nil {
			return
		}
		rel := relPath(key)
		if filepath.IsAbs(rel) || filepath.Clean(rel) != rel {
			t.Fatalf("key %q maps to unclean path %q", key, rel)
		}
		comps := strings.Split(rel, string(filepath.Separator))
		var segs []string
		for i, c := range comps {
			if c == "." || c == ".." || c == "" {
				t.Fatalf("key %q maps to path %q with component %q", key, rel, c)
			}
			seg, ok := entryName(c, i < len(comps)-1)
			if !ok {
				t.Fatalf("key %q: component %q does not decode", key, c)
			}
			segs = append(segs, seg)
		}
		if back := strings.Join(segs, "/"); back != key {
			t.Fatalf("key %q round-trips to %q", key, back)
		}
	})
}
