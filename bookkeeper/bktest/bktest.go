// Package bktest runs tests against a real BookKeeper cluster (ZooKeeper
// plus bookies started by scripts/bookkeeper-env.sh from Maven Central
// jars): one cluster per test package, started in TestMain and stopped
// after the package's tests.
//
// Usage:
//
//	var env bktest.Env
//	func TestMain(m *testing.M) { os.Exit(env.Main(m)) }
//	func TestX(t *testing.T) { env.Require(t); ... env.ZK ... }
//
// BK_JOURNAL_SYNC=true (passed to the script) makes the bookies run with
// journalSyncData=true, fsyncing the journal before every acknowledgement;
// the line bktest prints at start says which mode the cluster runs in.
//
// When NEREUS_BK_ZK (or NEREUS_BOOKKEEPER_ZK, which scripts/test.sh
// exports) is set, CI started a shared cluster: that connect string is used
// and nothing is started, unless the package sets NeedControl (it kills or
// restarts bookies, which must never disturb other packages running against
// the shared cluster at the same time): such a package always starts its own
// cluster. When the cluster is not
// available (no Java/Maven, download or start failed), Require skips the
// test with the reason, or fails it if NEREUS_REQUIRE_EXTERNAL=1.
//
// It owns only the lifecycle of that test cluster. It must never be
// imported by non-test code, and never start anything but through the
// script (whose processes it stops by pid through the script).
package bktest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

// Env is a running real-bookie environment.
type Env struct {
	// ZK is the ZooKeeper connect string ("127.0.0.1:port").
	ZK string
	// Root is the ledgers root ("/ledgers").
	Root string
	// Dir is the env script's state dir ("" for an external cluster
	// without NEREUS_BK_ENV_DIR: no kill/restart, no shell).
	Dir string
	// RepoRoot is the repository root.
	RepoRoot string
	// NeedControl, set before Main, makes the package start its own
	// cluster even when a shared one is available (see the package doc).
	NeedControl bool

	unavailable string
	owned       bool
	// jvmTmp is the java.io.tmpdir of every JVM an owned cluster runs
	// (see jvmEnv), removed after the cluster stops.
	jvmTmp string
}

// Main starts the cluster (unless external or unavailable), runs the
// tests and stops it. Use as os.Exit(env.Main(m)).
func (e *Env) Main(m *testing.M) int {
	e.setup()
	code := m.Run()
	e.teardown()
	return code
}

func (e *Env) setup() {
	e.Root = "/ledgers"
	root, err := repoRoot()
	if err != nil {
		e.unavailable = err.Error()
		return
	}
	e.RepoRoot = root
	zk := os.Getenv("NEREUS_BK_ZK")
	if zk == "" {
		zk = os.Getenv("NEREUS_BOOKKEEPER_ZK")
	}
	if zk != "" && !e.NeedControl {
		e.ZK = zk
		e.Dir = os.Getenv("NEREUS_BK_ENV_DIR")
		return
	}
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			e.unavailable = fmt.Sprintf("%s not found: real-bookie tests need Java 17 and Maven (or NEREUS_BK_ZK)", tool)
			return
		}
	}
	dir, err := os.MkdirTemp("", "nereus-bkenv-")
	if err != nil {
		e.unavailable = err.Error()
		return
	}
	e.Dir = dir
	// Not inside dir: the script's start deletes and recreates it.
	if e.jvmTmp, err = os.MkdirTemp("", "nereus-bkjvm-"); err != nil {
		e.unavailable = err.Error()
		_ = os.RemoveAll(dir)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out, err := e.script(ctx, "start")
	if err != nil {
		e.unavailable = fmt.Sprintf("scripts/bookkeeper-env.sh start failed: %v\n%s", err, out)
		e.stopQuietly()
		return
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	e.ZK = strings.TrimSpace(lines[len(lines)-1])
	e.owned = true
	e.startWatchdog()
	fmt.Fprintf(os.Stderr, "bktest: real BookKeeper cluster at %s (state %s, %s)\n", e.ZK, e.Dir, e.journalSync())
}

// startWatchdog runs "bookkeeper-env.sh watch <our pid>" detached, so the
// cluster is stopped even if this test binary dies without running
// teardown (a panicking test, a timeout, a kill).
func (e *Env) startWatchdog() {
	cmd := exec.Command(filepath.Join(e.RepoRoot, "scripts", "bookkeeper-env.sh"), "watch", strconv.Itoa(os.Getpid()))
	cmd.Env = append(os.Environ(), "BK_ENV_DIR="+e.Dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "bktest: watchdog not started (a crashed test may leak the cluster): %v\n", err)
		return
	}
	go func() { _ = cmd.Wait() }()
}

func (e *Env) teardown() {
	if e.owned {
		e.stopQuietly()
	}
}

func (e *Env) stopQuietly() {
	if e.Dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := e.script(ctx, "stop"); err != nil {
		fmt.Fprintf(os.Stderr, "bktest: stop failed: %v\n%s", err, out)
	}
	_ = os.RemoveAll(e.Dir)
	if e.jvmTmp != "" {
		_ = os.RemoveAll(e.jvmTmp)
	}
}

// Require skips (or, with NEREUS_REQUIRE_EXTERNAL=1, fails) the test when
// the cluster is unavailable.
func (e *Env) Require(t testing.TB) {
	t.Helper()
	if e.ZK != "" && e.unavailable == "" {
		return
	}
	testenv.SkipOrFail(t, "real BookKeeper unavailable: %s", e.unavailable)
}

// RequireControl is Require plus the state dir needed for kill/restart
// and the BookKeeper shell (always there when NeedControl is set).
func (e *Env) RequireControl(t testing.TB) {
	t.Helper()
	e.Require(t)
	if e.Dir == "" {
		testenv.SkipOrFail(t, "external cluster without NEREUS_BK_ENV_DIR: cannot control bookies")
	}
}

func (e *Env) script(ctx context.Context, args ...string) ([]byte, error) {
	return e.scriptEnv(ctx, nil, args...)
}

func (e *Env) scriptEnv(ctx context.Context, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.RepoRoot, "scripts", "bookkeeper-env.sh"), args...)
	cmd.Env = append(append(os.Environ(), "BK_ENV_DIR="+e.Dir), env...)
	if e.jvmTmp != "" {
		cmd.Env = append(cmd.Env, jvmEnv(e.jvmTmp))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.Bytes()...), err
	}
	return out, nil
}

// jvmEnv is the environment variable that gives every JVM the script
// starts (it execs the java launcher, which reads JDK_JAVA_OPTIONS) the
// java.io.tmpdir dir. BookKeeper's bookies, shell and client extract their
// JNI libraries (native-io, circe-checksum) into <java.io.tmpdir>/native<N>/
// and leave them there (seen after every bookie start and restart): in
// /tmp that is a leak per JVM.
func jvmEnv(dir string) string { return "JDK_JAVA_OPTIONS=-Djava.io.tmpdir=" + dir }

// Run runs the env script with args (e.g. "kill-bookie", "1") and returns
// its stdout, failing the test on error. On a cluster this package did not
// start, the Java programs it runs ("java", "shell") get a java.io.tmpdir
// of t's (see jvmEnv).
func (e *Env) Run(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var env []string
	if e.jvmTmp == "" && len(args) > 0 && (args[0] == "java" || args[0] == "shell") {
		env = []string{jvmEnv(t.TempDir())}
	}
	out, err := e.scriptEnv(ctx, env, args...)
	if err != nil {
		t.Fatalf("bookkeeper-env.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// BookieID returns the bookie ID ("127.0.0.1:port") of bookie i.
func (e *Env) BookieID(t testing.TB, i int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.Dir, fmt.Sprintf("bookie-%d.port", i)))
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strings.TrimSpace(string(b))
}

// NumBookies returns how many bookies the env runs.
func (e *Env) NumBookies(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.Dir, "num-bookies"))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(string(b), &n)
	return n
}

// ClientConf is the path of a BookKeeper client configuration for this
// env (for Java programs).
func (e *Env) ClientConf() string { return filepath.Join(e.Dir, "conf", "client.conf") }

// Lines returns the lines of out that start with prefix.
func Lines(out, prefix string) []string {
	var res []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			res = append(res, sc.Text())
		}
	}
	return res
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "scripts", "bookkeeper-env.sh")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repository root with scripts/bookkeeper-env.sh not found")
		}
		dir = parent
	}
}

// journalSync reports the bookies' journalSyncData setting (BK_JOURNAL_SYNC
// =true makes them fsync the journal before acknowledging: power-loss
// durable; the default acknowledges once the journal write reached the page
// cache, which survives only a process kill).
func (e *Env) journalSync() string {
	b, err := os.ReadFile(filepath.Join(e.Dir, "conf", "bookie-0.conf"))
	if err != nil {
		return "journalSyncData unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "journalSyncData=") {
			return l
		}
	}
	return "journalSyncData unset"
}
