package fsstore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testenv/crashfs"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
)

// Power-loss tests: the store lives on crashfs, where only fsync'd data and
// fsync'd directory entries survive a power cut. A writer process puts
// objects (and advances a CAS chain on one key) and prints every
// acknowledgement; it is SIGKILLed mid-write, the power is cut, and a fresh
// Store must hold every acknowledged object intact at its acknowledged
// version (invariants C1, C2, C4), never reuse a version (W2), and list
// nothing corrupt.

const (
	envPowerWriter = "NEREUS_FSSTORE_POWER_WRITER" // cycle number
	envMutant      = "NEREUS_FSSTORE_MUTANT"
	envKillAt      = "NEREUS_FSSTORE_KILL_AT" // "<step>:<n>": SIGKILL self at the n-th time the step is reached
	envWALWriter   = "NEREUS_FSSTORE_WAL_WRITER"
	envNoRecycle   = "NEREUS_FSSTORE_NO_RECYCLE" // free every retired inode (the "released" step)
)

func powerPayload(key string) []byte {
	// Spans two 16 KiB checksum blocks.
	return bytes.Repeat([]byte(key+";"), (20<<10)/(len(key)+1)+1)
}

// runPowerWriter is the writer process.
func runPowerWriter() int {
	if m := os.Getenv(envMutant); m != "" {
		fsstore.SetSyncMutantForTest(m)
	}
	if os.Getenv(envNoRecycle) != "" {
		fsstore.SetRecycleLimitForTest(0)
	}
	if k := os.Getenv(envKillAt); k != "" {
		step, nStr, _ := strings.Cut(k, ":")
		n, _ := strconv.ParseInt(nStr, 10, 64)
		var seen atomic.Int64
		fsstore.SetCrashHookForTest(func(s string) {
			if s == step && seen.Add(1) == n {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is delivered before this goroutine runs on
			}
		})
	}
	s, err := fsstore.Open(os.Getenv(envDir))
	if err != nil {
		fmt.Printf("ERROR open: %v\n", err)
		return 1
	}
	ctx := context.Background()
	cycle := os.Getenv(envPowerWriter)
	if os.Getenv(envWALWriter) != "" {
		return runWALWriter(ctx, s, cycle)
	}
	headN := 0
	var headVer objectstore.UpdateVersion
	if b, v, err := s.Get(ctx, "head"); err == nil {
		headN, _ = strconv.Atoi(string(b))
		headVer = v
	} else if !errors.Is(err, objectstore.ErrNotFound) {
		fmt.Printf("ERROR head: %v\n", err)
		return 1
	}
	for i := 0; ; i++ {
		if i == writerBound {
			fmt.Println("ERROR the writer was not killed within its bound (crash point never reached?)")
			return 1
		}
		key := fmt.Sprintf("c%s/%06d", cycle, i)
		v, err := s.Put(ctx, key, powerPayload(key), objectstore.PutOptions{Mode: objectstore.PutCreate})
		if err != nil {
			fmt.Printf("ERROR put: %v\n", err)
			return 1
		}
		fmt.Printf("ACK %s %s\n", key, v.ETag)
		if i%4 == 3 {
			// Delete an older acknowledged object: an acknowledged
			// delete must survive the cut too.
			old := fmt.Sprintf("c%s/%06d", cycle, i-2)
			fmt.Printf("DELETING %s\n", old)
			if err := s.Delete(ctx, old, nil); err != nil {
				fmt.Printf("ERROR delete: %v\n", err)
				return 1
			}
			fmt.Printf("DELETED %s\n", old)
		}
		if i%3 == 0 {
			opts := objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: headVer}
			if headVer.IsZero() {
				opts = objectstore.PutOptions{Mode: objectstore.PutCreate}
			}
			v, err := s.Put(ctx, "head", []byte(strconv.Itoa(headN+1)), opts)
			if err != nil {
				fmt.Printf("ERROR head put: %v\n", err)
				return 1
			}
			headN, headVer = headN+1, v
			fmt.Printf("HEAD %d %s\n", headN, v.ETag)
		}
	}
}

// writerBound bounds the writers' loops: they are meant to be killed long
// before (after tens of Puts), and must never spin forever.
const writerBound = 1000

// runWALWriter writes the way the WAL does: segments with DeferSync (not
// acknowledged by themselves: "SEG"), then a manifest CAS naming every
// segment so far ("COMMIT n etag" once it returned). A manifest that
// survives a cut — acknowledged or not — must name only segments that
// survived intact.
func runWALWriter(ctx context.Context, s *fsstore.Store, cycle string) int {
	var names []string
	var ver objectstore.UpdateVersion
	if b, v, err := s.Get(ctx, "manifest"); err == nil {
		names, ver = strings.Fields(string(b))[1:], v
	} else if !errors.Is(err, objectstore.ErrNotFound) {
		fmt.Printf("ERROR manifest: %v\n", err)
		return 1
	}
	for i := 0; ; i++ {
		if i == writerBound {
			fmt.Println("ERROR the writer was not killed within its bound (crash point never reached?)")
			return 1
		}
		for j := range 2 {
			key := fmt.Sprintf("w%s/seg/%06d-%d", cycle, i, j)
			if _, err := s.Put(ctx, key, powerPayload(key), objectstore.PutOptions{Mode: objectstore.PutOverwrite, DeferSync: true}); err != nil {
				fmt.Printf("ERROR segment put: %v\n", err)
				return 1
			}
			fmt.Printf("SEG %s\n", key)
			names = append(names, key)
		}
		opts := objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: ver}
		if ver.IsZero() {
			opts = objectstore.PutOptions{Mode: objectstore.PutCreate}
		}
		body := strconv.Itoa(len(names)) + "\n" + strings.Join(names, "\n")
		v, err := s.Put(ctx, "manifest", []byte(body), opts)
		if err != nil {
			fmt.Printf("ERROR manifest put: %v\n", err)
			return 1
		}
		ver = v
		fmt.Printf("COMMIT %d %s\n", len(names), v.ETag)
	}
}

// acks is what the writers acknowledged.
type acks struct {
	objects  map[string]string // key -> version ETag
	deleting map[string]string // delete under way at the kill: either outcome is allowed
	deleted  map[string]bool   // acknowledged deletes
	headN    int
	headETag string
	commitN  int // WAL writer: segments named by the last acknowledged manifest
	commitET string
	versions map[string]bool // every ETag ever acknowledged
	wal      bool            // run the WAL writer
}

func newAcks() *acks {
	return &acks{objects: map[string]string{}, deleting: map[string]string{}, deleted: map[string]bool{}, versions: map[string]bool{}}
}

// runCycle starts a writer, lets it acknowledge at least n objects, kills
// it mid-write and cuts the power. With killAt ("<step>:<k>") the writer
// kills itself at that crash point instead, and n is not used.
func runCycle(t *testing.T, cfs *crashfs.FS, dir string, cycle, n int, mutant, killAt string, a *acks) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPowerWriter+"="+strconv.Itoa(cycle), envDir+"="+dir, envMutant+"="+mutant, envKillAt+"="+killAt)
	if a.wal {
		cmd.Env = append(cmd.Env, envWALWriter+"=1")
	}
	if strings.HasPrefix(killAt, "released:") {
		// Recycling reuses every retired inode in these writers' steady
		// state; the step where one is freed needs recycling off.
		cmd.Env = append(cmd.Env, envNoRecycle+"=1")
	}
	cmd.SysProcAttr = testenv.ChildProcAttr()
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	record := func(l string) {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "ACK":
			a.objects[f[1]] = f[2]
			a.versions[f[2]] = true
		case len(f) == 2 && f[0] == "DELETING":
			a.deleting[f[1]] = a.objects[f[1]]
			delete(a.objects, f[1])
		case len(f) == 2 && f[0] == "DELETED":
			delete(a.deleting, f[1])
			a.deleted[f[1]] = true
		case len(f) == 2 && f[0] == "SEG":
		case len(f) == 3 && f[0] == "COMMIT":
			a.commitN, _ = strconv.Atoi(f[1])
			a.commitET = f[2]
			a.versions[f[2]] = true
		case len(f) == 3 && f[0] == "HEAD":
			a.headN, _ = strconv.Atoi(f[1])
			a.headETag = f[2]
			a.versions[f[2]] = true
		default:
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("writer: %s", l)
		}
	}
	sc := bufio.NewScanner(stdout)
	if killAt != "" {
		for sc.Scan() {
			record(sc.Text())
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("writer with %s=%s did not die at its crash point: %v", envKillAt, killAt, err)
		}
		cfs.PowerCut(t)
		return
	}
	for got := 0; got < n && sc.Scan(); {
		record(sc.Text())
		if strings.HasPrefix(sc.Text(), "ACK ") || strings.HasPrefix(sc.Text(), "COMMIT ") {
			got++
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL mid-Put, by pid
		t.Fatal(err)
	}
	for sc.Scan() { // acknowledgements printed before the kill landed
		record(sc.Text())
	}
	_ = cmd.Wait()
	cfs.PowerCut(t)
}

// verify opens the store after a cut and returns every violation found.
func verify(dir string, a *acks, probe string) (problems []string) {
	s, err := fsstore.Open(dir)
	if err != nil {
		return []string{fmt.Sprintf("open after the power cut: %v", err)}
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	for key, etag := range a.objects {
		data, v, err := s.Get(ctx, key)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("acknowledged %s: %v", key, err))
		case !bytes.Equal(data, powerPayload(key)):
			problems = append(problems, fmt.Sprintf("acknowledged %s reads back %d wrong bytes", key, len(data)))
		case v.ETag != etag:
			problems = append(problems, fmt.Sprintf("acknowledged %s has version %s, was acknowledged as %s", key, v.ETag, etag))
		}
	}
	for key, etag := range a.deleting {
		data, v, err := s.Get(ctx, key)
		switch {
		case errors.Is(err, objectstore.ErrNotFound):
		case err != nil:
			problems = append(problems, fmt.Sprintf("half-deleted %s: %v", key, err))
		case !bytes.Equal(data, powerPayload(key)) || v.ETag != etag:
			problems = append(problems, fmt.Sprintf("half-deleted %s reads back %d wrong bytes or version %s (acknowledged %s)", key, len(data), v.ETag, etag))
		}
	}
	for key := range a.deleted {
		if _, _, err := s.Get(ctx, key); !errors.Is(err, objectstore.ErrNotFound) {
			problems = append(problems, fmt.Sprintf("acknowledged delete of %s undone: Get says %v", key, err))
		}
	}
	if a.wal {
		problems = append(problems, verifyManifest(ctx, s, a)...)
	}
	if a.headN > 0 {
		b, v, err := s.Get(ctx, "head")
		n, _ := strconv.Atoi(string(b))
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("CAS head (acknowledged %d): %v", a.headN, err))
		case n < a.headN:
			problems = append(problems, fmt.Sprintf("CAS head went back from acknowledged %d to %d", a.headN, n))
		case n == a.headN && v.ETag != a.headETag:
			problems = append(problems, fmt.Sprintf("CAS head %d has version %s, was acknowledged as %s", n, v.ETag, a.headETag))
		}
	}
	for info, err := range s.List(ctx, "") {
		if err != nil {
			problems = append(problems, fmt.Sprintf("List: %v", err))
			break
		}
		if _, _, err := s.Get(ctx, info.Key); err != nil {
			problems = append(problems, fmt.Sprintf("listed %s does not read: %v", info.Key, err))
		}
	}
	v, err := s.Put(ctx, probe, []byte("probe"), objectstore.PutOptions{Mode: objectstore.PutCreate})
	if err != nil {
		problems = append(problems, fmt.Sprintf("put after the power cut: %v", err))
	} else if a.versions[v.ETag] {
		problems = append(problems, fmt.Sprintf("version %s issued again after the power cut", v.ETag))
	}
	return problems
}

// verifyManifest: the surviving manifest is at least the acknowledged one
// and every segment it names reads back intact.
func verifyManifest(ctx context.Context, s *fsstore.Store, a *acks) (problems []string) {
	b, v, err := s.Get(ctx, "manifest")
	if errors.Is(err, objectstore.ErrNotFound) && a.commitN == 0 {
		return nil
	}
	if err != nil {
		return []string{fmt.Sprintf("manifest (acknowledged naming %d segments): %v", a.commitN, err)}
	}
	f := strings.Fields(string(b))
	n, _ := strconv.Atoi(f[0])
	switch {
	case n < a.commitN:
		problems = append(problems, fmt.Sprintf("manifest went back from acknowledged %d segments to %d", a.commitN, n))
	case n == a.commitN && v.ETag != a.commitET:
		problems = append(problems, fmt.Sprintf("manifest naming %d segments has version %s, was acknowledged as %s", n, v.ETag, a.commitET))
	}
	for _, key := range f[1:] {
		data, _, err := s.Get(ctx, key)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("manifest (version %s, %d segments) names %s: %v", v.ETag, n, key, err))
		case !bytes.Equal(data, powerPayload(key)):
			problems = append(problems, fmt.Sprintf("manifest names %s, which reads back %d wrong bytes", key, len(data)))
		}
	}
	return problems
}

// TestPowerCutLosesNothingAcknowledged: three kill + power-cut cycles on
// one store.
func TestPowerCutLosesNothingAcknowledged(t *testing.T) {
	cfs := crashfs.Mount(t)
	dir := filepath.Join(cfs.Dir(), "store")
	a := newAcks()
	for cycle := range 3 {
		runCycle(t, cfs, dir, cycle, 25, "", "", a)
		if problems := verify(dir, a, fmt.Sprintf("probe/%d", cycle)); len(problems) > 0 {
			t.Fatalf("cycle %d: %d violations after the power cut (%v):\n  %s", cycle, len(problems), cfs.Stats(), strings.Join(problems, "\n  "))
		}
		t.Logf("cycle %d: %d acknowledged objects and CAS head %d intact after SIGKILL + power cut (%v)", cycle, len(a.objects), a.headN, cfs.Stats())
	}
	if s := cfs.Stats(); s.LostBytes == 0 && s.LostEntries == 0 {
		t.Fatalf("the power cuts dropped nothing (%v): the test did not cut anything in flight", s)
	}
}

// TestPowerCutCatchesSkippedFsync is the mutation check of the test above:
// with one fsync of the publication protocol skipped, a power cut must lose
// an acknowledged object — and the check must say so.
func TestPowerCutCatchesSkippedFsync(t *testing.T) {
	for _, mutant := range []string{"temp-sync", "publish-dir-sync"} {
		t.Run(mutant, func(t *testing.T) {
			cfs := crashfs.Mount(t)
			dir := filepath.Join(cfs.Dir(), "store")
			a := newAcks()
			runCycle(t, cfs, dir, 0, 10, mutant, "", a)
			problems := verify(dir, a, "probe")
			if len(problems) == 0 {
				t.Fatalf("skipping %s lost nothing the check could see (%v)", mutant, cfs.Stats())
			}
			t.Logf("caught: %d violations, e.g. %s", len(problems), problems[0])
		})
	}
}

// TestPowerCutAtEachStep kills the writer exactly at each step of the
// publication protocol (fsstore's crash points: temp file created — in the
// background pool or on the spot —, written, synced, replaced inode linked
// into the temp directory ("retired"), renamed, published, unlinked (moved
// into the temp directory), retired inode adopted for reuse ("recycled"),
// retired inode freed ("released", run with recycling off)), cuts the
// power, and checks the same
// invariants as above: every acknowledged Put and Delete survives intact,
// nothing listed fails its checksums, no version repeats. Each step is hit
// at its 3rd and its 11th occurrence (once early, while the temp pool is
// still filling, once in the steady state), two cycles on one store.
func TestPowerCutAtEachStep(t *testing.T) {
	cfs := crashfs.Mount(t)
	for _, step := range fsstore.CrashSteps {
		t.Run(step, func(t *testing.T) {
			dir := filepath.Join(cfs.Dir(), step)
			a := newAcks()
			for cycle, k := range []int{3, 11} {
				runCycle(t, cfs, dir, cycle, 0, "", fmt.Sprintf("%s:%d", step, k), a)
				if problems := verify(dir, a, fmt.Sprintf("probe/%d", cycle)); len(problems) > 0 {
					t.Fatalf("killed at %s #%d: %d violations after the power cut (%v):\n  %s", step, k, len(problems), cfs.Stats(), strings.Join(problems, "\n  "))
				}
			}
			if len(a.objects) == 0 {
				t.Fatalf("no object was acknowledged before the kills at %s: the step is reached too early to test anything", step)
			}
			t.Logf("killed at %s: %d acknowledged objects, %d deletes, CAS head %d intact (%v)", step, len(a.objects), len(a.deleted), a.headN, cfs.Stats())
		})
	}
}

// TestPowerCutAtEachStepCatchesSkippedFsync is the mutation check of the
// crash-point test: with the temp file's fdatasync or the publishing
// directory fsync skipped, a kill at the step right after it must show a
// lost acknowledged object.
func TestPowerCutAtEachStepCatchesSkippedFsync(t *testing.T) {
	cfs := crashfs.Mount(t)
	for _, c := range []struct{ mutant, killAt string }{
		{"temp-sync", "renamed:11"},
		{"publish-dir-sync", "temp-written:11"},
	} {
		t.Run(c.mutant, func(t *testing.T) {
			dir := filepath.Join(cfs.Dir(), c.mutant)
			a := newAcks()
			runCycle(t, cfs, dir, 0, 0, c.mutant, c.killAt, a)
			problems := verify(dir, a, "probe")
			if len(problems) == 0 {
				t.Fatalf("skipping %s, killed at %s, lost nothing the check could see (%v)", c.mutant, c.killAt, cfs.Stats())
			}
			t.Logf("caught: %d violations, e.g. %s", len(problems), problems[0])
		})
	}
}

// TestPowerCutDeferredSegments: the WAL's pattern — DeferSync segment Puts,
// each batch published by a manifest CAS — killed at every step of the
// protocol (and at random points), then a power cut: the manifest that
// survives, acknowledged or not, never names a segment that did not
// survive intact, and no acknowledged manifest is lost.
func TestPowerCutDeferredSegments(t *testing.T) {
	cfs := crashfs.Mount(t)
	for _, step := range append([]string{""}, fsstore.CrashSteps...) {
		if step == "unlinked" {
			continue // the WAL writer deletes nothing
		}
		name := step
		if name == "" {
			name = "random"
		}
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(cfs.Dir(), "wal-"+name)
			a := newAcks()
			a.wal = true
			for cycle, k := range []int{3, 11} {
				killAt := ""
				if step != "" {
					killAt = fmt.Sprintf("%s:%d", step, k)
				}
				runCycle(t, cfs, dir, cycle, k, "", killAt, a)
				if problems := verify(dir, a, fmt.Sprintf("probe/%d", cycle)); len(problems) > 0 {
					t.Fatalf("killed at %s #%d: %d violations after the power cut (%v):\n  %s", name, k, len(problems), cfs.Stats(), strings.Join(problems, "\n  "))
				}
			}
			t.Logf("killed at %s: acknowledged manifest naming %d segments intact (%v)", name, a.commitN, cfs.Stats())
		})
	}
	// Mutation check: the plain Put that skips the pending directory
	// fsyncs publishes a manifest naming segments the cut then loses.
	t.Run("mutant-deferred-sync", func(t *testing.T) {
		dir := filepath.Join(cfs.Dir(), "wal-mutant")
		a := newAcks()
		a.wal = true
		runCycle(t, cfs, dir, 0, 0, "deferred-sync", "temp-written:20", a)
		problems := verify(dir, a, "probe")
		if len(problems) == 0 {
			t.Fatalf("skipping the deferred directory syncs lost nothing the check could see (%v)", cfs.Stats())
		}
		t.Logf("caught: %d violations, e.g. %s", len(problems), problems[0])
	})
}
