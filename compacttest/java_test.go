package compacttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/kafka/kafkatest"
)

var (
	javaOnce sync.Once
	javaCP   string
	javaErr  error
)

// javaClasspath builds kafka/javaeos (kafka-clients 4.1.1) once.
func javaClasspath(t *testing.T) string {
	t.Helper()
	_, jerr := exec.LookPath("java")
	_, merr := exec.LookPath("mvn")
	kafkatest.Require(t, jerr == nil && merr == nil, "java and mvn (Java 17+, Maven; scripts/install-kafka-test-deps.sh)")
	javaOnce.Do(func() {
		dir, err := filepath.Abs("../kafka/javaeos")
		if err != nil {
			javaErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "mvn", "-q", "-B", "-f", filepath.Join(dir, "pom.xml"), "package").CombinedOutput(); err != nil {
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

// javaCompactedRead reads topic from offset 0 with the Java consumer and
// returns partition -> key -> last record, and the number of records.
func javaCompactedRead(t *testing.T, topic string, partitions int, isolation string) (map[int32]map[string]produced, int) {
	t.Helper()
	cp := javaClasspath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "java", testenv.JavaArgs(t, "-cp", cp, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"io.nereus.kafkaeos.CompactedRead", srv.KafkaAddr(), topic, fmt.Sprint(partitions), isolation)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\nOK\n") {
		t.Fatalf("java CompactedRead: %v\n%s", err, out)
	}
	got := map[int32]map[string]produced{}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		var p int32
		var off int64
		var key, val string
		if _, err := fmt.Sscanf(l, "REC %d %d %s %s", &p, &off, &key, &val); err != nil {
			continue
		}
		if got[p] == nil {
			got[p] = map[string]produced{}
		}
		r := produced{offset: off, value: []byte(val)}
		if val == "<null>" {
			r.value = nil
		}
		got[p][key] = r
		n++
	}
	return got, n
}
