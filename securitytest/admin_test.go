package securitytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testserver"
)

// TestAdminAPIOverHTTPS: the nereus CLI against the admin API over
// https:// with a bearer token (read-only and admin roles) and with a
// client certificate; without credentials it is refused, /healthz stays
// open.
func TestAdminAPIOverHTTPS(t *testing.T) {
	bin := testserver.Binary(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	adminTok := write("admin.token", mintToken(t, "admin", time.Now().Add(time.Hour), tokenSecret(t)))
	monitorTok := write("monitor.token", mintToken(t, "monitor", time.Now().Add(time.Hour), tokenSecret(t)))
	https := "https://" + addr(t, "http:internal:https")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"HOME=" + dir}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	base := []string{"--server", https, "--ca-file", tlsCA.CAFile}
	if out, err := run(append([]string{"stream", "list"}, base...)...); err == nil || !strings.Contains(out, "authentication required") {
		t.Fatalf("no credentials: %v %s", err, out)
	}
	if out, err := run(append([]string{"stream", "create", unique("ro"), "--token-file", monitorTok}, base...)...); err == nil || !strings.Contains(out, "read-only role") {
		t.Fatalf("read-only create: %v %s", err, out)
	}
	name := unique("adm")
	if out, err := run(append([]string{"stream", "create", name, "--token-file", adminTok}, base...)...); err != nil {
		t.Fatalf("admin create: %v %s", err, out)
	}
	if out, err := run(append([]string{"stream", "list", "--token-file", monitorTok}, base...)...); err != nil || !strings.Contains(out, name) {
		t.Fatalf("read-only list: %v %s", err, out)
	}
	if out, err := run(append([]string{"kafka", "user", "list", "--token-file", adminTok}, base...)...); err != nil || !strings.Contains(out, "alice") {
		t.Fatalf("kafka user list: %v %s", err, out)
	}
	cert, key, err := tlsCA.Issue("admin-client", "admin", false)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run(append([]string{"stream", "delete", name, "--cert-file", cert, "--key-file", key}, base...)...); err != nil {
		t.Fatalf("delete with a client certificate (CN=admin): %v %s", err, out)
	}
	resp, err := httpsClient(t).Get(https + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
}
