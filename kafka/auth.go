package kafka

import (
	"context"
	"encoding/binary"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/internal/authtoken"
	"github.com/nereusstream/nereus-go/kafka/ksasl"
	"github.com/nereusstream/nereus-go/listener"
)

// SecurityConfig is the Kafka front end's authentication and
// authorization. The zero value authenticates nobody: every connection is
// User:ANONYMOUS (or, on a TLS listener with a verified client
// certificate, User:<certificate subject>), and SASL listeners accept the
// default mechanisms.
type SecurityConfig struct {
	// SASLMechanisms are the mechanisms SASL listeners accept (Kafka's
	// sasl.enabled.mechanisms). Default: SCRAM-SHA-256, SCRAM-SHA-512,
	// PLAIN (checked against the stored SCRAM credentials), plus
	// OAUTHBEARER when Tokens is set.
	SASLMechanisms []string
	// Tokens validates OAUTHBEARER tokens (JWT; the role claim is the
	// user). Nil disables OAUTHBEARER.
	Tokens *authtoken.Validator
	// Authorizer turns on ACL authorization (Kafka's authorizer.class.name
	// = StandardAuthorizer): every request is checked against the ACLs in
	// metadata (DescribeAcls / CreateAcls / DeleteAcls manage them).
	// Without it everything is allowed and the ACL APIs answer
	// SECURITY_DISABLED.
	Authorizer bool
	// SuperUsers are principals allowed everything (super.users, e.g.
	// "User:admin").
	SuperUsers []string
	// AllowEveryoneIfNoACL allows an operation on a resource no ACL
	// mentions (allow.everyone.if.no.acl.found; default false: deny).
	AllowEveryoneIfNoACL bool
	// MaxReauth is Kafka's connections.max.reauth.ms: a SASL session
	// lives this long (or until its token expires, whichever is first)
	// and must re-authenticate (KIP-368) before sending more requests, or
	// the connection is closed. 0 (default) never expires sessions.
	MaxReauth time.Duration
}

func (c *SecurityConfig) setDefaults() {
	if len(c.SASLMechanisms) == 0 {
		c.SASLMechanisms = []string{ksasl.ScramSHA256, ksasl.ScramSHA512, ksasl.Plain}
		if c.Tokens != nil {
			c.SASLMechanisms = append(c.SASLMechanisms, ksasl.OAuthBearer)
		}
	}
}

// maxUnauthenticatedFrame bounds frames read before SASL authentication
// completes (Kafka's sasl.server.max.receive.size default).
const maxUnauthenticatedFrame = 512 << 10

// anonymous is Kafka's principal of unauthenticated clients.
const anonymous = "User:ANONYMOUS"

// saslState is where a connection is in the SASL exchange (SASL listeners).
type saslState uint8

const (
	// saslNone: a listener without SASL; the principal is fixed at accept.
	saslNone saslState = iota
	// saslHandshake: waiting for SaslHandshake (ApiVersions allowed).
	saslHandshake
	// saslAuthenticate: mechanism chosen, SaslAuthenticate rounds.
	saslAuthenticate
	// saslRawAuthenticate: mechanism chosen by SaslHandshake v0; the
	// client now sends bare length-prefixed SASL tokens, no Kafka header.
	saslRawAuthenticate
	// saslDone: authenticated; requests flow until the session expires.
	saslDone
)

// connAuth is a connection's authentication state. It is touched only by
// the connection's reader goroutine (handlers' synchronous parts run
// there), so it needs no lock.
type connAuth struct {
	state     saslState
	principal string
	mech      string
	exchange  ksasl.Exchange
	// expires is when the SASL session ends (zero: never); a request
	// other than a re-authentication after it closes the connection.
	expires time.Time
	// reauthing is set between a re-authentication's SaslHandshake and
	// its final SaslAuthenticate; other requests still flow meanwhile.
	reauthing bool
	// lifetimeOK: the client used SaslAuthenticate v1+, so it was told
	// the session lifetime and may re-authenticate.
	lifetimeOK bool
	// closeAfter makes the reader stop after the current request: its
	// response is written, then the connection closes (failed
	// authentication, as Kafka does).
	closeAfter bool
}

// initAuth sets the connection's starting principal from its listener.
func (c *conn) initAuth() {
	c.auth.principal = anonymous
	if c.ln.Spec().Security.SASL {
		c.auth.state = saslHandshake
		return
	}
	if cert := listener.PeerCertificate(c.nc); cert != nil {
		// Kafka's default SSL principal: the certificate's distinguished
		// name in RFC 2253 form.
		c.auth.principal = "User:" + cert.Subject.String()
	}
}

// gate is the authentication check every request passes before its
// handler runs. A false answer closes the connection (Kafka closes a
// connection that sends anything but ApiVersions and the SASL exchange
// before authenticating, or anything after its session expired).
func (c *conn) gate(key int16, now time.Time) (ok bool, why string) {
	a := &c.auth
	switch a.state {
	case saslNone:
		return true, ""
	case saslHandshake:
		if key == kmsg.ApiVersions.Int16() || key == kmsg.SASLHandshake.Int16() {
			return true, ""
		}
		return false, "request before SASL authentication"
	case saslAuthenticate:
		if key == kmsg.SASLAuthenticate.Int16() {
			return true, ""
		}
		return false, "request during SASL authentication"
	}
	if !a.expires.IsZero() && !now.Before(a.expires) && !a.reauthing &&
		key != kmsg.SASLHandshake.Int16() && key != kmsg.ApiVersions.Int16() {
		return false, "SASL session expired without re-authentication"
	}
	return true, ""
}

// principal is the authenticated principal of the request's connection.
func (r *request) principal() string { return r.c.auth.principal }

func (s *Server) saslEnabled(mech string) bool {
	for _, m := range s.cfg.Security.SASLMechanisms {
		if m == mech {
			return true
		}
	}
	return false
}

// newExchange starts a server exchange of mech with this server's
// credential store and token validator.
func (s *Server) newExchange(mech string) (ksasl.Exchange, error) {
	lookup := func(user, mech string) (ksasl.ScramCredential, bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return s.auth.ScramCredential(ctx, user, mech)
	}
	var validate func(string) (string, time.Time, error)
	if v := s.cfg.Security.Tokens; v != nil {
		validate = func(tok string) (string, time.Time, error) {
			c, err := v.Validate(tok, s.cfg.Now())
			return c.Role, c.ExpiresAt, err
		}
	}
	return ksasl.New(mech, lookup, validate)
}

// handleRawSASL runs one bare SASL token of a SaslHandshake v0 exchange
// and queues the bare answer (Kafka frames it with a length only). A
// failure closes the connection without an answer, as Kafka does for v0.
func (c *conn) handleRawSASL(tok []byte) error {
	a := &c.auth
	out, done, err := a.exchange.Step(tok)
	if err != nil {
		c.s.stats.AuthFailures.Add(1)
		a.closeAfter = true
		return &authClose{why: "SASL authentication failed: " + err.Error()}
	}
	if done {
		a.state, a.principal, a.exchange = saslDone, "User:"+a.exchange.Result().User, nil
		c.s.stats.AuthSuccesses.Add(1)
		c.s.log.Debug("kafka: SASL authenticated (v0)", "remote", c.remote, "principal", a.principal, "mechanism", a.mech)
	}
	sl := &slot{key: kmsg.SASLAuthenticate.Int16(), start: time.Now(), done: make(chan struct{}),
		resp: rawSASLToken{SASLAuthenticateResponse: kmsg.NewPtrSASLAuthenticateResponse(), tok: out}}
	close(sl.done)
	return c.enqueue(sl)
}

// rawSASLToken is a bare SASL token answer: a length and the bytes.
type rawSASLToken struct {
	*kmsg.SASLAuthenticateResponse
	tok []byte
}

func (r rawSASLToken) frame(int32) net.Buffers {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(r.tok)))
	return net.Buffers{n[:], r.tok}
}
