package authtoken

import (
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
