package metadatatest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testenv/crashfs"
	"github.com/nereusstream/nereus-go/metadata"
)

// Crash is the kill -9 and power-cut harness of a durable store
// (boltstore, logstore): a child process (the test binary again, running
// the store package's TestCrashHelper) writes under load and prints every
// acknowledged write until it is SIGKILLed, optionally followed by a power
// cut on crashfs; the parent reopens the store and checks every
// acknowledged write, the version counter and the ephemerals. The store
// package's tests are one-liners over it:
//
//	func TestCrashHelper(t *testing.T)               { crash.Helper(t) }
//	func TestKillNineRecovery(t *testing.T)          { crash.KillNine(t) }
//	func TestPowerCutRecovery(t *testing.T)          { crash.PowerCut(t) }
//	func TestPowerCutCatchesSkippedSync(t *testing.T) { crash.CatchesSkippedSync(t) }
type Crash struct {
	// Env is the environment variable that makes the test binary the
	// writing child (its value: the store's path). Unique per store.
	Env string
	// Name is the store's file or directory name in the test's directory.
	Name string
	// Open opens the store at path; noSync opens the power-cut mutant
	// (the commit's sync skipped).
	Open func(path string, noSync bool) (metadata.Store, error)
	// Sync names the sync the mutant skips, for messages ("bbolt's fsync").
	Sync string
	// Describe, when set, adds to each kill -9 round's log line (e.g. the
	// store's files, to show that rounds rolled and compacted).
	Describe func(t testing.TB, path string) string
}

// Helper is the body of the store package's TestCrashHelper, the child
// process of the crash tests: it writes under load and prints every
// acknowledged write until it is killed.
func (c Crash) Helper(t *testing.T) {
	path := os.Getenv(c.Env)
	if path == "" {
		t.Skip("helper process of the crash tests") // skip-ok: runs only as a child of the crash tests
	}
	round := os.Getenv(c.Env + "_ROUND")
	// the power-cut mutant when _NOSYNC is set
	s, err := c.Open(path, os.Getenv(c.Env+"_NOSYNC") == "1")
	// The child's lines on stdout are its protocol with the parent test.
	proto := os.Stdout
	if err != nil {
		fmt.Fprintf(proto, "error %v\n", err)
		os.Exit(2)
	}
	ctx := context.Background()
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Fprintf(proto, format+"\n", args...)
		out.Unlock()
	}
	sess, err := s.NewSession(ctx, time.Minute)
	if err != nil {
		say("error %v", err)
		os.Exit(2)
	}
	for i := range 10 {
		v, err := s.PutEphemeral(ctx, fmt.Sprintf("eph/%s/%d", round, i), []byte("e"), metadata.NotExists, sess.ID())
		if err != nil {
			say("error %v", err)
			os.Exit(2)
		}
		say("eph eph/%s/%d %d", round, i, v)
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("data/%s/%02d/%08d", round, w, i)
				v, err := s.Put(ctx, key, []byte(key), metadata.NotExists)
				if err != nil {
					say("error %v", err)
					os.Exit(2)
				}
				say("ack %s %d", key, v)
			}
		}()
	}
	wg.Add(1)
	go func() { // a CAS chain on one head key
		defer wg.Done()
		r, err := s.Get(ctx, "head")
		expected := r.Version
		if errors.Is(err, metadata.ErrKeyNotFound) {
			expected = metadata.NotExists
		}
		for {
			v, err := s.Put(ctx, "head", []byte(strconv.Itoa(int(expected))), expected)
			if err != nil {
				say("error %v", err)
				os.Exit(2)
			}
			say("head %d", v)
			expected = v
		}
	}()
	wg.Wait()
}

// crashLedger is what the helpers acknowledged across rounds.
type crashLedger struct {
	acked              map[string]metadata.Version
	ephemerals         []string
	maxSeen, headAcked metadata.Version
}

// crashRound runs one helper on path until it acknowledged acksWanted
// writes, SIGKILLs it mid-write, and then runs cut (nil: a process crash
// only; crashfs.PowerCut: a power failure).
func (c Crash) crashRound(t *testing.T, path string, round, acksWanted int, noSync bool, cut func(testing.TB), l *crashLedger) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), c.Env+"="+path, fmt.Sprintf("%s_ROUND=%d", c.Env, round))
	if noSync {
		cmd.Env = append(cmd.Env, c.Env+"_NOSYNC=1")
	}
	cmd.SysProcAttr = testenv.ChildProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	acks, killed := 0, false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "error":
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("helper: %s", sc.Text())
		case "ack", "eph":
			v, _ := strconv.ParseInt(f[2], 10, 64)
			l.acked[f[1]] = metadata.Version(v)
			if f[0] == "eph" {
				l.ephemerals = append(l.ephemerals, f[1])
			} else {
				acks++
			}
			l.maxSeen = max(l.maxSeen, metadata.Version(v))
		case "head":
			v, _ := strconv.ParseInt(f[1], 10, 64)
			l.headAcked = max(l.headAcked, metadata.Version(v))
			l.maxSeen = max(l.maxSeen, metadata.Version(v))
		default:
			continue // test framework output
		}
		if acks >= acksWanted && !killed {
			// Lines already in the pipe were acknowledged before the
			// kill; keep reading them until EOF.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("round %d: helper exited after %d acks without being killed", round, acks)
	}
	if cut != nil {
		cut(t)
	}
}

// verifyCrash reopens path and returns every violation: an acknowledged
// write missing or at another version, an ephemeral that survived, a head
// below its acknowledged version, a version issued twice.
func (c Crash) verifyCrash(path string, round int, l *crashLedger) (problems []string) {
	s, err := c.Open(path, false)
	if err != nil {
		return []string{fmt.Sprintf("reopen: %v", err)}
	}
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	for _, k := range l.ephemerals {
		if _, err := s.Get(ctx, k); !errors.Is(err, metadata.ErrKeyNotFound) {
			problems = append(problems, fmt.Sprintf("ephemeral %s survived the crash: %v", k, err))
		}
		delete(l.acked, k)
	}
	recs, err := s.RangeScan(ctx, "data/", "data0", 0)
	if err != nil {
		return append(problems, fmt.Sprintf("scan: %v", err))
	}
	stored := map[string]metadata.Record{}
	for _, r := range recs {
		stored[r.Key] = r
		l.maxSeen = max(l.maxSeen, r.Version)
		if string(r.Value) != r.Key {
			problems = append(problems, fmt.Sprintf("%s holds %q", r.Key, r.Value))
		}
	}
	lost := 0
	for k, v := range l.acked {
		if r, ok := stored[k]; !ok || r.Version != v {
			if lost < 5 {
				problems = append(problems, fmt.Sprintf("acknowledged %s@%d lost (stored: %+v, present %v)", k, v, r, ok))
			}
			lost++
		}
	}
	if lost > 5 {
		problems = append(problems, fmt.Sprintf("... %d acknowledged writes lost in all", lost))
	}
	head, err := s.Get(ctx, "head")
	if l.headAcked > 0 && (err != nil || head.Version < l.headAcked) {
		problems = append(problems, fmt.Sprintf("head %+v (%v), acknowledged up to %d", head, err, l.headAcked))
	}
	l.maxSeen = max(l.maxSeen, head.Version)
	v, err := s.Put(ctx, fmt.Sprintf("probe/%d", round), nil, metadata.NotExists)
	if err != nil || v <= l.maxSeen {
		problems = append(problems, fmt.Sprintf("new version %d after restart, but %d was already issued (%v)", v, l.maxSeen, err))
	}
	l.maxSeen = max(l.maxSeen, v)
	return problems
}

func newCrashLedger() *crashLedger { return &crashLedger{acked: map[string]metadata.Version{}} }

// KillNine (TestKillNineRecovery) kills a writing process with SIGKILL
// several times and checks after each restart: every acknowledged write
// is there at the version it was given, the version counter moved past
// everything ever issued, and no ephemeral survived. (A SIGKILL keeps the
// page cache; PowerCut drops it.)
func (c Crash) KillNine(t *testing.T) {
	if os.Getenv(c.Env) != "" {
		t.Skip("in helper") // skip-ok: the child runs TestCrashHelper only
	}
	path := filepath.Join(t.TempDir(), c.Name)
	l := newCrashLedger()
	for round := range 3 {
		c.crashRound(t, path, round, 1500, false, nil, l)
		if problems := c.verifyCrash(path, round, l); len(problems) > 0 {
			t.Fatalf("round %d:\n  %s", round, strings.Join(problems, "\n  "))
		}
		more := ""
		if c.Describe != nil {
			more = " " + c.Describe(t, path)
		}
		t.Logf("round %d: %d acknowledged writes verified after kill -9%s", round, len(l.acked), more)
	}
}

// PowerCut (TestPowerCutRecovery) is KillNine on crashfs with a power cut
// after every kill: only what the store synced (and what was fsync'd into
// a directory) survives, so every acknowledged write must have been.
func (c Crash) PowerCut(t *testing.T) {
	if os.Getenv(c.Env) != "" {
		t.Skip("in helper") // skip-ok: the child runs TestCrashHelper only
	}
	cfs := crashfs.Mount(t)
	path := filepath.Join(cfs.Dir(), c.Name)
	l := newCrashLedger()
	for round := range 3 {
		c.crashRound(t, path, round, 200, false, cfs.PowerCut, l)
		if problems := c.verifyCrash(path, round, l); len(problems) > 0 {
			t.Fatalf("round %d after a power cut (%v):\n  %s", round, cfs.Stats(), strings.Join(problems, "\n  "))
		}
		t.Logf("round %d: %d acknowledged writes verified after kill -9 + power cut (%v)", round, len(l.acked), cfs.Stats())
	}
}

// CatchesSkippedSync (TestPowerCutCatchesSkippedSync) is the mutation
// check of PowerCut: with the store's commit sync skipped, a power cut
// loses acknowledged writes, and the check must say so.
func (c Crash) CatchesSkippedSync(t *testing.T) {
	if os.Getenv(c.Env) != "" {
		t.Skip("in helper") // skip-ok: the child runs TestCrashHelper only
	}
	cfs := crashfs.Mount(t)
	path := filepath.Join(cfs.Dir(), c.Name)
	// A first clean round creates the file durably; the mutant writes next.
	l := newCrashLedger()
	c.crashRound(t, path, 0, 50, false, cfs.PowerCut, l)
	if problems := c.verifyCrash(path, 0, l); len(problems) > 0 {
		t.Fatalf("clean round: %s", strings.Join(problems, "; "))
	}
	c.crashRound(t, path, 1, 100, true, cfs.PowerCut, l)
	problems := c.verifyCrash(path, 1, l)
	if len(problems) == 0 {
		t.Fatalf("skipping %s lost nothing the check could see (%v)", c.Sync, cfs.Stats())
	}
	t.Logf("caught: %s", problems[0])
}
