package pulsar

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

// requireOrSkip skips when an external tool is missing, or fails when
// NEREUS_REQUIRE_EXTERNAL=1 (CI) says it must be there.
func requireOrSkip(t *testing.T, what string, err error) {
	t.Helper()
	testenv.SkipOrFail(t, "%s unavailable: %v", what, err)
}

// TestJavaClient runs the Java Pulsar client (org.apache.pulsar:pulsar-client
// from Maven Central, pulsar/javatest) against the broker: Go produces and
// Java consumes, Java produces (batched and not) and Go consumes, and Java
// round-trips its own messages with receipts, a schema, a reader and seek.
func TestJavaClient(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		requireOrSkip(t, "java", err)
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		requireOrSkip(t, "mvn", err)
	}
	dir, _ := filepath.Abs("javatest")
	cp := buildJavaTest(t, mvn, dir)

	b := startBroker(t, Config{})
	c := b.client(t)
	topic := newTopic("java")
	const goCount, javaCount = 10, 25
	p := producerT(t, c, pulsar.ProducerOptions{Topic: topic})
	produceN(t, p, goCount, "go")
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "go-sub", SubscriptionInitialPosition: pulsar.SubscriptionPositionLatest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, java, testenv.JavaArgs(t, "-cp", cp, "io.nereus.pulsartest.Main", b.URL, topic, fmt.Sprint(goCount), fmt.Sprint(javaCount))...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "JAVA-OK") {
		t.Fatalf("java client: %v\n%s", err, out)
	}
	rctx := ctxT(t, 30*time.Second)
	for _, prefix := range []string{"java", "java-nb"} {
		for i := 0; i < javaCount; i++ {
			m, err := cons.Receive(rctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%s-%d", prefix, i); string(m.Payload()) != want {
				t.Fatalf("go consumer got %q want %q", m.Payload(), want)
			}
			_ = cons.Ack(m)
		}
	}
}

// buildJavaTest compiles the Java program once (Maven resolves the client
// from Maven Central into ~/.m2) and returns its class path.
func buildJavaTest(t *testing.T, mvn, dir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "compile", "dependency:build-classpath", "-Dmdep.outputFile=target/classpath.txt")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("maven build of pulsar/javatest: %v\n%s", err, out)
	}
	deps, err := os.ReadFile(filepath.Join(dir, "target", "classpath.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "target", "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(deps))
}
