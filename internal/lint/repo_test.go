package lint

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

// TestCheckRepoScript runs scripts/check-repo.sh (the CI repo-hygiene step)
// against a scratch git repository holding each kind of offender and each
// kind of allowed file, so the check is known to refuse what it claims to.
func TestCheckRepoScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.SkipOrFail(t, "git not installed")
	}
	script := filepath.Join(moduleRoot(t), "scripts", "check-repo.sh")
	dir := t.TempDir()
	write := func(rel string, data []byte, mode os.FileMode) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	big := bytes.Repeat([]byte("x"), 1<<20+1)
	write("ok.go", []byte("package x\n"), 0o644)
	write("run.sh", []byte("#!/bin/sh\necho hi\n"), 0o755)
	write("pkg/testdata/big.bin", big, 0o644)
	write("pkg.test", append([]byte{0x7f, 'E', 'L', 'F'}, make([]byte, 64)...), 0o644)
	write("tool", []byte("not a script\n"), 0o755)
	write("docs/big.txt", big, 0o644)
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.email=t@t", "-c", "user.name=t"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", "-A")

	cmd := exec.Command("bash", script, dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("check-repo.sh accepted offenders:\n%s", out)
	}
	got := string(out)
	for _, want := range []string{
		"tracked executable (binary): pkg.test",
		"tracked executable (exec bit, not a #! script): tool",
		"outside testdata/: docs/big.txt",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, allowed := range []string{"ok.go", "run.sh", "pkg/testdata/big.bin"} {
		if strings.Contains(got, allowed) {
			t.Errorf("output names allowed file %s:\n%s", allowed, got)
		}
	}

	git("rm", "-q", "--cached", "pkg.test", "tool", "docs/big.txt")
	if out, err := exec.Command("bash", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("check-repo.sh refused a clean tree: %v\n%s", err, out)
	}
}
