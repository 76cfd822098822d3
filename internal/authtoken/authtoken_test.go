package authtoken

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func write(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sign(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHS256(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	v, err := New(Config{SecretKeyFile: write(t, "secret", secret), Audience: "nereus"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	exp := now.Add(time.Hour).Truncate(time.Second)
	good := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": exp.Unix(), "aud": "nereus"})
	c, err := v.Validate(good, now)
	if err != nil || c.Role != "alice" || !c.ExpiresAt.Equal(exp) {
		t.Fatalf("good token: %+v %v", c, err)
	}
	if _, err := v.Validate(good, exp.Add(time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("at expiry: %v", err)
	}
	for name, tok := range map[string]string{
		"expired":      sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": now.Add(-time.Minute).Unix(), "aud": "nereus"}),
		"other key":    sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), jwt.MapClaims{"sub": "alice", "aud": "nereus"}),
		"no sub":       sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"aud": "nereus"}),
		"wrong aud":    sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "aud": "other"}),
		"HS512":        sign(t, jwt.SigningMethodHS512, secret, jwt.MapClaims{"sub": "alice", "aud": "nereus"}),
		"alg none":     sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "alice", "aud": "nereus"}),
		"not a token":  "garbage",
		"not yet":      sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "nbf": now.Add(time.Hour).Unix(), "aud": "nereus"}),
		"empty string": "",
	} {
		if _, err := v.Validate(tok, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(Config{SecretKeyFile: write(t, "short", []byte("short"))}); err == nil {
		t.Fatal("a 5-byte HS256 secret accepted")
	}
}

func TestRS256(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	for name, file := range map[string][]byte{
		"pem": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		"der": der, // Pulsar's `tokens create-key-pair` output
	} {
		v, err := New(Config{PublicKeyFile: write(t, name, file)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tok := sign(t, jwt.SigningMethodRS256, key, jwt.MapClaims{"sub": "svc"})
		if c, err := v.Validate(tok, time.Now()); err != nil || c.Role != "svc" || !c.ExpiresAt.IsZero() {
			t.Fatalf("%s: %+v %v", name, c, err)
		}
		// Algorithm confusion: an HS256 token keyed with the public key's
		// bytes must not pass.
		forged := sign(t, jwt.SigningMethodHS256, der, jwt.MapClaims{"sub": "svc"})
		if _, err := v.Validate(forged, time.Now()); err == nil {
			t.Fatalf("%s: HS256 token signed with the public key accepted", name)
		}
	}
}

// TestReloadRotatesKey: a rotated secret takes effect on Reload and Watch;
// tokens of the old key stop validating; a broken file keeps the current
// key instead of locking everyone out.
func TestReloadRotatesKey(t *testing.T) {
	oldKey := []byte("0123456789abcdef0123456789abcdef")
	newKey := []byte("fedcba9876543210fedcba9876543210")
	path := write(t, "secret", oldKey)
	v, err := New(Config{SecretKeyFile: path})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	oldTok := sign(t, jwt.SigningMethodHS256, oldKey, jwt.MapClaims{"sub": "alice"})
	newTok := sign(t, jwt.SigningMethodHS256, newKey, jwt.MapClaims{"sub": "bob"})
	if _, err := v.Validate(oldTok, now); err != nil {
		t.Fatalf("old token before rotation: %v", err)
	}
	if changed, err := v.Reload(); changed || err != nil {
		t.Fatalf("reload of an unchanged file: changed=%v err=%v", changed, err)
	}

	// A truncated file (a rotation caught half-written) is refused.
	if err := os.WriteFile(path, newKey[:8], 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := v.Reload(); changed || err == nil {
		t.Fatalf("reload of a short key: changed=%v err=%v", changed, err)
	}
	if _, err := v.Validate(oldTok, now); err != nil {
		t.Fatalf("old key must stay after a failed reload: %v", err)
	}

	if err := os.WriteFile(path, newKey, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reported := make(chan bool, 4)
	go v.Watch(ctx, 5*time.Millisecond, func(changed bool, err error) {
		if err == nil {
			reported <- changed
		}
	})
	select {
	case <-reported:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not pick up the rotated key")
	}
	if c, err := v.Validate(newTok, now); err != nil || c.Role != "bob" {
		t.Fatalf("new token after rotation: %+v %v", c, err)
	}
	if _, err := v.Validate(oldTok, now); !errors.Is(err, ErrInvalid) {
		t.Fatalf("old token after rotation: %v", err)
	}
	if v.Reloads() != 1 || v.Failures() != 1 {
		t.Fatalf("reloads=%d failures=%d, want 1 and 1", v.Reloads(), v.Failures())
	}
}
