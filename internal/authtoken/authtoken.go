// Package authtoken validates the JSON Web Tokens every Nereus protocol
// accepts as a bearer credential: Pulsar's token authentication (the
// `token:` auth data of CONNECT and AUTH_RESPONSE, `Authorization: Bearer`
// on its REST paths), the admin REST API's bearer tokens and Kafka's
// SASL/OAUTHBEARER. It is one validator so a token minted for one protocol
// means the same role in all of them.
//
// Tokens are signed with HS256 (a shared secret key file, as Pulsar's
// tokenSecretKey) or RS256 (a public key file, PEM or DER, as Pulsar's
// tokenPublicKey); "none" and every other algorithm are refused. The role is
// the claim RoleClaim ("sub" by default); exp and nbf are enforced.
//
// The key file is re-read by Reload (SIGHUP) and Watch (a poll for file
// changes), so a rotated key takes effect without a restart. A reload that
// fails — a missing, truncated or foreign file — keeps the previous key:
// a broken rotation must not lock every client out, and it must not leave
// the server validating against nothing.
//
// It must never log a token or a key, and never accept a token whose
// signature it did not verify.
package authtoken

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Config names the key material. Exactly one of SecretKeyFile and
// PublicKeyFile is set.
type Config struct {
	// SecretKeyFile holds the raw HS256 secret (the bytes of Pulsar's
	// `pulsar tokens create-secret-key --output FILE`).
	SecretKeyFile string
	// PublicKeyFile holds the RS256 public key, PEM ("PUBLIC KEY" or "RSA
	// PUBLIC KEY") or DER (Pulsar's `create-key-pair` output).
	PublicKeyFile string
	// RoleClaim is the claim naming the role (default "sub").
	RoleClaim string
	// Audience, when set, must appear in the token's "aud" claim.
	Audience string
	// Leeway tolerates clock skew on exp and nbf (default 0, as Pulsar).
	Leeway time.Duration
}

// Configured reports whether a key is named.
func (c Config) Configured() bool { return c.SecretKeyFile != "" || c.PublicKeyFile != "" }

// Errors. Validate wraps one of them; match with errors.Is.
var (
	// ErrExpired: the token's exp is in the past (or nbf in the future).
	ErrExpired = errors.New("authtoken: token expired or not yet valid")
	// ErrInvalid: malformed, wrong algorithm, bad signature, no role, or
	// wrong audience.
	ErrInvalid = errors.New("authtoken: invalid token")
)

// Validator checks tokens. It is safe for concurrent use.
type Validator struct {
	cfg    Config
	alg    string
	parser *jwt.Parser
	// key is the current verification key; Validate loads it once per
	// token, so a concurrent reload never mixes two keys in one check.
	key atomic.Pointer[keyMaterial]

	reloadMu sync.Mutex // serializes Reload
	reloads  atomic.Int64
	failures atomic.Int64
}

// keyMaterial is one loaded key and the file bytes it came from (to tell
// a changed file from an unchanged one without parsing it again).
type keyMaterial struct {
	raw []byte
	key any
}

// New loads the key.
func New(cfg Config) (*Validator, error) {
	if (cfg.SecretKeyFile == "") == (cfg.PublicKeyFile == "") {
		return nil, errors.New("authtoken: set exactly one of the secret key file (HS256) and the public key file (RS256)")
	}
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = "sub"
	}
	v := &Validator{cfg: cfg}
	if cfg.SecretKeyFile != "" {
		v.alg = jwt.SigningMethodHS256.Alg()
	} else {
		v.alg = jwt.SigningMethodRS256.Alg()
	}
	m, err := v.load()
	if err != nil {
		return nil, err
	}
	v.key.Store(m)
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{v.alg}), jwt.WithLeeway(cfg.Leeway)}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

// load reads and parses the configured key file.
func (v *Validator) load() (*keyMaterial, error) {
	if v.cfg.SecretKeyFile != "" {
		b, err := os.ReadFile(v.cfg.SecretKeyFile)
		if err != nil {
			return nil, fmt.Errorf("authtoken: secret key file: %w", err)
		}
		if len(b) < 32 {
			return nil, fmt.Errorf("authtoken: secret key file %s holds %d bytes; HS256 needs at least 32", v.cfg.SecretKeyFile, len(b))
		}
		return &keyMaterial{raw: b, key: b}, nil
	}
	raw, err := os.ReadFile(v.cfg.PublicKeyFile)
	if err != nil {
		return nil, fmt.Errorf("authtoken: public key file: %w", err)
	}
	k, err := parsePublicKey(v.cfg.PublicKeyFile, raw)
	if err != nil {
		return nil, err
	}
	return &keyMaterial{raw: raw, key: k}, nil
}

// Reload re-reads the key file. It reports whether the key changed; on an
// error the previous key stays in use.
func (v *Validator) Reload() (changed bool, err error) {
	v.reloadMu.Lock()
	defer v.reloadMu.Unlock()
	m, err := v.load()
	if err != nil {
		v.failures.Add(1)
		return false, err
	}
	if bytes.Equal(m.raw, v.key.Load().raw) {
		return false, nil
	}
	v.key.Store(m)
	v.reloads.Add(1)
	return true, nil
}

// Watch calls Reload every interval until ctx ends (interval <= 0: never)
// and hands each outcome that is a change or an error to report (which
// must not log key bytes; the error texts name only the file).
func (v *Validator) Watch(ctx context.Context, interval time.Duration, report func(changed bool, err error)) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if changed, err := v.Reload(); changed || err != nil {
				report(changed, err)
			}
		}
	}
}

// Reloads and Failures count applied key changes and failed reloads.
func (v *Validator) Reloads() int64  { return v.reloads.Load() }
func (v *Validator) Failures() int64 { return v.failures.Load() }

func parsePublicKey(path string, raw []byte) (*rsa.PublicKey, error) {
	der := raw
	if blk, _ := pem.Decode(raw); blk != nil {
		der = blk.Bytes
	}
	if k, err := x509.ParsePKIXPublicKey(der); err == nil {
		if rk, ok := k.(*rsa.PublicKey); ok {
			return rk, nil
		}
		return nil, fmt.Errorf("authtoken: public key file %s: not an RSA key", path)
	}
	if k, err := x509.ParsePKCS1PublicKey(der); err == nil {
		return k, nil
	}
	return nil, fmt.Errorf("authtoken: public key file %s: not a PEM or DER RSA public key", path)
}

// Claims is what a valid token says.
type Claims struct {
	// Role is the RoleClaim value.
	Role string
	// ExpiresAt is the token's exp (zero: never expires).
	ExpiresAt time.Time
}

// Validate checks a compact JWS token's algorithm, signature, exp, nbf
// and audience at now, and returns its role.
func (v *Validator) Validate(token string, now time.Time) (Claims, error) {
	claims := jwt.MapClaims{}
	key := v.key.Load().key
	_, err := v.parser.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return key, nil })
	if err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) || errors.Is(err, jwt.ErrTokenNotValidYet) {
			return Claims{}, fmt.Errorf("%w: %v", ErrExpired, err)
		}
		return Claims{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// jwt validates exp/nbf against the wall clock; re-check against now
	// so callers (and tests) decide the instant.
	var c Claims
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		c.ExpiresAt = exp.Time
		if !now.Before(exp.Time.Add(v.cfg.Leeway)) {
			return Claims{}, fmt.Errorf("%w: expired at %s", ErrExpired, exp.Time.UTC().Format(time.RFC3339))
		}
	}
	role, _ := claims[v.cfg.RoleClaim].(string)
	if role == "" {
		return Claims{}, fmt.Errorf("%w: no %q claim", ErrInvalid, v.cfg.RoleClaim)
	}
	c.Role = role
	return c, nil
}
