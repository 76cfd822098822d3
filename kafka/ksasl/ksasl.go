// Package ksasl is the server side of the Kafka SASL mechanisms Nereus
// speaks: PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802,
// RFC 7677, with Kafka's rules: no channel binding, authzid equal to the
// user, no delegation-token extension) and OAUTHBEARER (RFC 7628, a JWT
// checked by a caller-supplied validator).
//
// Each mechanism is an Exchange: a state machine fed the client's messages
// (the SaslAuthenticate auth bytes) that answers the server's messages and
// finally a principal or an error. It owns SCRAM credential derivation
// (salted password → stored key and server key) and verification.
//
// It must never do I/O itself (credentials come through a lookup
// function), never hold or log a password or a salted password beyond the
// call that derives keys from it, and never panic on hostile bytes (a fuzz
// target checks this).
package ksasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// Mechanism names, as Kafka spells them.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
)

// Kafka's SCRAM iteration bounds (ScramMechanism.minIterations, and the
// 16384 cap the broker's credential validation applies).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// ScramMechanisms lists the SCRAM mechanisms in Kafka's type order
// (DescribeUserScramCredentials mechanism 1 = SHA-256, 2 = SHA-512).
var ScramMechanisms = []string{ScramSHA256, ScramSHA512}

// ScramType is the wire number of a SCRAM mechanism (0 = unknown).
func ScramType(mech string) int8 {
	switch mech {
	case ScramSHA256:
		return 1
	case ScramSHA512:
		return 2
	}
	return 0
}

// ScramName is the mechanism of a wire number ("" = unknown).
func ScramName(t int8) string {
	switch t {
	case 1:
		return ScramSHA256
	case 2:
		return ScramSHA512
	}
	return ""
}

func hashOf(mech string) func() hash.Hash {
	switch mech {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	return nil
}

// ErrAuthentication matches (errors.Is) every failed exchange: bad
// credentials, unknown user, malformed client message. The error's text
// is Kafka's message for the case and safe to send to the client (it names
// no secret).
var ErrAuthentication = errors.New("authentication failed")

// authError is a failed exchange with the message the client gets.
type authError struct{ msg string }

func (e *authError) Error() string        { return e.msg }
func (e *authError) Is(target error) bool { return target == ErrAuthentication }

func authErr(format string, args ...any) error {
	return &authError{msg: fmt.Sprintf(format, args...)}
}

// ScramCredential is what the server stores for one user and mechanism:
// never the password, never the salted password.
type ScramCredential struct {
	Mechanism  string
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// SaltPassword is SCRAM's Hi(password, salt, iterations).
func SaltPassword(mech, password string, salt []byte, iterations int) ([]byte, error) {
	h := hashOf(mech)
	if h == nil {
		return nil, fmt.Errorf("ksasl: %q is not a SCRAM mechanism", mech)
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// NewScramCredential derives the stored and server keys from a salted
// password (what Kafka's AlterUserScramCredentials carries: the client
// salts, the password never travels).
func NewScramCredential(mech string, saltedPassword, salt []byte, iterations int) (ScramCredential, error) {
	h := hashOf(mech)
	if h == nil {
		return ScramCredential{}, fmt.Errorf("ksasl: %q is not a SCRAM mechanism", mech)
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return ScramCredential{}, fmt.Errorf("ksasl: iterations %d outside [%d, %d]", iterations, MinIterations, MaxIterations)
	}
	if len(salt) == 0 || len(saltedPassword) != h().Size() {
		return ScramCredential{}, fmt.Errorf("ksasl: %s needs a salt and a %d-byte salted password", mech, h().Size())
	}
	clientKey := mac(h, saltedPassword, []byte("Client Key"))
	stored := h()
	stored.Write(clientKey)
	return ScramCredential{Mechanism: mech, Salt: bytes.Clone(salt), StoredKey: stored.Sum(nil),
		ServerKey: mac(h, saltedPassword, []byte("Server Key")), Iterations: iterations}, nil
}

// NewScramCredentialFromPassword salts password with a fresh random salt.
func NewScramCredentialFromPassword(mech, password string, iterations int) (ScramCredential, error) {
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return ScramCredential{}, err
	}
	sp, err := SaltPassword(mech, password, salt, iterations)
	if err != nil {
		return ScramCredential{}, err
	}
	return NewScramCredential(mech, sp, salt, iterations)
}

// VerifyPassword checks a clear-text password against a credential (SASL
// PLAIN authenticates against the stored SCRAM credentials).
func (c ScramCredential) VerifyPassword(password string) bool {
	h := hashOf(c.Mechanism)
	if h == nil {
		return false
	}
	sp, err := SaltPassword(c.Mechanism, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	stored := h()
	stored.Write(mac(h, sp, []byte("Client Key")))
	return subtle.ConstantTimeCompare(stored.Sum(nil), c.StoredKey) == 1
}

func mac(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// Result is a finished exchange.
type Result struct {
	// User is the authenticated name; the Kafka principal is "User:"+User.
	User string
	// ExpiresAt bounds the session (OAUTHBEARER token expiry); zero means
	// no bound from the credential.
	ExpiresAt time.Time
}

// Exchange is one server-side SASL conversation. Step is called with each
// client message in order; it returns the server's answer, and done when
// the conversation is over (then Result is valid if err is nil). An error
// ends the conversation: the client failed to authenticate.
type Exchange interface {
	Step(msg []byte) (resp []byte, done bool, err error)
	Result() Result
}

// Lookup returns a user's credential for a SCRAM mechanism; ok is false
// for a user without one. An error is a store failure (not the client's
// fault), reported as such.
type Lookup func(user, mech string) (cred ScramCredential, ok bool, err error)

// ErrStore wraps lookup failures: the exchange could not be judged.
var ErrStore = errors.New("credential store unavailable")

// New starts an exchange of mech. validate checks an OAUTHBEARER token and
// returns its principal name and expiry (nil: OAUTHBEARER unavailable).
func New(mech string, lookup Lookup, validate func(token string) (user string, exp time.Time, err error)) (Exchange, error) {
	switch mech {
	case Plain:
		return &plainExchange{lookup: lookup}, nil
	case ScramSHA256, ScramSHA512:
		return &scramExchange{mech: mech, h: hashOf(mech), lookup: lookup}, nil
	case OAuthBearer:
		if validate != nil {
			return &oauthExchange{validate: validate}, nil
		}
	}
	return nil, fmt.Errorf("ksasl: unsupported mechanism %q", mech)
}

// ---- PLAIN ----

type plainExchange struct {
	lookup Lookup
	res    Result
}

func (p *plainExchange) Result() Result { return p.res }

// Step: "authzid NUL authcid NUL passwd" (RFC 4616). Kafka's messages.
func (p *plainExchange) Step(msg []byte) ([]byte, bool, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, true, authErr("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts))
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" {
		return nil, true, authErr("Authentication failed: username not specified")
	}
	if pass == "" {
		return nil, true, authErr("Authentication failed: password not specified")
	}
	if authz != "" && authz != user {
		return nil, true, authErr("Authentication failed: Client requested an authorization id that is different from username")
	}
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		cred, ok, err := p.lookup(user, mech)
		if err != nil {
			return nil, true, fmt.Errorf("%w: %v", ErrStore, err)
		}
		if ok {
			if !cred.VerifyPassword(pass) {
				break
			}
			p.res = Result{User: user}
			return nil, true, nil
		}
	}
	return nil, true, authErr("Authentication failed: Invalid username or password")
}

// ---- SCRAM ----

type scramExchange struct {
	mech   string
	h      func() hash.Hash
	lookup Lookup

	step        int
	gs2Header   string
	clientFirst string // client-first-message-bare
	serverFirst string
	nonce       string
	cred        ScramCredential
	res         Result
}

func (s *scramExchange) Result() Result { return s.res }

func (s *scramExchange) Step(msg []byte) ([]byte, bool, error) {
	switch s.step {
	case 0:
		s.step = 1
		return s.first(string(msg))
	case 1:
		s.step = 2
		return s.final(string(msg))
	}
	return nil, true, authErr("unexpected SCRAM message after the exchange ended")
}

func (s *scramExchange) first(m string) ([]byte, bool, error) {
	// gs2-header: cbind-flag "," [ "a=" authzid ] ","
	flag, rest, ok := strings.Cut(m, ",")
	if !ok {
		return nil, true, authErr("invalid SCRAM client first message")
	}
	switch {
	case flag == "n" || flag == "y":
	case strings.HasPrefix(flag, "p="):
		return nil, true, authErr("SCRAM channel binding is not supported")
	default:
		return nil, true, authErr("invalid SCRAM channel binding flag")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok || (authz != "" && !strings.HasPrefix(authz, "a=")) {
		return nil, true, authErr("invalid SCRAM client first message")
	}
	s.gs2Header = flag + "," + authz + ","
	s.clientFirst = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, true, authErr("invalid SCRAM client first message")
	}
	user, err := unescapeSaslName(attrs[0][2:])
	if err != nil || user == "" {
		return nil, true, authErr("invalid SCRAM user name")
	}
	if authz != "" {
		az, err := unescapeSaslName(authz[2:])
		if err != nil || az != user {
			return nil, true, authErr("Authentication failed: Client requested an authorization id that is different from username")
		}
	}
	for _, ext := range attrs[2:] {
		// Kafka extensions (key=value); tokenauth=true would ask for
		// delegation-token authentication, which Nereus does not have.
		if k, v, _ := strings.Cut(ext, "="); k == "tokenauth" && strings.EqualFold(v, "true") {
			return nil, true, authErr("Authentication failed: delegation tokens are not supported")
		}
	}
	cnonce := attrs[1][2:]
	if cnonce == "" || strings.ContainsAny(cnonce, ",") {
		return nil, true, authErr("invalid SCRAM client nonce")
	}
	cred, found, err := s.lookup(user, s.mech)
	if err != nil {
		return nil, true, fmt.Errorf("%w: %v", ErrStore, err)
	}
	if !found {
		return nil, true, authErr("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", s.mech)
	}
	s.cred = cred
	snonce := make([]byte, 24)
	if _, err := rand.Read(snonce); err != nil {
		return nil, true, fmt.Errorf("%w: %v", ErrStore, err)
	}
	s.nonce = cnonce + base64.RawURLEncoding.EncodeToString(snonce)
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	s.res.User = user
	return []byte(s.serverFirst), false, nil
}

func (s *scramExchange) final(m string) ([]byte, bool, error) {
	fail := func() ([]byte, bool, error) {
		return nil, true, authErr("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", s.mech)
	}
	i := strings.LastIndex(m, ",p=")
	if i < 0 {
		return nil, true, authErr("invalid SCRAM client final message")
	}
	withoutProof, proofB64 := m[:i], m[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, true, authErr("invalid SCRAM client final message")
	}
	if attrs[0][2:] != base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return nil, true, authErr("SCRAM channel binding does not match the first message")
	}
	// Kafka's ScramSaslServer accepts a final nonce that ends with the
	// combined nonce: librdkafka sends its client nonce once more in front
	// of it. The random server part must be there either way (no replay).
	if !strings.HasSuffix(attrs[1][2:], s.nonce) {
		return nil, true, authErr("Invalid client nonce in the final client message.")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != s.h().Size() {
		return fail()
	}
	authMsg := []byte(s.clientFirst + "," + s.serverFirst + "," + withoutProof)
	sig := mac(s.h, s.cred.StoredKey, authMsg)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ sig[j]
	}
	stored := s.h()
	stored.Write(clientKey)
	if subtle.ConstantTimeCompare(stored.Sum(nil), s.cred.StoredKey) != 1 {
		return fail()
	}
	serverSig := mac(s.h, s.cred.ServerKey, authMsg)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), true, nil
}

// unescapeSaslName undoes SCRAM's saslname escaping (=2C is ',', =3D '=').
func unescapeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("bad escape")
		}
		switch s[i+1 : i+3] {
		case "2C":
			b.WriteByte(',')
		case "3D":
			b.WriteByte('=')
		default:
			return "", errors.New("bad escape")
		}
		i += 2
	}
	return b.String(), nil
}

// ---- OAUTHBEARER ----

type oauthExchange struct {
	validate func(string) (string, time.Time, error)
	failed   error
	done     bool
	res      Result
}

func (o *oauthExchange) Result() Result { return o.res }

// Step parses the RFC 7628 initial response
// "gs2-header \x01 auth=Bearer TOKEN \x01 [key=value \x01]* \x01". An
// invalid token is answered with the RFC's JSON error; the client then
// sends a single \x01 and the exchange fails (Kafka's
// OAuthBearerSaslServer does the same).
func (o *oauthExchange) Step(msg []byte) ([]byte, bool, error) {
	if o.failed != nil {
		return nil, true, o.failed
	}
	if o.done {
		return nil, true, authErr("unexpected OAUTHBEARER message")
	}
	m := string(msg)
	header, rest, ok := strings.Cut(m, "\x01")
	if !ok || !(strings.HasPrefix(header, "n,") || strings.HasPrefix(header, "y,")) || !strings.HasSuffix(rest, "\x01\x01") && rest != "\x01" {
		return nil, true, authErr("invalid OAUTHBEARER initial client response")
	}
	var token string
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "\x01"), "\x01") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, true, authErr("invalid OAUTHBEARER key/value")
		}
		if k == "auth" {
			scheme, tok, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
				return nil, true, authErr("invalid OAUTHBEARER auth value")
			}
			token = tok
		}
	}
	if token == "" {
		return nil, true, authErr("OAUTHBEARER: no token")
	}
	user, exp, err := o.validate(token)
	if err != nil {
		o.failed = authErr("Authentication failed: %v", err)
		return []byte(`{"status":"invalid_token"}`), false, nil
	}
	o.done = true
	o.res = Result{User: user, ExpiresAt: exp}
	return nil, true, nil
}
