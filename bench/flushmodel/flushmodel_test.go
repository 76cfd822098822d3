// Package flushmodel measures, on the machine's own disk, what one
// acknowledged Object WAL commit costs — device flushes and file-system
// operations — under different designs: the file operations each design
// does per commit, nothing else (no Nereus code runs). It is the evidence for choosing how the default
// profile's acknowledgement path should lose flushes (issue 15,
// docs/notes/issue-15-ops.md, sessions 13 and 20). It measures; it is run
// by flag and never asserts a time.
//
//	go test ./bench/flushmodel -run TestFlushModel -v -flushmodel.run [-flushmodel.commits 200 -flushmodel.rounds 6]
//
// Designs, alternated round by round in one process, each in its own
// directory (so their files and directories do not share flushes):
//
//   - current: what fsstore and the Object WAL do today — segment temp file
//     written and fdatasynced, renamed; the segment directory fsynced while
//     the manifest temp file is written and fdatasynced (DeferSync); the
//     manifest renamed over the old one, its directory fsynced; the stream
//     head appended to the metadata log and fdatasynced (5 flushes).
//   - journal: segment and manifest appended to one journal file and
//     fdatasynced once; both object files written and renamed without any
//     sync (a checkpoint — syncfs every 64 commits, in the background —
//     makes them durable before the journal space is reused); the head as
//     above (2 flushes on the path).
//   - log: segment and manifest appended to the journal and fdatasynced
//     once, no object files at all (the WAL's bytes stay in a local log
//     until materialization, as a bookie's do); the head as above (2
//     flushes, no file-system operation on the path).
//   - floor: the head's fdatasync alone (1 flush: what Apache Pulsar's
//     bookie journal pays per acknowledged add).
//
// Inodes are recycled as fsstore recycles them (segments beyond the newest
// 64 are moved back into the temp directory, as GC's deletes are, and a
// replaced manifest's inode is kept), and the sizes are those of
// the Pulsar 10,000 msg/s benchmark: ~25 KiB segments, ~4 KiB manifests,
// ~300 B heads.
package flushmodel

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var (
	run     = flag.Bool("flushmodel.run", false, "run the flush-chain model (a measurement, skipped otherwise)")
	commits = flag.Int("flushmodel.commits", 200, "commits per design per round")
	rounds  = flag.Int("flushmodel.rounds", 6, "rounds (designs alternate within each)")
)

const (
	segSize, manSize, headSize = 25 << 10, 4 << 10, 300
	headRing, journalRing      = 1 << 20, 16 << 20 // log space the appends cycle through
)

type env struct {
	t                  *testing.T
	segDir, manDir, tm string
	head, journal      *os.File
	journalOff         int64
	n                  int
	free               []string      // temp names holding recycled inodes
	names              int           // temp names handed out
	checkpoints        chan struct{} // one background checkpoint at a time
}

func newEnv(t *testing.T, dir string) *env {
	e := &env{t: t, segDir: filepath.Join(dir, "seg"), manDir: filepath.Join(dir, "wal"), tm: filepath.Join(dir, "tmp"),
		checkpoints: make(chan struct{}, 1)}
	for _, d := range []string{e.segDir, e.manDir, e.tm} {
		e.check(os.MkdirAll(d, 0o755))
	}
	e.head = e.preallocated(filepath.Join(dir, "meta.log"), headRing)
	e.journal = e.preallocated(filepath.Join(dir, "journal"), journalRing)
	return e
}

func (e *env) check(err error) {
	if err != nil {
		e.t.Fatal(err)
	}
}

// preallocated makes a log file of size bytes, all written once, so that
// the model's appends overwrite allocated blocks (as a log that reuses its
// space does) instead of allocating on every flush.
func (e *env) preallocated(path string, size int64) *os.File {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	e.check(err)
	_, err = f.WriteAt(make([]byte, size), 0)
	e.check(err)
	e.check(f.Sync())
	return f
}

// write overwrites path (a reused inode after the first round) with n bytes.
func (e *env) write(path string, n int, sync bool) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	e.check(err)
	defer f.Close()
	_, err = f.WriteAt(make([]byte, n), 0)
	e.check(err)
	e.check(f.Truncate(int64(n)))
	if sync {
		e.check(unix.Fdatasync(int(f.Fd())))
	}
}

func (e *env) syncDir(dir string) {
	f, err := os.Open(dir)
	e.check(err)
	defer f.Close()
	e.check(f.Sync())
}

func (e *env) headCommit() {
	_, err := e.head.WriteAt(make([]byte, headSize), int64(e.n%(headRing/4096))*4096)
	e.check(err)
	e.check(unix.Fdatasync(int(e.head.Fd())))
}

// tempFile returns a temp name to write an object into: a recycled inode
// when there is one (as fsstore reuses the inodes GC and replaced
// manifests free), else a new file.
func (e *env) tempFile() string {
	if n := len(e.free); n > 0 {
		p := e.free[n-1]
		e.free = e.free[:n-1]
		return p
	}
	e.names++
	return filepath.Join(e.tm, fmt.Sprintf("t%d", e.names))
}

// retire moves path's inode into the temp directory for reuse.
func (e *env) retire(path string, link bool) {
	e.names++
	p := filepath.Join(e.tm, fmt.Sprintf("t%d", e.names))
	if link {
		e.check(os.Link(path, p))
	} else {
		e.check(os.Rename(path, p))
	}
	e.free = append(e.free, p)
}

func (e *env) publishSegment(sync bool) {
	tmp := e.tempFile()
	e.write(tmp, segSize, sync)
	e.check(os.Rename(tmp, filepath.Join(e.segDir, fmt.Sprintf("%016x", e.n))))
	if e.n%64 == 0 { // GC: keep the newest 64 segments, recycle the rest
		ents, err := os.ReadDir(e.segDir)
		e.check(err)
		for _, d := range ents[:max(0, len(ents)-64)] {
			e.retire(filepath.Join(e.segDir, d.Name()), false)
		}
		e.syncDir(e.segDir) // GC's deletes are durable before their inodes are reused
	}
}

// publishManifest replaces the manifest, keeping the old inode for reuse.
func (e *env) publishManifest(tmp string) {
	final := filepath.Join(e.manDir, "manifest")
	if _, err := os.Stat(final); err == nil {
		e.retire(final, true)
	}
	e.check(os.Rename(tmp, final))
}

// appendJournal appends one segment and one manifest to the journal ring
// and fdatasyncs it.
func (e *env) appendJournal() {
	_, err := e.journal.WriteAt(make([]byte, segSize+manSize), e.journalOff)
	e.check(err)
	if e.journalOff = (e.journalOff + segSize + manSize + 4095) &^ 4095; e.journalOff+segSize+manSize > journalRing {
		e.journalOff = 0
	}
	e.check(unix.Fdatasync(int(e.journal.Fd())))
}

func (e *env) current() {
	e.n++
	e.publishSegment(true)
	dirSynced := make(chan struct{})
	go func() { defer close(dirSynced); e.syncDir(e.segDir) }()
	tmp := e.tempFile()
	e.write(tmp, manSize, true)
	<-dirSynced
	e.publishManifest(tmp)
	e.syncDir(e.manDir)
	e.headCommit()
}

func (e *env) journaled() {
	e.n++
	e.appendJournal()
	e.publishSegment(false)
	tmp := e.tempFile()
	e.write(tmp, manSize, false)
	e.publishManifest(tmp)
	e.headCommit()
	if e.n%64 == 0 {
		select {
		case e.checkpoints <- struct{}{}:
			go func() {
				defer func() { <-e.checkpoints }()
				_ = unix.Syncfs(int(e.journal.Fd()))
			}()
		default: // the previous checkpoint still runs
		}
	}
}

// logOnly appends segment and manifest to the journal and fdatasyncs it
// once, with no object files at all (a local log that the WAL's bytes live
// in until materialization, as a bookie's entry log holds them); then the
// head (2 flushes, no file-system operations on the path).
func (e *env) logOnly() {
	e.n++
	e.appendJournal()
	e.headCommit()
}

func (e *env) floor() {
	e.n++
	e.headCommit()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestFlushModel(t *testing.T) {
	if !*run {
		t.Skip("a measurement: run with -flushmodel.run") // skip-ok: opt-in benchmark, not a test
	}
	dir := t.TempDir()
	designs := []struct {
		name    string
		flushes int
		commit  func(*env)
	}{{"current", 5, (*env).current}, {"journal", 2, (*env).journaled}, {"log", 2, (*env).logOnly}, {"floor", 1, (*env).floor}}
	envs := make([]*env, len(designs))
	lat := make([][]time.Duration, len(designs))
	cpu := make([]time.Duration, len(designs))
	for i, d := range designs {
		envs[i] = newEnv(t, filepath.Join(dir, d.name))
	}
	for r := 0; r < *rounds; r++ {
		for i, d := range designs {
			c0 := cpuTime()
			for k := 0; k < *commits; k++ {
				t0 := time.Now()
				d.commit(envs[i])
				lat[i] = append(lat[i], time.Since(t0))
			}
			cpu[i] += cpuTime() - c0
		}
	}
	for i, d := range designs {
		l := lat[i]
		slices.Sort(l)
		q := func(p float64) float64 { return float64(l[int(p*float64(len(l)-1))].Microseconds()) / 1000 }
		t.Logf("RESULT %-8s (%d flushes) p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  CPU %.0f µs/commit  (%d commits)",
			d.name, d.flushes, q(0.5), q(0.9), q(0.99), float64(cpu[i].Microseconds())/float64(len(l)), len(l))
	}
}
