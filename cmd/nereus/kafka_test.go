package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/nereusstream/nereus-go/internal/authtoken"
	"github.com/nereusstream/nereus-go/server"
)

// TestKafkaUserCLI: `nereus kafka user set` creates SCRAM credentials a
// Kafka client then authenticates with on a SASL listener; list shows
// mechanisms only; delete removes them.
func TestKafkaUserCLI(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.PulsarAddr = "127.0.0.1:0", ""
	cfg.KafkaListeners = "SASL_PLAINTEXT://127.0.0.1:0"
	s, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	c := &cli{t: t, server: "http://" + s.HTTPAddr()}
	c.sigCtx, c.sigCancel = context.WithCancel(context.Background())
	t.Cleanup(c.sigCancel)

	out := c.ok("s3cret-pw\n", "kafka", "user", "set", "alice")
	if !strings.Contains(out, "set SCRAM-SHA-256 credential of alice") || !strings.Contains(out, "SCRAM-SHA-512") {
		t.Fatalf("set: %q", out)
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("bob-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.ok("", "kafka", "user", "set", "bob", "--mechanism", "SCRAM-SHA-512", "--iterations", "4096", "--password-file", pwFile)
	out = c.ok("", "kafka", "user", "list")
	if !strings.Contains(out, "alice  SCRAM-SHA-256  8192") || !strings.Contains(out, "bob    SCRAM-SHA-512  4096") || strings.Contains(out, "pw") {
		t.Fatalf("list: %q", out)
	}
	c.fails("empty password", "", "kafka", "user", "set", "carol")
	c.fails("iterations", "x\n", "kafka", "user", "set", "carol", "--iterations", "10")

	kafkaAddr := s.Listeners()["kafka"]
	login := func(user, pass string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.RequestRetries(0),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	if err := login("alice", "s3cret-pw"); err != nil {
		t.Fatalf("alice with the CLI's credential: %v", err)
	}
	c.ok("", "kafka", "user", "delete", "alice")
	if err := login("alice", "s3cret-pw"); err == nil || !strings.Contains(err.Error(), kerr.SaslAuthenticationFailed.Message) {
		t.Fatalf("alice after delete: %v", err)
	}
	c.fails("no such SCRAM credential", "", "kafka", "user", "delete", "alice")
}

// TestCLITokenFile: against a server with --admin-auth token, commands
// fail with one clear line without credentials and work with --token-file.
func TestCLITokenFile(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("cli-token-test-secret-0123456789abcdef")
	if err := os.WriteFile(filepath.Join(dir, "key"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "admin"}).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.KafkaAddr, cfg.PulsarAddr = "127.0.0.1:0", "", ""
	cfg.TokenSecretKeyFile, cfg.AdminAuth, cfg.AdminRoles = filepath.Join(dir, "key"), "token", "admin"
	s, err := server.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	c := &cli{t: t, server: "http://" + s.HTTPAddr()}
	c.sigCtx, c.sigCancel = context.WithCancel(context.Background())
	t.Cleanup(c.sigCancel)
	c.fails("authentication required", "", "stream", "list")
	c.ok("", "stream", "create", "secured", "--token-file", filepath.Join(dir, "token"))
	if out := c.ok("", "stream", "list", "--token-file", filepath.Join(dir, "token")); !strings.Contains(out, "secured") {
		t.Fatalf("list: %q", out)
	}
}

// TestTokenCommands: create-secret-key and create make a token the
// server's validator accepts.
func TestTokenCommands(t *testing.T) {
	c := &cli{t: t}
	c.sigCtx, c.sigCancel = context.WithCancel(context.Background())
	t.Cleanup(c.sigCancel)
	key := filepath.Join(t.TempDir(), "secret.key")
	c.ok("", "token", "create-secret-key", "--output", key)
	c.fails("exists", "", "token", "create-secret-key", "--output", key)
	tok := strings.TrimSpace(c.ok("", "token", "create", "--secret-key-file", key, "--subject", "app", "--expiry", "1h"))
	v, err := authtoken.New(authtoken.Config{SecretKeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	if claims, err := v.Validate(tok, time.Now()); err != nil || claims.Role != "app" || claims.ExpiresAt.IsZero() {
		t.Fatalf("token: %+v %v", claims, err)
	}
}
