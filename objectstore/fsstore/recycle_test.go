//go:build linux

package fsstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/objectstore"
)

// manualHousekeeper replaces s's housekeeper with one without a goroutine,
// so a test decides when retired inodes are adopted (settle).
func manualHousekeeper(t *testing.T, s *Store) {
	t.Helper()
	skipIfSpaceShort(t, s)
	s.hk.shutdown()
	s.hk = newHousekeeper(s.tmp.dir, &s.tmpSeq)
	close(s.hk.done) // no goroutine to wait for at Close
}

// skipIfSpaceShort: with little space free the Store frees every retired
// inode by design, so the tests of reuse have nothing to see.
func skipIfSpaceShort(t *testing.T, s *Store) {
	t.Helper()
	if spaceShort(s.tmp.dir) {
		testenv.SkipOrFail(t, "less than %d MiB free where the test's store lives: retired inodes are not recycled", minFreeForRecycling>>20)
	}
}

// settle does what the housekeeper goroutine would: adopt or free what was
// retired, close what was released, top the pool up.
func settle(h *housekeeper) {
	for {
		select {
		case r := <-h.retire:
			h.adopt(r)
		case f := <-h.release:
			closeReleased(f)
		default:
			h.refill()
			return
		}
	}
}

func inodeOf(t *testing.T, s *Store, key string) uint64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(s.objectsDir, relPath(key)))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestRecycledInodes: once objects were deleted and replaced, later Puts
// create no temp file at all — they are written into the retired inodes
// (the same inode numbers come back) — and every object reads back intact
// whether its recycled inode was longer (cut to length) or shorter (grown)
// than the object, through Get, GetRange, Head and List.
func TestRecycledInodes(t *testing.T) {
	s := open(t, t.TempDir())
	manualHousekeeper(t, s)
	old := map[uint64]bool{}
	var v objectstore.UpdateVersion
	for i := range 8 {
		settle(s.hk)
		key := fmt.Sprintf("seg/%d", i)
		put(t, s, key, pattern(40<<10+i), objectstore.PutOptions{Mode: objectstore.PutCreate})
		old[inodeOf(t, s, key)] = true
		opts := objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: v}
		if v.IsZero() {
			opts = objectstore.PutOptions{Mode: objectstore.PutCreate}
		}
		v = put(t, s, "manifest", pattern(100+i), opts)
		old[inodeOf(t, s, "manifest")] = true
	}
	for i := range 8 {
		if err := s.Delete(ctx(), fmt.Sprintf("seg/%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	settle(s.hk)
	// 8 deleted segments and 7 replaced manifests, less the 7 manifests
	// already written into segments' Puts of the loop above.
	if n := len(s.hk.recycled); n != 8+7-7+1 {
		t.Fatalf("%d inodes recycled, want 9", n)
	}
	creates, reuses := s.hk.creates.Load(), s.hk.reuses.Load()
	sizes := []int{100, 70 << 10, 5, 40 << 10, 16 << 10, 1, 33 << 10, 200}
	for i, n := range sizes {
		key := fmt.Sprintf("new/%d", i)
		put(t, s, key, pattern(n), objectstore.PutOptions{Mode: objectstore.PutCreate})
		if !old[inodeOf(t, s, key)] {
			t.Fatalf("%s was not written into a recycled inode", key)
		}
		v = put(t, s, "manifest", pattern(n+1), objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: v})
		if !old[inodeOf(t, s, "manifest")] {
			t.Fatal("the manifest was not written into a recycled inode")
		}
		settle(s.hk)
	}
	if got := s.hk.creates.Load() - creates; got != 0 {
		t.Fatalf("%d temp files created with recycled inodes available", got)
	}
	if r := s.hk.reuses.Load() - reuses; r != int64(2*len(sizes)) {
		t.Fatalf("%d Puts reused an inode, want %d", r, 2*len(sizes))
	}
	listed := map[string]int64{}
	for info, err := range s.List(ctx(), "") {
		if err != nil {
			t.Fatal(err)
		}
		listed[info.Key] = info.Size
	}
	for i, n := range sizes {
		key := fmt.Sprintf("new/%d", i)
		if b, _, err := s.Get(ctx(), key); err != nil || !bytes.Equal(b, pattern(n)) {
			t.Fatalf("Get %s: %d bytes (want %d), %v", key, len(b), n, err)
		}
		if b, err := s.GetRange(ctx(), key, int64(n/2), -1); err != nil || !bytes.Equal(b, pattern(n)[n/2:]) {
			t.Fatalf("GetRange %s: %d bytes, %v", key, len(b), err)
		}
		if info, err := s.Head(ctx(), key); err != nil || info.Size != int64(n) {
			t.Fatalf("Head %s: %+v, %v", key, info, err)
		}
		if listed[key] != int64(n) {
			t.Fatalf("List %s: size %d, want %d", key, listed[key], n)
		}
	}
	if b, got, err := s.Get(ctx(), "manifest"); err != nil || !bytes.Equal(b, pattern(201)) || !got.Equal(v) {
		t.Fatalf("manifest: %d bytes, %v, %v", len(b), got, err)
	}
}

// TestRecycleSkipsInodesStillOpen: an inode someone still has open when it
// is retired (a reader of the old object, in this process or another) is
// never written into — the reader keeps reading the old bytes — and it is
// freed instead. The mutant (the lease check skipped) must show the
// reader's bytes changing, or this test could not see the failure.
func TestRecycleSkipsInodesStillOpen(t *testing.T) {
	for _, mutant := range []bool{false, true} {
		t.Run(fmt.Sprintf("skipLeaseCheck=%v", mutant), func(t *testing.T) {
			s := open(t, t.TempDir())
			manualHousekeeper(t, s)
			skipLeaseCheck = mutant
			defer func() { skipLeaseCheck = false }()
			put(t, s, "a", pattern(30<<10), objectstore.PutOptions{Mode: objectstore.PutCreate})
			v := put(t, s, "m", pattern(10), objectstore.PutOptions{Mode: objectstore.PutCreate})
			readA, err := os.Open(filepath.Join(s.objectsDir, relPath("a")))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = readA.Close() }()
			readM, err := os.Open(filepath.Join(s.objectsDir, relPath("m")))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = readM.Close() }()
			wantA, _ := io.ReadAll(io.NewSectionReader(readA, 0, 1<<20))
			wantM, _ := io.ReadAll(io.NewSectionReader(readM, 0, 1<<20))
			if err := s.Delete(ctx(), "a", nil); err != nil {
				t.Fatal(err)
			}
			put(t, s, "m", pattern(20), objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: v})
			settle(s.hk)
			for i := range 4 {
				put(t, s, fmt.Sprintf("b/%d", i), pattern(1000*(i+1)), objectstore.PutOptions{Mode: objectstore.PutCreate})
			}
			gotA, _ := io.ReadAll(io.NewSectionReader(readA, 0, 1<<20))
			gotM, _ := io.ReadAll(io.NewSectionReader(readM, 0, 1<<20))
			changed := !bytes.Equal(gotA, wantA) || !bytes.Equal(gotM, wantM)
			if changed != mutant {
				t.Fatalf("held readers' bytes changed: %v (deleted object %v, replaced object %v), reuses %d", changed,
					!bytes.Equal(gotA, wantA), !bytes.Equal(gotM, wantM), s.hk.reuses.Load())
			}
		})
	}
}

// TestRecycleConcurrentReaders: readers (Get, GetRange, List) racing
// writers that replace, delete and recreate keys, with the housekeeper
// recycling every retired inode, only ever read complete objects of the key
// they asked for (each object names its key and version in its bytes).
func TestRecycleConcurrentReaders(t *testing.T) {
	s := open(t, t.TempDir())
	skipIfSpaceShort(t, s)
	body := func(key string, n int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("%s#%d;", key, n)), 200+n%50)
	}
	check := func(key string, b []byte) error {
		i := bytes.IndexByte(b, ';')
		if i < 0 || !bytes.HasPrefix(b, []byte(key+"#")) {
			return fmt.Errorf("%s holds %.40q", key, b)
		}
		if rep := b[:i+1]; !bytes.Equal(b, bytes.Repeat(rep, len(b)/len(rep))) {
			return fmt.Errorf("%s holds a mix (%d bytes, first %q)", key, len(b), rep)
		}
		return nil
	}
	const keys, rounds = 6, 150
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	stop := make(chan struct{})
	for w := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k/%d", w)
			for n := range rounds {
				if n%5 == 4 {
					if err := s.Delete(ctx(), key, nil); err != nil {
						errs <- err
						return
					}
					continue
				}
				if _, err := s.Put(ctx(), key, body(key, n), objectstore.PutOptions{Mode: objectstore.PutOverwrite}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for r := range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("k/%d", (i+r)%keys)
				if b, _, err := s.Get(ctx(), key); err == nil {
					if err := check(key, b); err != nil {
						errs <- err
						return
					}
				} else if !isNotFound(err) {
					errs <- fmt.Errorf("Get %s: %w", key, err)
					return
				}
				if b, err := s.GetRange(ctx(), key, 0, 64); err == nil {
					if !bytes.HasPrefix(b, []byte(key+"#")) {
						errs <- fmt.Errorf("GetRange %s: %.40q", key, b)
						return
					}
				} else if !isNotFound(err) {
					errs <- fmt.Errorf("GetRange %s: %w", key, err)
					return
				}
				if i%20 == 0 {
					for _, err := range s.List(ctx(), "k/") {
						if err != nil {
							errs <- fmt.Errorf("List: %w", err)
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s.hk.reuses.Load() == 0 {
		t.Fatal("no Put reused a retired inode: the test exercised nothing")
	}
	t.Logf("%d Puts into recycled inodes, %d temp files created", s.hk.reuses.Load(), s.hk.creates.Load())
}

func isNotFound(err error) bool { return errors.Is(err, objectstore.ErrNotFound) }

// TestRecycleKeepsNoLargeInodes: a deleted object larger than
// maxRecycledSize is freed, not kept (its blocks go back to the file
// system), while a small one is kept.
func TestRecycleKeepsNoLargeInodes(t *testing.T) {
	s := open(t, t.TempDir())
	manualHousekeeper(t, s)
	put(t, s, "big", pattern(maxRecycledSize+1), objectstore.PutOptions{Mode: objectstore.PutCreate})
	put(t, s, "small", pattern(1000), objectstore.PutOptions{Mode: objectstore.PutCreate})
	for _, k := range []string{"big", "small"} {
		if err := s.Delete(ctx(), k, nil); err != nil {
			t.Fatal(err)
		}
	}
	settle(s.hk)
	if len(s.hk.recycled) != 1 || s.hk.recycled[0].size > maxRecycledSize || s.hk.recycledBytes != s.hk.recycled[0].size {
		t.Fatalf("recycled %+v (%d bytes held), want only the small object's inode", s.hk.recycled, s.hk.recycledBytes)
	}
}

// TestRecycleKeepsABurst: the inodes of a burst of deletes far larger than
// the old bound of 32 (GC deleting the WAL segments a generation replaced)
// are all kept, and the Puts after the burst are all written into them:
// none creates a temp file on its path.
func TestRecycleKeepsABurst(t *testing.T) {
	s := open(t, t.TempDir())
	manualHousekeeper(t, s)
	const burst = 300
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur/16 < burst {
		t.Skipf("descriptor limit %d (%v) bounds the pool below %d", lim.Cur, err, burst) // skip-ok: the bound is the limit's, by design (TestRecycleLimitFor)
	}
	for i := range burst {
		put(t, s, fmt.Sprintf("seg/%03d", i), pattern(4096+i), objectstore.PutOptions{Mode: objectstore.PutCreate})
	}
	settle(s.hk)
	for i := range burst {
		if err := s.Delete(ctx(), fmt.Sprintf("seg/%03d", i), nil); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 { // the housekeeper keeps up with the retire queue
			settle(s.hk)
		}
	}
	settle(s.hk)
	if len(s.hk.recycled) != burst {
		t.Fatalf("%d of %d deleted inodes kept for reuse", len(s.hk.recycled), burst)
	}
	s.hk.free = nil // no empty temp files made ahead: every Put must reuse
	misses, reuses := s.hk.misses.Load(), s.hk.reuses.Load()
	for i := range burst {
		put(t, s, fmt.Sprintf("next/%03d", i), pattern(4000), objectstore.PutOptions{Mode: objectstore.PutCreate})
	}
	if m, r := s.hk.misses.Load()-misses, s.hk.reuses.Load()-reuses; m != 0 || r != burst {
		t.Fatalf("after the burst: %d temp files created on the Put path, %d Puts into recycled inodes; want 0 and %d", m, r, burst)
	}
}

// TestRecycleLimitFor: the pool bound follows the descriptor limit (a
// sixteenth of it) between minRecycled and maxRecycled.
func TestRecycleLimitFor(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{0, minRecycled}, {256, minRecycled}, {1024, 64}, {4096, 256}, {20000, maxRecycled}, {1 << 40, maxRecycled}} {
		if got := recycleLimitFor(c.nofile); got != c.want {
			t.Errorf("recycleLimitFor(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
}
