package logstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

var testOpts = Options{PreallocBytes: 16 << 10}

func mustOpen(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustPut(t *testing.T, s *Store, key, value string) metadata.Version {
	t.Helper()
	v, err := s.Put(context.Background(), key, []byte(value), metadata.AnyVersion)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// newestLog is the path of the highest-generation log in dir.
func newestLog(t *testing.T, dir string) string {
	t.Helper()
	_, logs, err := listDir(dir)
	if err != nil || len(logs) == 0 {
		t.Fatalf("logs %v, %v", logs, err)
	}
	return filepath.Join(dir, logName(logs[len(logs)-1]))
}

// logEnd is the offset after the last intact frame of a log.
func logEnd(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := fileHeaderSize
	for {
		_, _, size, ok := decodeFrame(data[off:])
		if !ok {
			return off
		}
		off += size
	}
}

func writeAt(t *testing.T, path string, off int, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, int64(off)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTornTailIsCut: a commit cut short mid-append (never acknowledged) is
// dropped at the next open, and the log it was in is cut there, so it does
// not read as corruption once newer logs exist.
func TestTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, testOpts)
	v := mustPut(t, s, "a", "1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := newestLog(t, dir)
	end := logEnd(t, path)
	torn := append(make([]byte, frameHeaderSize), appendRecord(nil, recPut, v+1, "b", []byte("never acknowledged"))...)
	putFrameHeader(torn, 2, torn[frameHeaderSize:])
	writeAt(t, path, end, torn[:len(torn)-5]) // the last bytes never reached the disk
	for round := range 2 {
		s = mustOpen(t, dir, testOpts)
		if r, err := s.Get(context.Background(), "a"); err != nil || r.Version != v {
			t.Fatalf("round %d: a = %+v, %v", round, r, err)
		}
		if _, err := s.Get(context.Background(), "b"); !errors.Is(err, metadata.ErrKeyNotFound) {
			t.Fatalf("round %d: the torn commit was replayed: %v", round, err)
		}
		if nv := mustPut(t, s, "c", "x"); nv <= v {
			t.Fatalf("version %d after %d", nv, v)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != int64(end) {
		t.Fatalf("torn log not cut at %d: %v %v", end, fi.Size(), err)
	}
}

// TestDamageBeforeTheTailIsCorrupt: a checksum failure followed by intact
// frames, or anywhere in a log that is not the newest, fails Open with
// ErrCorrupt instead of serving what is left.
func TestDamageBeforeTheTailIsCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		older bool // damage a log that is not the newest
	}{{"newest log, intact frames after", false}, {"older log", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, dir, testOpts)
			mustPut(t, s, "a", "first")
			path := newestLog(t, dir)
			end := logEnd(t, path)
			for i := range 3 {
				mustPut(t, s, fmt.Sprint("k", i), "later")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.older {
				s = mustOpen(t, dir, testOpts) // a newer log now exists
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			off := end - 3 // inside the value "first"
			if tc.older {
				off = logEnd(t, path) - 3 // the older log's last frame
			}
			writeAt(t, path, off, []byte{data[off] ^ 0x40})
			if s, err := Open(dir, testOpts); !errors.Is(err, ErrCorrupt) {
				if err == nil {
					_ = s.Close()
				}
				t.Fatalf("open after damage: %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestCompactionKeepsEverything: with a small log budget the store
// snapshots and deletes old logs while writing; every write is still there
// after a reopen, versions only grow, and no log outlives its snapshot.
func TestCompactionKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	opts := Options{PreallocBytes: 16 << 10, CompactMinBytes: 32 << 10}
	s := mustOpen(t, dir, opts)
	ctx := context.Background()
	want := map[string]metadata.Version{}
	value := make([]byte, 200)
	var last metadata.Version
	for i := 0; i < 3000 && s.Stats().Compactions < 3; i++ {
		key := fmt.Sprintf("k%03d", i%50)
		v, err := s.Put(ctx, key, value, metadata.AnyVersion)
		if err != nil {
			t.Fatal(err)
		}
		want[key], last = v, v
		if i%7 == 0 {
			if err := s.Delete(ctx, key, v); err != nil {
				t.Fatal(err)
			}
			delete(want, key)
		}
	}
	// Let a compaction that is waiting for a switch or writing finish.
	for i := 0; i < 200 && s.compacting.Load(); i++ {
		mustPut(t, s, "tick", "x")
		want["tick"] = 0
		time.Sleep(5 * time.Millisecond)
	}
	st := s.Stats()
	if st.Compactions < 1 || s.CompactErr() != nil {
		t.Fatalf("stats %+v, compaction error %v", st, s.CompactErr())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, logs, err := listDir(dir)
	if err != nil || len(snaps) != 1 || logs[0] != snaps[0] {
		t.Fatalf("after compaction: snapshots %v, logs %v (%v)", snaps, logs, err)
	}
	s = mustOpen(t, dir, opts)
	defer s.Close()
	recs, err := s.RangeScan(ctx, "", "\xff", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records after reopen, want %d", len(recs), len(want))
	}
	for _, r := range recs {
		if v, ok := want[r.Key]; !ok || v != 0 && v != r.Version {
			t.Fatalf("%s at %d, want %d (%v)", r.Key, r.Version, v, ok)
		}
		last = max(last, r.Version)
	}
	if v := mustPut(t, s, "new", "x"); v <= last {
		t.Fatalf("version %d issued again (last %d)", v, last)
	}
}

// TestRestartNeverRepeatsVersionsOrSessions: ephemerals are not logged,
// yet after a restart none survives, no session ID and no version is
// issued again (also across a compaction).
func TestRestartNeverRepeatsVersionsOrSessions(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var lastSession metadata.SessionID
	var lastVersion metadata.Version
	for round := range 3 {
		opts := testOpts
		if round == 1 {
			opts.CompactMinBytes, opts.CompactRatio = 1, 1 // compact after every commit
		}
		s := mustOpen(t, dir, opts)
		if _, err := s.Get(ctx, "eph"); !errors.Is(err, metadata.ErrKeyNotFound) {
			t.Fatalf("round %d: ephemeral survived: %v", round, err)
		}
		if round > 0 {
			if r, err := s.Get(ctx, "persist"); err != nil || r.Version > lastVersion {
				t.Fatalf("round %d: persist %+v %v", round, r, err)
			}
		}
		mustPut(t, s, "persist", "p")
		sess, err := s.NewSession(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if sess.ID() <= lastSession {
			t.Fatalf("round %d: session %d after %d", round, sess.ID(), lastSession)
		}
		lastSession = sess.ID()
		// The ephemeral takes the highest version: only its tombstone
		// record carries it to the next open.
		v, err := s.PutEphemeral(ctx, "eph", []byte("e"), metadata.NotExists, sess.ID())
		if err != nil || v <= lastVersion {
			t.Fatalf("round %d: ephemeral version %d after %d (%v)", round, v, lastVersion, err)
		}
		lastVersion = v
		if round == 1 {
			// Snapshot the state with the ephemeral live: a snapshot
			// carries the counters, never the ephemeral.
			for i := 0; i < 500 && s.Stats().Compactions == 0; i++ {
				mustPut(t, s, "persist", "p")
			}
			if s.Stats().Compactions == 0 || s.CompactErr() != nil {
				t.Fatalf("no compaction: %+v %v", s.Stats(), s.CompactErr())
			}
			r, err := s.Get(ctx, "persist")
			if err != nil {
				t.Fatal(err)
			}
			lastVersion = max(lastVersion, r.Version)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRoundWithoutChangesDoesNotFlush: a write Batch whose preconditions all
// fail, and a purge of ephemerals (absent on disk already), append nothing.
func TestRoundWithoutChangesDoesNotFlush(t *testing.T) {
	s := mustOpen(t, t.TempDir(), testOpts)
	defer s.Close()
	ctx := context.Background()
	v := mustPut(t, s, "a", "1")
	sess, err := s.NewSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutEphemeral(ctx, "e", nil, metadata.NotExists, sess.ID()); err != nil {
		t.Fatal(err)
	}
	before := s.Stats().Flushes
	if _, err := s.Put(ctx, "a", []byte("2"), v+100); !errors.Is(err, metadata.ErrUnexpectedVersion) {
		t.Fatal(err)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "e"); !errors.Is(err, metadata.ErrKeyNotFound) {
		t.Fatal(err)
	}
	if after := s.Stats().Flushes; after != before {
		t.Fatalf("%d flushes for rounds that changed nothing on disk", after-before)
	}
}

// TestHugeCommitIsSeveralFrames: a commit larger than one frame may be is
// written as several frames, still one write and one flush, and replays.
func TestHugeCommitIsSeveralFrames(t *testing.T) {
	defer func(old int) { frameSplit = old }(frameSplit)
	frameSplit = 4 << 10
	dir := t.TempDir()
	s := mustOpen(t, dir, testOpts)
	ops := make([]metadata.Op, 50)
	for i := range ops {
		ops[i] = metadata.Op{Kind: metadata.OpPut, Key: fmt.Sprintf("big/%02d", i), Value: make([]byte, 1000+i), Expected: metadata.NotExists}
	}
	before := s.Stats().Flushes
	res, err := s.Batch(context.Background(), ops)
	if err != nil {
		t.Fatal(err)
	}
	if s.Stats().Flushes != before+1 || s.log.seq < 10 {
		t.Fatalf("%d flushes, log at frame %d: want one flush of >= 10 frames", s.Stats().Flushes-before, s.log.seq)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, testOpts)
	defer s.Close()
	for i, op := range ops {
		r, err := s.Get(context.Background(), op.Key)
		if err != nil || r.Version != res[i].Version || len(r.Value) != 1000+i {
			t.Fatalf("%s: %+v %v", op.Key, r.Version, err)
		}
	}
}

// TestLogTornWhileCreatedIsMadeAgain: a newest log whose header never fully
// reached the disk (only zeros after it) held no frame; Open makes it again
// instead of failing.
func TestLogTornWhileCreatedIsMadeAgain(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir, testOpts)
	v := mustPut(t, s, "a", "1")
	gen := s.log.gen
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, header := range [][]byte{make([]byte, fileHeaderSize), []byte("NRSMLOG1\x00\x00garbage-torn!")} {
		path := filepath.Join(dir, logName(gen+1))
		if err := os.WriteFile(path, append(header, make([]byte, 4096)...), 0o600); err != nil {
			t.Fatal(err)
		}
		s = mustOpen(t, dir, testOpts)
		if r, err := s.Get(context.Background(), "a"); err != nil || r.Version != v {
			t.Fatalf("a = %+v, %v", r, err)
		}
		gen = s.log.gen
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
