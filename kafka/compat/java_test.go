package compat

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

// TestJavaClients builds kafka/javatest (Java kafka-clients 4.x from Maven
// Central, cached in .cache/m2 at the module root) and runs its smoke
// program: admin create/describe/alter/delete, an idempotent acks=all
// producer, a two-member classic consumer group with commits, and the
// committed offsets read back through the admin client.
func TestJavaClients(t *testing.T) {
	_, jerr := exec.LookPath("java")
	_, merr := exec.LookPath("mvn")
	requireExternal(t, jerr == nil && merr == nil, "java and mvn (Java 17+, Maven; scripts/install-kafka-test-deps.sh)")
	dir, err := filepath.Abs("../javatest")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../../.cache/m2")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "mvn", "-q", "-B", "-Dmaven.repo.local="+repo, "-f", filepath.Join(dir, "pom.xml"), "package")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("maven build: %v\n%s", err, out)
	}
	cp := filepath.Join(dir, "target", "classes") + string(os.PathListSeparator) + filepath.Join(dir, "target", "lib", "*")
	rctx, rcancel := context.WithTimeout(ctx, 4*time.Minute)
	defer rcancel()
	run := exec.CommandContext(rctx, "java", testenv.JavaArgs(t, "-cp", cp, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"io.nereus.kafkatest.Smoke", broker.Addr, uniqueTopic("java"), uniqueTopic("java-group"))...)
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Run(); err != nil {
		t.Fatalf("java smoke: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "\nOK") {
		t.Fatalf("java smoke did not finish:\n%s", out.String())
	}
	t.Logf("java kafka-clients:\n%s", out.String())
}
