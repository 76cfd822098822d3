package boltstore_test

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

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/boltstore"
)

const crashEnv = "NEREUS_BOLTSTORE_CRASH_HELPER_DB"

// TestCrashHelper is the child process of TestKillNineRecovery: it writes
// under load and prints every acknowledged write until it is killed.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("helper process for TestKillNineRecovery") // skip-ok: runs only as a child of TestKillNineRecovery
	}
	round := os.Getenv(crashEnv + "_ROUND")
	s, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
	ctx := context.Background()
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Printf(format+"\n", args...)
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

// TestKillNineRecovery kills a writing process with SIGKILL several times
// and checks after each restart: every acknowledged write is there at the
// version it was given, the version counter moved past everything ever
// issued, and no ephemeral survived.
func TestKillNineRecovery(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in helper") // skip-ok: the child runs TestCrashHelper only
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	acked := map[string]metadata.Version{}
	var ephemerals []string
	var maxSeen, headAcked metadata.Version
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+path, fmt.Sprintf("%s_ROUND=%d", crashEnv, round))
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
				t.Fatalf("helper: %s", sc.Text())
			case "ack", "eph":
				v, _ := strconv.ParseInt(f[2], 10, 64)
				acked[f[1]] = metadata.Version(v)
				if f[0] == "eph" {
					ephemerals = append(ephemerals, f[1])
				} else {
					acks++
				}
				maxSeen = max(maxSeen, metadata.Version(v))
			case "head":
				v, _ := strconv.ParseInt(f[1], 10, 64)
				headAcked = max(headAcked, metadata.Version(v))
				maxSeen = max(maxSeen, metadata.Version(v))
			default:
				continue // test framework output
			}
			if acks >= 1500 && !killed {
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

		s, err := boltstore.Open(path, boltstore.Options{})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		ctx := context.Background()
		for _, k := range ephemerals {
			if _, err := s.Get(ctx, k); !errors.Is(err, metadata.ErrKeyNotFound) {
				t.Fatalf("round %d: ephemeral %s survived the crash: %v", round, k, err)
			}
			delete(acked, k)
		}
		recs, err := s.RangeScan(ctx, "data/", "data0", 0)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]metadata.Record{}
		for _, r := range recs {
			stored[r.Key] = r
			maxSeen = max(maxSeen, r.Version)
			if string(r.Value) != r.Key {
				t.Fatalf("round %d: %s holds %q", round, r.Key, r.Value)
			}
		}
		for k, v := range acked {
			if r, ok := stored[k]; !ok || r.Version != v {
				t.Fatalf("round %d: acknowledged %s@%d lost (stored: %+v, present %v)", round, k, v, r, ok)
			}
		}
		head, err := s.Get(ctx, "head")
		if err != nil || head.Version < headAcked {
			t.Fatalf("round %d: head %+v (%v), acknowledged up to %d", round, head, err, headAcked)
		}
		maxSeen = max(maxSeen, head.Version)
		v, err := s.Put(ctx, fmt.Sprintf("probe/%d", round), nil, metadata.NotExists)
		if err != nil || v <= maxSeen {
			t.Fatalf("round %d: new version %d after restart, but %d was already issued (%v)", round, v, maxSeen, err)
		}
		maxSeen = v
		t.Logf("round %d: %d acknowledged writes verified after kill -9, head at %d", round, len(acked), head.Version)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
