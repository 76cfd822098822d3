package kafka

// SaslHandshake: v0-1
//
// Behavior:
//   - On a SASL listener (SASL_PLAINTEXT, SASL_SSL) it picks the mechanism
//     of the SaslAuthenticate rounds that follow. An unknown or disabled
//     mechanism gets UNSUPPORTED_SASL_MECHANISM with the enabled list, and
//     the connection is closed after the answer (as Kafka does).
//   - After authentication it starts a KIP-368 re-authentication, allowed
//     only when the client was given a session lifetime and only with the
//     same mechanism; other requests keep flowing meanwhile.
//   - On a listener without SASL it answers ILLEGAL_SASL_STATE.
//
// Version notes:
//   - v0: the SASL tokens that follow are bare length-prefixed frames
//     without a Kafka header (no session lifetime, no re-authentication).
//     librdkafka's feature detection also needs v0 in the advertised range.
//   - v1: the exchange is framed in SaslAuthenticate.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(17, 0, 1, handleSASLHandshake) }

func handleSASLHandshake(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	s, a := r.s, &r.c.auth
	resp.SupportedMechanisms = append([]string(nil), s.cfg.Security.SASLMechanisms...)
	switch {
	case a.state == saslNone, a.state == saslAuthenticate:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		if a.state == saslAuthenticate {
			a.closeAfter = true
		}
		return resp, nil, nil
	case a.state == saslDone && (a.expires.IsZero() || !a.lifetimeOK || a.reauthing || req.Version == 0):
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil, nil
	case !s.saslEnabled(req.Mechanism), a.state == saslDone && req.Mechanism != a.mech:
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		a.closeAfter = true
		s.stats.AuthFailures.Add(1)
		s.log.Info("kafka: SASL mechanism refused", "remote", r.c.remote, "mechanism", req.Mechanism, "reauth", a.state == saslDone)
		return resp, nil, nil
	}
	ex, err := s.newExchange(req.Mechanism)
	if err != nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		a.closeAfter = true
		return resp, nil, nil
	}
	a.mech, a.exchange = req.Mechanism, ex
	switch {
	case a.state == saslDone:
		a.reauthing = true
	case req.Version == 0:
		a.state = saslRawAuthenticate
	default:
		a.state = saslAuthenticate
	}
	return resp, nil, nil
}
