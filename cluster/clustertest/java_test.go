package clustertest

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

// javaFlow builds kafka/javatest (Java kafka-clients 4.x, Maven repository
// cached in .cache/m2) in a private copy — the compat tests build the
// original concurrently — and returns the command running ClusterFlow.
func javaFlow(t *testing.T, ctx context.Context, bootstrap, topic, group string) *exec.Cmd {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		testenv.SkipOrFail(t, "java not installed (Java 17+; scripts/install-kafka-test-deps.sh)")
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		testenv.SkipOrFail(t, "mvn not installed (scripts/install-kafka-test-deps.sh)")
	}
	src, err := filepath.Abs("../../kafka/javatest")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../../.cache/m2")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-r", filepath.Join(src, "pom.xml"), filepath.Join(src, "src"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copy javatest: %v\n%s", err, out)
	}
	build := exec.CommandContext(ctx, "mvn", "-q", "-B", "-Dmaven.repo.local="+repo, "-f", filepath.Join(dir, "pom.xml"), "package")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("maven build: %v\n%s", err, out)
	}
	cp := filepath.Join(dir, "target", "classes") + string(os.PathListSeparator) + filepath.Join(dir, "target", "lib", "*")
	cmd := exec.CommandContext(ctx, "java", testenv.JavaArgs(t, "-cp", cp, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"io.nereus.kafkatest.ClusterFlow", bootstrap, topic, group)...)
	cmd.SysProcAttr = testenv.ChildProcAttr()
	return cmd
}

// TestJavaClientsOnTwoNodes: the Java kafka-clients idempotent producer and
// a consumer-group member keep flowing on a 2-node cluster while one node
// is SIGKILLed and restarted and the other is stopped gracefully; every
// acknowledged record is consumed at its acknowledged offset and is in the
// log exactly once.
func TestJavaClientsOnTwoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test") // skip-ok: -short asks for quick tests only
	}
	e := newEnv(t)
	n1, n2 := e.start(), e.start()
	waitBrokers(t, n1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(n1.KafkaAddr(), n2.KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const topic = "java-orders"
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 6, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cmd := javaFlow(t, ctx, n1.KafkaAddr()+","+n2.KafkaAddr(), topic, "java-group")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	type at struct {
		p   int32
		off int64
	}
	var mu sync.Mutex
	acked, recv := map[string]at{}, map[string][]at{}
	var errs []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 {
				continue
			}
			mu.Lock()
			switch f[0] {
			case "ACK", "RECV":
				if len(f) == 4 {
					p, _ := strconv.Atoi(f[2])
					off, _ := strconv.ParseInt(f[3], 10, 64)
					if f[0] == "ACK" {
						acked[f[1]] = at{int32(p), off}
					} else {
						recv[f[1]] = append(recv[f[1]], at{int32(p), off})
					}
				}
			case "ERR":
				errs = append(errs, sc.Text())
			}
			mu.Unlock()
		}
	}()
	ackCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitAcks := func(n int) {
		deadline := time.Now().Add(2 * time.Minute)
		for ackCount() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d acknowledged (want %d)", ackCount(), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitAcks(300)
	n1.Kill()
	waitAcks(ackCount() + 500)
	n1.Restart()
	waitBrokers(t, n2, 2)
	waitAcks(ackCount() + 500)
	n2.Stop()
	waitAcks(ackCount() + 500)
	_ = stdin.Close()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the Java client did not finish")
	}
	_ = cmd.Wait()
	log := readAll(t, ctx, []string{n1.KafkaAddr()}, topic, 6)
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Errorf("%d sends failed, first: %s", len(errs), errs[0])
	}
	inLog := map[string]at{}
	for p, recs := range log {
		for _, r := range recs {
			v := string(r.Value)
			if _, dup := inLog[v]; dup {
				t.Fatalf("value %s twice in the log", v)
			}
			inLog[v] = at{p, r.Offset}
		}
	}
	for v, a := range acked {
		if inLog[v] != a {
			t.Fatalf("value %s acknowledged at %v, in the log at %v", v, a, inLog[v])
		}
		rs := recv[v]
		if len(rs) == 0 {
			t.Fatalf("value %s acknowledged but never consumed", v)
		}
		for _, r := range rs {
			if r != a {
				t.Fatalf("value %s consumed at %v, acknowledged at %v", v, r, a)
			}
		}
	}
	t.Logf("%d records acknowledged by the Java producer, all consumed and in the log once", len(acked))
	_ = io.Discard
}
