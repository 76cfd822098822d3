package walstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
)

// locate returns the path and record offset of key's live record.
func locate(t *testing.T, s *Store, key string) (path string, off, valueOff int64) {
	t.Helper()
	e := s.lookup(key)
	if e == nil {
		t.Fatalf("%s is not in the index", key)
	}
	defer e.file.release()
	return e.file.path, e.off, e.valueOff
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// fill writes objects a, b and c (each 40 KiB, several blocks) and, with
// small files, seals the file holding them.
func fill(t *testing.T, dir string, seal bool) (*Store, map[string]objectstore.UpdateVersion) {
	t.Helper()
	opts := Options{FileBytes: 1 << 20}
	if seal {
		opts.FileBytes = 150 << 10
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	vs := map[string]objectstore.UpdateVersion{}
	for _, k := range []string{"a", "b", "c"} {
		v, err := s.Put(context.Background(), k, bytes.Repeat([]byte(k), 40<<10), objectstore.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vs[k] = v
	}
	if seal {
		if _, err := s.Put(context.Background(), "d", bytes.Repeat([]byte("d"), 40<<10), objectstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return s, vs
}

// TestDamagedValueIsServedAsCorrupt: a flipped value byte, in a sealed
// file and in the newest one before an intact later record, keeps the
// store open and its object unreadable (ErrCorrupt), never served; the
// other objects read back.
func TestDamagedValueIsServedAsCorrupt(t *testing.T) {
	for _, sealed := range []bool{true, false} {
		dir := t.TempDir()
		s, vs := fill(t, dir, sealed)
		path, _, valueOff := locate(t, s, "b")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		flipByte(t, path, valueOff+20<<10)
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("sealed=%v: Open with one damaged value: %v", sealed, err)
		}
		ctx := context.Background()
		if _, _, err := s.Get(ctx, "b"); !errors.Is(err, objectstore.ErrCorrupt) {
			t.Fatalf("sealed=%v: Get of the damaged object: %v, want ErrCorrupt", sealed, err)
		}
		if _, err := s.GetRange(ctx, "b", 16<<10, 100); !errors.Is(err, objectstore.ErrCorrupt) {
			t.Fatalf("sealed=%v: GetRange over the damaged block: %v, want ErrCorrupt", sealed, err)
		}
		for _, r := range []struct{ off, n int64 }{{20<<10 - 50, 100}, {0, 40 << 10}, {16 << 10, 16 << 10}, {1, 32 << 10}} {
			if _, err := objectstore.ReadRange(ctx, s, "b", r.off, make([]byte, r.n), objectstore.ReadRangeOptions{}); !errors.Is(err, objectstore.ErrCorrupt) {
				t.Fatalf("sealed=%v: ReadRange(%d, %d) over the damaged block: %v, want ErrCorrupt", sealed, r.off, r.n, err)
			}
		}
		if got, err := s.GetRange(ctx, "b", 0, 100); err != nil || !bytes.Equal(got, bytes.Repeat([]byte("b"), 100)) {
			t.Fatalf("sealed=%v: GetRange of an intact block of the damaged object: %v", sealed, err)
		}
		for _, k := range []string{"a", "c"} {
			if data, v, err := s.Get(ctx, k); err != nil || !v.Equal(vs[k]) || !bytes.Equal(data, bytes.Repeat([]byte(k), 40<<10)) {
				t.Fatalf("sealed=%v: Get %s beside the damaged object: %v", sealed, k, err)
			}
		}
		_ = s.Close()
	}
}

// TestDamagedHeaderFailsOpen: a flipped header byte that is not the torn
// tail — in a sealed file, or in the newest one before a record written
// after it was durable — fails Open with ErrCorrupt.
func TestDamagedHeaderFailsOpen(t *testing.T) {
	for _, sealed := range []bool{true, false} {
		dir := t.TempDir()
		s, _ := fill(t, dir, sealed)
		path, off, _ := locate(t, s, "b")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		flipByte(t, path, off+9) // inside its sequence number
		if s, err := Open(dir, Options{}); !errors.Is(err, objectstore.ErrCorrupt) {
			if err == nil {
				_ = s.Close()
			}
			t.Fatalf("sealed=%v: Open with a damaged header: %v, want ErrCorrupt", sealed, err)
		}
	}
}

// TestTornTailIsCut: damage in the last record of the newest file (its
// value or its header), with nothing after it, is the torn tail of a
// write never acknowledged: Open cuts it, the object is gone, the ones
// before it read back, and the store takes writes again.
func TestTornTailIsCut(t *testing.T) {
	for _, where := range []string{"value", "header"} {
		dir := t.TempDir()
		s, vs := fill(t, dir, false)
		path, off, valueOff := locate(t, s, "c")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		at := valueOff + 30<<10
		if where == "header" {
			at = off + 30
		}
		flipByte(t, path, at)
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("torn %s: Open: %v", where, err)
		}
		ctx := context.Background()
		if _, _, err := s.Get(ctx, "c"); !errors.Is(err, objectstore.ErrNotFound) {
			t.Fatalf("torn %s: the torn object: %v, want ErrNotFound", where, err)
		}
		for _, k := range []string{"a", "b"} {
			if _, v, err := s.Get(ctx, k); err != nil || !v.Equal(vs[k]) {
				t.Fatalf("torn %s: Get %s: %v", where, k, err)
			}
		}
		if st, err := os.Stat(path); err != nil || st.Size() != off {
			t.Fatalf("torn %s: the file was not cut at the torn record (%d): %v, %v", where, off, st.Size(), err)
		}
		if _, err := s.Put(ctx, "e", []byte("x"), objectstore.PutOptions{Mode: objectstore.PutCreate}); err != nil {
			t.Fatalf("torn %s: Put after the cut: %v", where, err)
		}
		_ = s.Close()
		if s, err = Open(dir, Options{}); err != nil {
			t.Fatalf("torn %s: second Open: %v", where, err)
		}
		_ = s.Close()
	}
}

// TestSealedFilesGiveBackTheirZeros: a sealed file is cut to its last
// record, so the zeros preallocated past it do not stay on disk while it
// lives.
func TestSealedFilesGiveBackTheirZeros(t *testing.T) {
	s, err := Open(t.TempDir(), Options{FileBytes: 1 << 20, PreallocBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		key := string(rune('a'+i%26)) + "/" + string(rune('a'+i/26))
		if _, err := s.Put(context.Background(), key, bytes.Repeat([]byte{byte(i)}, 150<<10), objectstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.RLock()
	files := append([]*logFile(nil), s.files[:len(s.files)-1]...)
	s.mu.RUnlock()
	if len(files) < 3 {
		t.Fatalf("only %d sealed files", len(files))
	}
	s.writeMu.Lock()
	s.trims.Wait()
	s.writeMu.Unlock()
	for _, f := range files {
		st, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != f.written() {
			t.Fatalf("sealed %s holds %d bytes, its records end at %d", f.path, st.Size(), f.written())
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestQuietStoreGivesBackItsSpace: after a burst of writes whose objects
// then die (all but one small one, as the WAL's manifest), a store that
// receives no more writes seals its active file for its age, copies the
// one live object forward and deletes every file it wrote but the last
// (which holds under 1 MiB, so it is never sealed for its age) — and then stays
// put: no seal, copy or file of its own while nothing is written.
func TestQuietStoreGivesBackItsSpace(t *testing.T) {
	// The burst below takes well under SealAfter, so only the store's own
	// sealing of a quiet file can let the file go.
	const sealAfter = 300 * time.Millisecond
	s, err := Open(t.TempDir(), Options{SealAfter: sealAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	if _, err := s.Put(ctx, "manifest", []byte("m"), objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 24 {
		key := "seg/" + string(rune('a'+i))
		if _, err := s.Put(ctx, key, bytes.Repeat([]byte{1}, 100<<10), objectstore.PutOptions{DeferSync: true}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 24 {
		if err := s.Delete(ctx, "seg/"+string(rune('a'+i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Until one file is left and nothing changes for two SealAfters (a
	// deletion leaves the list before its counter moves).
	deadline := time.Now().Add(10 * time.Second)
	st := s.Stats()
	for {
		time.Sleep(2 * sealAfter)
		now := s.Stats()
		if now == st && now.Files == 1 && now.FilesDeleted > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the quiet store kept its space: %+v", now)
		}
		st = now
	}
	// What stays: the live object, and what the last file got before
	// writes stopped if that was under the 1 MiB that seals a file for
	// its age.
	if st.LiveBytes > 1<<10 || st.FileBytes > sealMinBytes+st.LiveBytes {
		t.Fatalf("after the quiet store reclaimed: %+v", st)
	}
	time.Sleep(4 * sealAfter)
	if again := s.Stats(); again != st {
		t.Fatalf("the quiet store keeps working: %+v, then %+v", st, again)
	}
	if got, _, err := s.Get(ctx, "manifest"); err != nil || string(got) != "m" {
		t.Fatalf("the live object after the copy: %q, %v", got, err)
	}
}
