// Package eostest runs Apache Kafka's own Java libraries (kafka-clients,
// kafka-streams, connect-runtime 4.x from Maven Central, built from
// kafka/javaeos into the local Maven repository ~/.m2) against one real
// `nereus serve` shared by the package: a transactional producer and
// read_committed consumers under repeated SIGKILLs of the server, a Kafka
// Streams exactly_once_v2 word count that restores its state from its
// compacted changelog, and Kafka Connect in distributed mode copying a file
// through a topic with the FileStream connectors.
//
// Without java and mvn the tests skip, or fail with NEREUS_REQUIRE_EXTERNAL=1.
package eostest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/internal/testserver"
	"github.com/nereusstream/nereus-go/kafka/kafkatest"
)

var (
	srv      *testserver.Server
	javaOnce sync.Once
	javaCP   string
	javaErr  error
)

func TestMain(m *testing.M) {
	s, err := testserver.Launch(testserver.Options{DisablePulsar: true, Args: []string{"--kafka-consumer-heartbeat-interval", "500ms"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start nereus serve:", err)
		os.Exit(1)
	}
	srv = s
	code := m.Run()
	s.Close()
	os.Exit(code)
}

var topicSeq atomic.Int64

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, topicSeq.Add(1))
}

// classpath builds kafka/javaeos once and returns its class path.
func classpath(t *testing.T) string {
	t.Helper()
	_, jerr := exec.LookPath("java")
	_, merr := exec.LookPath("mvn")
	kafkatest.Require(t, jerr == nil && merr == nil, "java and mvn (Java 17+, Maven; scripts/install-kafka-test-deps.sh)")
	javaOnce.Do(func() {
		dir, err := filepath.Abs("../javaeos")
		if err != nil {
			javaErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		build := exec.CommandContext(ctx, "mvn", "-q", "-B", "-f", filepath.Join(dir, "pom.xml"), "package")
		if out, err := build.CombinedOutput(); err != nil {
			javaErr = fmt.Errorf("maven build: %v\n%s", err, out)
			return
		}
		javaCP = filepath.Join(dir, "target", "classes") + string(os.PathListSeparator) + filepath.Join(dir, "target", "lib", "*")
	})
	if javaErr != nil {
		t.Fatal(javaErr)
	}
	return javaCP
}

// javaRun runs one scenario class, streaming its output into the test log,
// and calls onLine for every line (in order) while it runs. It fails the
// test unless the program exits 0 after printing a line "OK".
func javaRun(t *testing.T, timeout time.Duration, onLine func(string), class string, args ...string) string {
	t.Helper()
	cp := classpath(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", testenv.JavaArgs(t, append([]string{"-cp", cp,
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.showDateTime=true",
		"io.nereus.kafkaeos." + class}, args...)...)...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			if onLine != nil {
				onLine(line)
			}
		}
	}()
	err := cmd.Wait()
	pw.Close()
	<-done
	s := out.String()
	if err != nil || !strings.Contains(s, "\nOK\n") && !strings.HasPrefix(s, "OK\n") {
		t.Fatalf("java %s: %v\n%s\n--- server log tail:\n%s", class, err, tail(s, 150), srv.LogTail(60))
	}
	return s
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
