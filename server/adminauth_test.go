package server

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testenv/certs"
)

var adminSecret = []byte("admin-auth-test-secret-0123456789abcdef")

func adminToken(t *testing.T, role string, exp time.Time) string {
	t.Helper()
	c := jwt.MapClaims{"sub": role}
	if !exp.IsZero() {
		c["exp"] = exp.Unix()
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(adminSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAdminAuthRoles(t *testing.T) {
	cs := certs.NewT(t)
	cfg := testConfig(t)
	key := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(key, adminSecret, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = ""
	cfg.HTTPListeners = "http://127.0.0.1:0,https://127.0.0.1:0"
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile, cfg.TLSClientAuth = cs.CertFile, cs.KeyFile, cs.CAFile, "requested"
	cfg.TokenSecretKeyFile = key
	cfg.AdminAuth, cfg.AdminRoles, cfg.AdminReadOnlyRoles = "token,tls", "admin,ops-cert", "monitor"
	s, _ := startTest(t, cfg)
	base := "http://" + s.HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := func(tok string) *adminapi.Client {
		c, err := adminapi.NewClient(base, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			c = c.WithToken(tok)
		}
		return c
	}
	code := func(err error) adminapi.Code {
		var e *adminapi.Error
		if errors.As(err, &e) {
			return e.Code
		}
		return ""
	}
	// Open paths stay open.
	if _, err := client("").Health(ctx); err != nil {
		t.Fatalf("/healthz without a token: %v", err)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics without a token: %v %v", err, resp.Status)
	}
	resp.Body.Close()
	// No, bad or expired token: 401.
	for _, tok := range []string{"", "garbage", adminToken(t, "admin", time.Now().Add(-time.Minute))} {
		if _, err := client(tok).ListStreams(ctx, "", "", 10); code(err) != adminapi.CodeUnauthenticated {
			t.Errorf("list with token %.10q: %v", tok, err)
		}
	}
	monitor, admin := client(adminToken(t, "monitor", time.Now().Add(time.Hour))), client(adminToken(t, "admin", time.Time{}))
	if _, err := monitor.ListStreams(ctx, "", "", 10); err != nil {
		t.Fatalf("read-only list: %v", err)
	}
	if _, err := monitor.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "x"}); code(err) != adminapi.CodeForbidden {
		t.Fatalf("read-only create: %v", err)
	}
	if _, err := client(adminToken(t, "stranger", time.Time{})).ListStreams(ctx, "", "", 10); code(err) != adminapi.CodeForbidden {
		t.Fatalf("unknown role: %v", err)
	}
	if _, err := admin.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "x"}); err != nil {
		t.Fatalf("admin create: %v", err)
	}
	// mTLS: the certificate's CN is the role.
	cert, keyf, err := cs.Issue("ops", "ops-cert", false)
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := cs.ClientConfig(cert, keyf)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	mc, _ := adminapi.NewClient("https://"+s.Listeners()["http:internal:https"], hc)
	if err := mc.DeleteStream(ctx, "x"); err != nil {
		t.Fatalf("delete with a client certificate: %v", err)
	}
	anon, _ := cs.ClientConfig("", "")
	ac, _ := adminapi.NewClient("https://"+s.Listeners()["http:internal:https"], &http.Client{Transport: &http.Transport{TLSClientConfig: anon}})
	if _, err := ac.ListStreams(ctx, "", "", 10); code(err) != adminapi.CodeUnauthenticated {
		t.Fatalf("https without a certificate: %v", err)
	}
	// Every other path needs credentials too (front-end mounts included).
	resp, err = http.Get(base + "/v1/kafka/scram-users")
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("/v1/kafka/ without a token: %v %d", err, resp.StatusCode)
	}
}

func TestAdminAuthNothingOpen(t *testing.T) {
	cfg := testConfig(t)
	key := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(key, adminSecret, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.TokenSecretKeyFile, cfg.AdminAuth, cfg.AdminRoles, cfg.AdminOpenPaths = key, "token", "admin", ""
	s, _ := startTest(t, cfg)
	resp, err := http.Get("http://" + s.HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("/healthz with nothing open: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}
