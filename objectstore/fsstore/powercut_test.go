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
	s, err := fsstore.Open(os.Getenv(envDir))
	if err != nil {
		fmt.Printf("ERROR open: %v\n", err)
		return 1
	}
	ctx := context.Background()
	headN := 0
	var headVer objectstore.UpdateVersion
	if b, v, err := s.Get(ctx, "head"); err == nil {
		headN, _ = strconv.Atoi(string(b))
		headVer = v
	} else if !errors.Is(err, objectstore.ErrNotFound) {
		fmt.Printf("ERROR head: %v\n", err)
		return 1
	}
	cycle := os.Getenv(envPowerWriter)
	for i := 0; ; i++ {
		key := fmt.Sprintf("c%s/%06d", cycle, i)
		v, err := s.Put(ctx, key, powerPayload(key), objectstore.PutOptions{Mode: objectstore.PutCreate})
		if err != nil {
			fmt.Printf("ERROR put: %v\n", err)
			return 1
		}
		fmt.Printf("ACK %s %s\n", key, v.ETag)
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

// acks is what the writers acknowledged.
type acks struct {
	objects  map[string]string // key -> version ETag
	headN    int
	headETag string
	versions map[string]bool // every ETag ever acknowledged
}

// runCycle starts a writer, lets it acknowledge at least n objects, kills
// it mid-write and cuts the power.
func runCycle(t *testing.T, cfs *crashfs.FS, dir string, cycle, n int, mutant string, a *acks) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envPowerWriter+"="+strconv.Itoa(cycle), envDir+"="+dir, envMutant+"="+mutant)
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
	for got := 0; got < n && sc.Scan(); {
		record(sc.Text())
		if strings.HasPrefix(sc.Text(), "ACK ") {
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

// TestPowerCutLosesNothingAcknowledged: three kill + power-cut cycles on
// one store.
func TestPowerCutLosesNothingAcknowledged(t *testing.T) {
	cfs := crashfs.Mount(t)
	dir := filepath.Join(cfs.Dir(), "store")
	a := &acks{objects: map[string]string{}, versions: map[string]bool{}}
	for cycle := range 3 {
		runCycle(t, cfs, dir, cycle, 25, "", a)
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
			a := &acks{objects: map[string]string{}, versions: map[string]bool{}}
			runCycle(t, cfs, dir, 0, 10, mutant, a)
			problems := verify(dir, a, "probe")
			if len(problems) == 0 {
				t.Fatalf("skipping %s lost nothing the check could see (%v)", mutant, cfs.Stats())
			}
			t.Logf("caught: %d violations, e.g. %s", len(problems), problems[0])
		})
	}
}
