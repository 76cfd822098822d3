package kop_test

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

// TestJavaKafkaClients: the Java kafka-clients (4.1.1, from Maven Central)
// produce lz4-compressed, keyed records with headers and timestamps to a
// Pulsar topic and read them back in a consumer group; pulsar-client-go then
// consumes the same messages with key, properties and event time, and
// Pulsar's stats show the Java group's subscription with no backlog.
func TestJavaKafkaClients(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		testenv.SkipOrFail(t, "java unavailable: %v", err)
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		testenv.SkipOrFail(t, "mvn unavailable: %v", err)
	}
	dir, _ := filepath.Abs("javatest")
	cp := buildJava(t, mvn, dir)
	ts := server(t)
	topic := newTopic("java-kop")
	group := fmt.Sprintf("java-group-%d", topicSeq.Add(1))
	const n = 40
	base := int64(1_690_000_000_000)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, java, testenv.JavaArgs(t, "-cp", cp, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"io.nereus.koptest.Main", ts.KafkaAddr(), topic, fmt.Sprint(n), group, fmt.Sprint(base))...)
	cmd.SysProcAttr = testenv.ChildProcAttr()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "KOP-JAVA-OK") {
		t.Fatalf("java kafka-clients: %v\n%s", err, out)
	}
	if b, ok := backlog(t, ts, topic, group); !ok || b != 0 {
		t.Fatalf("java group's subscription: present %v backlog %d", ok, b)
	}

	pc := pulsarClient(t, ts)
	cons, err := pc.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "pulsar-reader",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	rctx := ctxT(t, time.Minute)
	for i := 0; i < n; i++ {
		m, err := cons.Receive(rctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != fmt.Sprintf("java-%d", i) || m.Key() != fmt.Sprintf("jk-%d", i%5) ||
			m.Properties()["seq"] != fmt.Sprint(i) || m.Properties()["client"] != "java" ||
			m.EventTime().UnixMilli() != base+int64(i) || m.Index() == nil || *m.Index() != uint64(i) {
			t.Fatalf("message %d: %q key %q props %v event %v index %v", i, m.Payload(), m.Key(), m.Properties(), m.EventTime(), m.Index())
		}
		_ = cons.Ack(m)
	}
}

func buildJava(t *testing.T, mvn, dir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "compile", "dependency:build-classpath", "-Dmdep.outputFile=target/classpath.txt")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("maven build of kop/javatest: %v\n%s", err, out)
	}
	deps, err := os.ReadFile(filepath.Join(dir, "target", "classpath.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "target", "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(deps))
}
