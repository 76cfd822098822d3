package securitytest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

var (
	javaOnce sync.Once
	javaCP   string
	javaErr  error
)

// javaClasspath builds securitytest/javatest once (Maven Central jars via
// ~/.m2) and returns its class path.
func javaClasspath(t *testing.T) string {
	t.Helper()
	_, jerr := exec.LookPath("java")
	mvn, merr := exec.LookPath("mvn")
	if jerr != nil || merr != nil {
		testenv.SkipOrFail(t, "java and mvn not available (Java 17+, Maven)")
	}
	javaOnce.Do(func() {
		dir, err := filepath.Abs("javatest")
		if err != nil {
			javaErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "compile", "dependency:build-classpath", "-Dmdep.outputFile=target/classpath.txt")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			javaErr = &buildError{err: err, out: string(out)}
			return
		}
		deps, err := os.ReadFile(filepath.Join(dir, "target", "classpath.txt"))
		if err != nil {
			javaErr = err
			return
		}
		javaCP = filepath.Join(dir, "target", "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(deps))
	})
	if javaErr != nil {
		t.Fatalf("maven build of securitytest/javatest: %v", javaErr)
	}
	return javaCP
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// runJava runs a main class of javatest and returns its output; it fails
// the test unless the program printed OK.
func runJava(t *testing.T, class string, args ...string) string {
	t.Helper()
	cp := javaClasspath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", testenv.JavaArgs(t, append([]string{"-cp", cp, "io.nereus.securitytest." + class}, args...)...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "\nOK") && !strings.HasPrefix(out.String(), "OK") {
		t.Fatalf("java %s %v: %v\n%s", class, args, err, out.String())
	}
	t.Logf("java %s:\n%s", class, out.String())
	return out.String()
}

// TestJavaKafkaSASLSSL: kafka-clients 4.x producer, consumer group and
// admin (SCRAM credential management) over SASL_SSL with SCRAM; a wrong
// password gets SaslAuthenticationException from the admin client and
// the consumer.
func TestJavaKafkaSASLSSL(t *testing.T) {
	bootstrap := addr(t, "kafka:SASL_SSL")
	runJava(t, "KafkaSecure", "sasl", bootstrap, tlsCA.CAFile, "admin", users["admin"], unique("java"), unique("java-group"))
	runJava(t, "KafkaSecure", "refused", bootstrap, tlsCA.CAFile, "alice", "wrong", unique("java"), unique("java-group"))
}

// kafkaTool runs one of Kafka's command-line tools (main class) and returns
// its output.
func kafkaTool(t *testing.T, class string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", testenv.JavaArgs(t, append([]string{"-cp", javaClasspath(t), class}, args...)...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// commandConfig writes a Kafka client properties file for SASL_SSL with
// SCRAM-SHA-512 as user.
func commandConfig(t *testing.T, user, pass string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), user+".properties")
	body := "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n" +
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"" + user + "\" password=\"" + pass + "\";\n" +
		"ssl.truststore.type=PEM\nssl.truststore.location=" + tlsCA.CAFile + "\n"
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestKafkaConfigsSCRAM: Kafka's own kafka-configs adds, describes and
// deletes SCRAM credentials (AlterUserScramCredentials /
// DescribeUserScramCredentials), and the new user logs in.
func TestKafkaConfigsSCRAM(t *testing.T) {
	bootstrap := addr(t, "kafka:SASL_SSL")
	cfg := commandConfig(t, "admin", users["admin"])
	out, err := kafkaTool(t, "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--command-config", cfg,
		"--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=dave-secret],SCRAM-SHA-512=[password=dave-secret]",
		"--entity-type", "users", "--entity-name", "dave")
	if err != nil {
		t.Fatalf("kafka-configs --alter: %v\n%s", err, out)
	}
	t.Logf("kafka-configs --alter:\n%s", out)
	out, err = kafkaTool(t, "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--command-config", cfg,
		"--describe", "--entity-type", "users", "--entity-name", "dave")
	if err != nil || !strings.Contains(out, "SCRAM-SHA-256=iterations=8192") || !strings.Contains(out, "SCRAM-SHA-512=iterations=4096") {
		t.Fatalf("kafka-configs --describe: %v\n%s", err, out)
	}
	described, err := kadm.NewClient(saslClient(t, scramMech("SCRAM-SHA-512", "admin", users["admin"]))).DescribeUserSCRAMs(ctxT(t, 30*time.Second), "dave")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["dave"]; d.Err != nil || len(d.CredInfos) != 2 || d.CredInfos[0].Iterations+d.CredInfos[1].Iterations != 8192+4096 {
		t.Fatalf("dave after kafka-configs: %+v", d)
	}
	produceConsume(t, saslClient(t, scramMech("SCRAM-SHA-256", "dave", "dave-secret")), unique("dave"), 3)
	out, err = kafkaTool(t, "kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--command-config", cfg,
		"--alter", "--delete-config", "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", "dave")
	if err != nil {
		t.Fatalf("kafka-configs --delete-config: %v\n%s", err, out)
	}
	cl := saslClient(t, scramMech("SCRAM-SHA-256", "dave", "dave-secret"), kgo.RequestRetries(0))
	if err := cl.Ping(ctxT(t, 10*time.Second)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("dave's deleted SCRAM-SHA-256 credential still works: %v", err)
	}
}
