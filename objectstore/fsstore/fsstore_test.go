package fsstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func put(t *testing.T, s *Store, key string, data []byte, opts objectstore.PutOptions) objectstore.UpdateVersion {
	t.Helper()
	v, err := s.Put(context.Background(), key, data, opts)
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return v
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// flipByte XORs one byte of key's file at offset off.
func flipByte(t *testing.T, s *Store, key string, off int64) {
	t.Helper()
	path := filepath.Join(s.objectsDir, relPath(key))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptDataBlock(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	data := pattern(4*defaultBlockSize + 100)
	put(t, s, "seg/1", data, objectstore.PutOptions{})
	h := header{blockSize: defaultBlockSize, size: uint64(len(data))}
	// Corrupt one byte in block 1.
	flipByte(t, s, "seg/1", h.dataOffset()+defaultBlockSize+5)

	if _, _, err := s.Get(ctx, "seg/1"); !errors.Is(err, objectstore.ErrCorrupt) || errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("Get of corrupt object: %v, want ErrCorrupt", err)
	}
	if _, err := s.GetRange(ctx, "seg/1", defaultBlockSize+3, 10); !errors.Is(err, objectstore.ErrCorrupt) {
		t.Fatalf("GetRange over the corrupt block: %v, want ErrCorrupt", err)
	}
	// Ranges that do not touch block 1 read fine: GetRange reads and
	// verifies only the blocks it needs.
	got, err := s.GetRange(ctx, "seg/1", 3*defaultBlockSize, -1)
	if err != nil || !bytes.Equal(got, data[3*defaultBlockSize:]) {
		t.Fatalf("GetRange away from the corrupt block: %v", err)
	}
	got, err = s.GetRange(ctx, "seg/1", 0, defaultBlockSize)
	if err != nil || !bytes.Equal(got, data[:defaultBlockSize]) {
		t.Fatalf("GetRange of block 0: %v", err)
	}
	// Header is intact: Head works.
	if info, err := s.Head(ctx, "seg/1"); err != nil || info.Size != int64(len(data)) {
		t.Fatalf("Head: %+v, %v", info, err)
	}
}

// TestReadRangeCallerVerifies: ReadRange without CallerVerifies refuses a
// corrupt data block as GetRange does; with it, the data's check is the
// caller's (the flipped byte is returned as stored), but the header is still
// checked: a damaged header, a truncated or extended file is ErrCorrupt.
func TestReadRangeCallerVerifies(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	data := pattern(4*defaultBlockSize + 100)
	put(t, s, "seg/1", data, objectstore.PutOptions{})
	h := header{blockSize: defaultBlockSize, size: uint64(len(data))}
	flipByte(t, s, "seg/1", h.dataOffset()+defaultBlockSize+5)
	dst := make([]byte, 2*defaultBlockSize)
	if _, err := s.ReadRange(ctx, "seg/1", 0, dst, objectstore.ReadRangeOptions{}); !errors.Is(err, objectstore.ErrCorrupt) {
		t.Fatalf("ReadRange over the corrupt block: %v, want ErrCorrupt", err)
	}
	n, err := s.ReadRange(ctx, "seg/1", 0, dst, objectstore.ReadRangeOptions{CallerVerifies: true})
	if err != nil || n != len(dst) {
		t.Fatalf("ReadRange(CallerVerifies): %d, %v", n, err)
	}
	want := append([]byte(nil), data[:len(dst)]...)
	want[defaultBlockSize+5] ^= 0x10
	if !bytes.Equal(dst, want) {
		t.Fatal("ReadRange(CallerVerifies) did not return the stored bytes")
	}

	for _, damage := range []string{"header", "truncated", "extended"} {
		s := open(t, t.TempDir())
		put(t, s, "k", data, objectstore.PutOptions{})
		path := filepath.Join(s.objectsDir, relPath("k"))
		switch damage {
		case "header":
			flipByte(t, s, "k", 20)
		case "truncated":
			if err := os.Truncate(path, h.fileSize()-1); err != nil {
				t.Fatal(err)
			}
		case "extended":
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.Write([]byte("junk"))
			_ = f.Close()
		}
		if _, err := s.ReadRange(ctx, "k", 0, make([]byte, 10), objectstore.ReadRangeOptions{CallerVerifies: true}); !errors.Is(err, objectstore.ErrCorrupt) {
			t.Fatalf("%s: ReadRange(CallerVerifies): %v, want ErrCorrupt", damage, err)
		}
	}
}

func TestCorruptHeaderTableAndLength(t *testing.T) {
	ctx := context.Background()
	data := pattern(3 * defaultBlockSize)
	h := header{blockSize: defaultBlockSize, size: uint64(len(data))}
	cases := []struct {
		name   string
		damage func(t *testing.T, s *Store, key string)
	}{
		{"header", func(t *testing.T, s *Store, key string) { flipByte(t, s, key, 20) }},
		{"magic", func(t *testing.T, s *Store, key string) { flipByte(t, s, key, 0) }},
		{"table", func(t *testing.T, s *Store, key string) { flipByte(t, s, key, headerSize+4+1) }},
		{"truncated", func(t *testing.T, s *Store, key string) {
			if err := os.Truncate(filepath.Join(s.objectsDir, relPath(key)), h.fileSize()-1); err != nil {
				t.Fatal(err)
			}
		}},
		{"extended", func(t *testing.T, s *Store, key string) {
			f, err := os.OpenFile(filepath.Join(s.objectsDir, relPath(key)), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.Write([]byte("junk"))
			_ = f.Close()
		}},
		{"empty-file", func(t *testing.T, s *Store, key string) {
			if err := os.Truncate(filepath.Join(s.objectsDir, relPath(key)), 0); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, t.TempDir())
			v := put(t, s, "k", data, objectstore.PutOptions{})
			c.damage(t, s, "k")
			if _, _, err := s.Get(ctx, "k"); !errors.Is(err, objectstore.ErrCorrupt) {
				t.Fatalf("Get: %v, want ErrCorrupt", err)
			}
			if _, err := s.GetRange(ctx, "k", defaultBlockSize+1, 2); !errors.Is(err, objectstore.ErrCorrupt) {
				t.Fatalf("GetRange: %v, want ErrCorrupt", err)
			}
			if c.name != "table" {
				if _, err := s.Head(ctx, "k"); !errors.Is(err, objectstore.ErrCorrupt) {
					t.Fatalf("Head: %v, want ErrCorrupt", err)
				}
				// The corrupt object's error names it, and a consumer that
				// skips it still sees the objects after it.
				put(t, s, "kz", []byte("after"), objectstore.PutOptions{})
				var listErr error
				var errKey string
				var after []string
				for info, err := range s.List(ctx, "") {
					if err != nil {
						listErr, errKey = err, info.Key
						continue
					}
					after = append(after, info.Key)
				}
				if !errors.Is(listErr, objectstore.ErrCorrupt) || errKey != "k" {
					t.Fatalf("List: %v (key %q), want ErrCorrupt naming k", listErr, errKey)
				}
				if len(after) != 1 || after[0] != "kz" {
					t.Fatalf("List went on with %q after the corrupt object, want [kz]", after)
				}
				// A CAS cannot be checked against a corrupt object: not applied.
				_, err := s.Put(ctx, "k", []byte("new"), objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: v})
				if !errors.Is(err, objectstore.ErrCorrupt) || objectstore.Classify(err) != objectstore.NotApplied {
					t.Fatalf("PutUpdate over corrupt object: %v (%v)", err, objectstore.Classify(err))
				}
			}
			// An unconditional overwrite repairs it.
			put(t, s, "k", []byte("fresh"), objectstore.PutOptions{})
			if got, _, err := s.Get(ctx, "k"); err != nil || string(got) != "fresh" {
				t.Fatalf("Get after overwrite: %q, %v", got, err)
			}
		})
	}
}

func TestVersionsNeverRepeatAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	seen := map[string]bool{}
	note := func(v objectstore.UpdateVersion) {
		t.Helper()
		if seen[v.ETag] {
			t.Fatalf("version %q handed out twice", v.ETag)
		}
		seen[v.ETag] = true
	}
	for round := range 3 {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		for range versionBlock + 10 { // crosses a block reservation
			note(put(t, s, "k", []byte("same bytes"), objectstore.PutOptions{}))
		}
		v := put(t, s, "k", []byte("same bytes"), objectstore.PutOptions{})
		note(v)
		if err := s.Delete(ctx, "k", &v); err != nil {
			t.Fatal(err)
		}
		note(put(t, s, "k", []byte("same bytes"), objectstore.PutOptions{Mode: objectstore.PutCreate}))
		if round < 2 {
			// Simulate a crash: no Close, the reserved rest of the block is
			// abandoned. (The temp lock is released when the files close.)
			s.release()
		} else {
			_ = s.Close()
		}
	}
}

func TestVersionCounterSurvivesTornSlot(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	v1 := put(t, s, "k", []byte("a"), objectstore.PutOptions{})
	_ = s.Close()
	// Damage the slot holding the highest mark.
	path := filepath.Join(dir, "meta", "versions")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m0, _ := decodeSlot(b[0:16])
	m1, _ := decodeSlot(b[16:32])
	if m0 > m1 {
		b[3] ^= 0xff
	} else {
		b[19] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Both slots hold the same mark, so losing either one loses nothing.
	s2 := open(t, dir)
	v2 := put(t, s2, "k", []byte("a"), objectstore.PutOptions{})
	if v1.Equal(v2) {
		t.Fatalf("version reused after one damaged slot")
	}
	// Both slots damaged: refuse to open rather than risk reuse.
	_ = s2.Close()
	b, _ = os.ReadFile(path)
	b[3] ^= 0xff
	b[19] ^= 0xff
	b[4] ^= 0xff
	b[20] ^= 0xff
	_ = os.WriteFile(path, b, 0o644)
	s3, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() { _ = s3.Close() }()
	if _, err := s3.Put(ctx(), "k", []byte("x"), objectstore.PutOptions{}); !errors.Is(err, objectstore.ErrCorrupt) {
		t.Fatalf("Put with a corrupt version counter: %v, want ErrCorrupt", err)
	}
}

func ctx() context.Context { return context.Background() }

func TestStaleTempFilesRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	live := open(t, dir)
	// A dead writer's leftovers: an unlocked lock file with its directory,
	// and a directory whose lock is already gone.
	tmpRoot := filepath.Join(dir, "tmp")
	for _, name := range []string{"deadbeef00000001", "deadbeef00000002"} {
		if err := os.MkdirAll(filepath.Join(tmpRoot, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmpRoot, name, "0000000000000001.tmp"), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmpRoot, "deadbeef00000001.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	if got := s.StaleTempDirsRemoved(); got != 2 {
		t.Fatalf("removed %d stale temp dirs, want 2", got)
	}
	for _, name := range []string{"deadbeef00000001", "deadbeef00000002", "deadbeef00000001.lock"} {
		if _, err := os.Lstat(filepath.Join(tmpRoot, name)); !os.IsNotExist(err) {
			t.Fatalf("%s survived cleanup: %v", name, err)
		}
	}
	// The live store's temp directory is untouched and it still writes.
	if _, err := os.Stat(live.tmp.dir); err != nil {
		t.Fatalf("live store's temp dir removed: %v", err)
	}
	put(t, live, "still/works", []byte("x"), objectstore.PutOptions{})
	// Temp files never show up in listings.
	for info, err := range live.List(ctx(), "") {
		if err != nil || info.Key != "still/works" {
			t.Fatalf("List: %+v, %v", info, err)
		}
	}
}

func TestKeyAndPrefixObjectsCoexist(t *testing.T) {
	s := open(t, t.TempDir())
	put(t, s, "a", []byte("file"), objectstore.PutOptions{})
	put(t, s, "a/b", []byte("nested"), objectstore.PutOptions{})
	put(t, s, "a.d", []byte("suffix-looking"), objectstore.PutOptions{})
	put(t, s, "a.o/x", []byte("suffix-dir"), objectstore.PutOptions{})
	for key, want := range map[string]string{"a": "file", "a/b": "nested", "a.d": "suffix-looking", "a.o/x": "suffix-dir"} {
		got, _, err := s.Get(ctx(), key)
		if err != nil || string(got) != want {
			t.Fatalf("Get(%q) = %q, %v", key, got, err)
		}
	}
	// Deleting the last object under a prefix prunes its directory.
	if err := s.Delete(ctx(), "a/b", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.objectsDir, "a.d")); !os.IsNotExist(err) {
		t.Fatalf("empty directory not pruned: %v", err)
	}
	put(t, s, "a/b", []byte("again"), objectstore.PutOptions{Mode: objectstore.PutCreate})
}

func TestClosed(t *testing.T) {
	s := open(t, t.TempDir())
	put(t, s, "k", []byte("x"), objectstore.PutOptions{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx(), "k"); !errors.Is(err, objectstore.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := s.Put(ctx(), "k", nil, objectstore.PutOptions{}); !errors.Is(err, objectstore.ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	for _, err := range s.List(ctx(), "") {
		if !errors.Is(err, objectstore.ErrClosed) {
			t.Fatalf("List after Close: %v", err)
		}
	}
	// The data is still there for the next Open.
	s2 := open(t, s.Root())
	if got, _, err := s2.Get(ctx(), "k"); err != nil || string(got) != "x" {
		t.Fatalf("reopen: %q, %v", got, err)
	}
}

// A List loop body may mutate the store (and Close may run meanwhile)
// without deadlocking: reads do not hold the close lock.
func TestListLoopBodyMayMutate(t *testing.T) {
	s := open(t, t.TempDir())
	for i := range 5 {
		put(t, s, "src/"+string(rune('a'+i)), []byte("x"), objectstore.PutOptions{})
	}
	n := 0
	for info, err := range s.List(ctx(), "src/") {
		if err != nil {
			t.Fatal(err)
		}
		put(t, s, "dst/"+info.Key, []byte("y"), objectstore.PutOptions{})
		if err := s.Delete(ctx(), info.Key, nil); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 5 {
		t.Fatalf("listed %d", n)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, err := range s.List(ctx(), "dst/") {
			if err != nil {
				return // ErrClosed once Close has run
			}
			_, _, _ = s.Get(ctx(), "dst/src/a")
		}
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-done
}
