package kafka

// SaslAuthenticate: v0-2
//
// Behavior:
//   - Carries the SASL exchange chosen by SaslHandshake (kafka/ksasl:
//     PLAIN against the stored SCRAM credentials, SCRAM-SHA-256/512,
//     OAUTHBEARER with a JWT). Success makes the connection's principal
//     User:<name>; a failure answers SASL_AUTHENTICATION_FAILED with
//     Kafka's message and closes the connection after the answer.
//   - v1+: session_lifetime_ms is the time to the session's end when
//     re-authentication is configured (connections.max.reauth.ms, bounded
//     by an OAUTHBEARER token's expiry); a request other than a
//     re-authentication after it closes the connection (KIP-368). A
//     re-authentication must keep the principal.
//   - Outside an exchange (no SASL listener, before SaslHandshake, after
//     authentication without a re-authentication) it answers
//     ILLEGAL_SASL_STATE.
//
// Version notes:
//   - v1: session_lifetime_ms (KIP-368).
//   - v2: flexible.

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/ksasl"
)

func init() { regKey(36, 0, 2, handleSASLAuthenticate) }

func handleSASLAuthenticate(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	s, a := r.s, &r.c.auth
	fail := func(code int16, msg string) (kmsg.Response, func() kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		a.closeAfter = true
		s.stats.AuthFailures.Add(1)
		s.log.Info("kafka: SASL authentication failed", "remote", r.c.remote, "mechanism", a.mech, "reason", msg)
		return resp, nil, nil
	}
	if a.exchange == nil {
		msg := "SaslAuthenticate request received outside a SASL exchange"
		resp.ErrorCode, resp.ErrorMessage = kerr.IllegalSaslState.Code, &msg
		if a.state != saslNone && a.state != saslDone {
			a.closeAfter = true
		}
		return resp, nil, nil
	}
	out, done, err := a.exchange.Step(req.SASLAuthBytes)
	if err != nil {
		msg := err.Error()
		if !errors.Is(err, ksasl.ErrAuthentication) {
			msg = "Authentication failed due to an unexpected error: " + msg
		}
		return fail(kerr.SaslAuthenticationFailed.Code, msg)
	}
	resp.SASLAuthBytes = out
	if !done {
		return resp, nil, nil
	}
	res := a.exchange.Result()
	principal := "User:" + res.User
	if a.reauthing && principal != a.principal {
		return fail(kerr.SaslAuthenticationFailed.Code,
			fmt.Sprintf("Cannot change principals during re-authentication from %s: %s", a.principal, principal))
	}
	now := s.cfg.Now()
	if !res.ExpiresAt.IsZero() && !now.Before(res.ExpiresAt) {
		return fail(kerr.SaslAuthenticationFailed.Code, "Authentication failed: credential expired")
	}
	a.state, a.principal, a.exchange, a.reauthing = saslDone, principal, nil, false
	a.expires, a.lifetimeOK = time.Time{}, req.Version >= 1
	if max := s.cfg.Security.MaxReauth; max > 0 && req.Version >= 1 {
		life := max
		if !res.ExpiresAt.IsZero() {
			life = min(life, res.ExpiresAt.Sub(now))
		}
		a.expires = now.Add(life)
		resp.SessionLifetimeMillis = life.Milliseconds()
	}
	s.stats.AuthSuccesses.Add(1)
	s.log.Debug("kafka: SASL authenticated", "remote", r.c.remote, "principal", principal, "mechanism", a.mech,
		"session_lifetime", time.Duration(resp.SessionLifetimeMillis)*time.Millisecond)
	return resp, nil, nil
}
