package filesync

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestFillerNeverOverwritesTheWriter: a writer appending through Claim and
// Advance while the filler runs ahead keeps every byte it wrote, the file
// holds zeros from the writer's end to the fill target, and no fill goes
// past the limit.
func TestFillerNeverOverwritesTheWriter(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	const chunk, limit = 3 << 20, 10 << 20
	z := New(f, 0, chunk, limit, Fdatasync)
	var want []byte
	off := int64(0)
	for i := range 400 {
		rec := bytes.Repeat([]byte{byte(i%250 + 1)}, 1000+i*37)
		end := off + int64(len(rec))
		if end > limit {
			break
		}
		z.Claim(end)
		if _, err := f.WriteAt(rec, off); err != nil {
			t.Fatal(err)
		}
		off = end
		want = append(want, rec...)
		z.Advance(off)
	}
	z.Wait()
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(want)], want) {
		t.Fatal("the filler overwrote bytes the writer claimed")
	}
	if len(got) > limit {
		t.Fatalf("the file grew to %d bytes, past the limit %d", len(got), limit)
	}
	if len(got) < len(want)+1 {
		t.Fatalf("nothing was zero-filled ahead of the writer (file %d bytes, written %d)", len(got), len(want))
	}
	for _, c := range got[len(want):] {
		if c != 0 {
			t.Fatal("a byte past the writer's end is not zero")
		}
	}
	t.Logf("wrote %d bytes; the file holds %d (zeros ahead %d)", len(want), len(got), len(got)-len(want))
}
