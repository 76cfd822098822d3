package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testenv/certs"
	"github.com/nereusstream/nereus-go/internal/testenv/etcdtest"
)

// TestEtcdTLSAndAuth: the server reaches an etcd that requires TLS with a
// client certificate and username/password authentication; the password
// comes from a file or NEREUS_ETCD_PASSWORD and never shows in /healthz or
// the logs; a wrong password fails start-up clearly.
func TestEtcdTLSAndAuth(t *testing.T) {
	cs := certs.NewT(t)
	cliCert, cliKey, err := cs.Issue("nereus-etcd-client", "nereus", false)
	if err != nil {
		t.Fatal(err)
	}
	e := etcdtest.StartTLSServer(t, etcdtest.TLSFiles{CertFile: cs.CertFile, KeyFile: cs.KeyFile, CAFile: cs.CAFile})
	tc, _ := cs.ClientConfig(cliCert, cliKey)
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, TLS: tc, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const pass = "etcd-s3cret-pw"
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", pass); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	admin.Close()

	passFile := filepath.Join(t.TempDir(), "etcd-password")
	if err := os.WriteFile(passFile, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := func() Config {
		cfg := testConfig(t)
		cfg.Metadata = "etcd://" + e.Endpoint + etcdtest.Prefix()
		cfg.EtcdCAFile, cfg.EtcdCertFile, cfg.EtcdKeyFile, cfg.EtcdUsername = cs.CAFile, cliCert, cliKey, "root"
		cfg.BackendTimeout = 10 * time.Second
		return cfg
	}
	logs := &lockedBuilder{}
	cfg := base()
	cfg.EtcdPasswordFile = passFile
	s, err := Start(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("start with etcd TLS + auth: %v", err)
	}
	c, _ := adminapi.NewClient("http://"+s.HTTPAddr(), nil)
	if _, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "over-secure-etcd"}); err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = s.Shutdown(sctx)
	scancel()
	if strings.Contains(h.Metadata.Location+logs.String(), pass) {
		t.Fatal("the etcd password shows in /healthz or the log")
	}

	// The env variable works too; a wrong password does not.
	fs := parseFlags(t)
	env := envOf(map[string]string{"NEREUS_ETCD_PASSWORD": "wrong", "NEREUS_ETCD_USERNAME": "root"})
	loaded, err := LoadConfig(fs, env)
	if err != nil || loaded.EtcdPassword != "wrong" || loaded.EtcdPassword.String() != "[redacted]" {
		t.Fatalf("NEREUS_ETCD_PASSWORD: %v %q", err, loaded.EtcdPassword.String())
	}
	bad := base()
	bad.EtcdPassword = "wrong"
	bad.DataDir = t.TempDir()
	if _, err := Start(bad, quietLogger()); err == nil || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("start with a wrong etcd password: %v", err)
	}
	noTLS := base()
	noTLS.DataDir, noTLS.EtcdCAFile, noTLS.EtcdCertFile, noTLS.EtcdKeyFile, noTLS.EtcdPasswordFile = t.TempDir(), "", "", "", passFile
	noTLS.BackendTimeout = 3 * time.Second
	if _, err := Start(noTLS, quietLogger()); err == nil {
		t.Fatal("start without TLS against a TLS etcd")
	}
}

type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
