package generation

import (
	"errors"
	"testing"
)

// TestRebase: an empty builder moves its start; one holding an entry
// refuses (its object would no longer be contiguous).
func TestRebase(t *testing.T) {
	b := NewBuilder(7, 1, 155, BuilderOptions{})
	if err := b.Rebase(150); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(Entry{Offset: 150, RecordCount: 10, Payload: []byte("whole entry")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Rebase(140); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("rebase with an entry: %v", err)
	}
	obj, info, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if info.Start != 150 || info.End != 160 {
		t.Fatalf("info %+v", info)
	}
	if _, err := Verify(obj); err != nil {
		t.Fatal(err)
	}
}
