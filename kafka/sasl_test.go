package kafka

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/nereusstream/nereus-go/kafka/ksasl"
	"github.com/nereusstream/nereus-go/listener"
)

// saslServer serves cfg on a SASL_PLAINTEXT listener with alice/alice-secret
// (both SCRAM mechanisms); now is the server clock.
func saslServer(t *testing.T, cfg Config, now *atomic.Int64) (*testServer, string) {
	t.Helper()
	if now != nil {
		now.Store(time.Now().UnixNano())
		cfg.Now = func() time.Time { return time.Unix(0, now.Load()) }
	}
	s := startServer(t, cfg, nil)
	ln, err := listener.Listen(listener.Spec{Protocol: listener.Kafka, Name: "SASL_PLAINTEXT",
		Security: listener.Security{SASL: true}, Bind: "127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	for _, m := range ksasl.ScramMechanisms {
		c, err := ksasl.NewScramCredentialFromPassword(m, "alice-secret", 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.auth.UpsertScram(context.Background(), "alice", c); err != nil {
			t.Fatal(err)
		}
	}
	return s, ln.Addr().String()
}

// authenticate runs a client mechanism over raw SaslHandshake v1 /
// SaslAuthenticate v1 and returns the final answer.
func (c *rawClient) authenticate(m sasl.Mechanism) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, m.Name()
	if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		c.t.Fatalf("handshake %s: error %d (supported %v)", m.Name(), r.ErrorCode, r.SupportedMechanisms)
	}
	sess, msg, err := m.Authenticate(context.Background(), "x")
	if err != nil {
		c.t.Fatal(err)
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, msg
		resp := c.do(req).(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			return resp
		}
		done, next, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil {
			c.t.Fatal(err)
		}
		if done {
			return resp
		}
		msg = next
	}
}

func metadataReq() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	return req
}

func TestSASLGateAndFailures(t *testing.T) {
	s, addr := saslServer(t, Config{}, nil)

	// Before authenticating only ApiVersions and the exchange pass.
	c := dial(t, addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "raw", "1"
	if r := c.do(av).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("ApiVersions before SASL: %d", r.ErrorCode)
	}
	c.send(metadataReq())
	c.expectClosed()

	// Wrong password: SASL_AUTHENTICATION_FAILED, then the connection closes.
	c = dial(t, addr)
	resp := c.authenticate(scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism())
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil {
		t.Fatalf("wrong password: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	c.expectClosed()

	// Unknown user, PLAIN: Kafka's message.
	c = dial(t, addr)
	resp = c.authenticate(plain.Auth{User: "mallory", Pass: "x"}.AsMechanism())
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || *resp.ErrorMessage != "Authentication failed: Invalid username or password" {
		t.Fatalf("unknown user: %d %v", resp.ErrorCode, derefStr(resp.ErrorMessage))
	}
	c.expectClosed()

	// A disabled mechanism: UNSUPPORTED_SASL_MECHANISM with the list.
	c = dial(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(r.SupportedMechanisms) != 3 {
		t.Fatalf("GSSAPI: %d %v", r.ErrorCode, r.SupportedMechanisms)
	}
	c.expectClosed()

	// A large frame before authentication is refused before allocation.
	c = dial(t, addr)
	big := kmsg.NewPtrSASLHandshakeRequest()
	big.Version, big.Mechanism = 1, string(make([]byte, 600<<10))
	c.send(big)
	c.expectClosed()

	// Success: the principal is User:alice; SASL requests on a plaintext
	// listener get ILLEGAL_SASL_STATE.
	c = dial(t, addr)
	if r := c.authenticate(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()); r.ErrorCode != 0 || r.SessionLifetimeMillis != 0 {
		t.Fatalf("alice: %d lifetime %d", r.ErrorCode, r.SessionLifetimeMillis)
	}
	if r := c.do(metadataReq()).(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
		t.Fatalf("metadata after SASL: %+v", r.Brokers)
	}
	hs = kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, ksasl.ScramSHA512
	if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake after auth without a lifetime: %d", r.ErrorCode)
	}
	p := dial(t, s.addr)
	if r := p.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake on PLAINTEXT: %d", r.ErrorCode)
	}
	if s.stats.AuthSuccesses.Load() != 1 || s.stats.AuthFailures.Load() != 3 {
		t.Fatalf("auth counters %d/%d", s.stats.AuthSuccesses.Load(), s.stats.AuthFailures.Load())
	}
}

// TestSASLReauthentication: KIP-368. The session lifetime is announced; a
// re-authentication with the same principal extends it; a request after
// expiry without one closes the connection; a re-authentication as someone
// else fails.
func TestSASLReauthentication(t *testing.T) {
	var now atomic.Int64
	s, addr := saslServer(t, Config{Security: SecurityConfig{MaxReauth: time.Minute}}, &now)
	for _, m := range ksasl.ScramMechanisms[:1] {
		c, _ := ksasl.NewScramCredentialFromPassword(m, "bob-secret", 4096)
		_ = s.auth.UpsertScram(context.Background(), "bob", c)
	}
	alice := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()
	c := dial(t, addr)
	if r := c.authenticate(alice); r.ErrorCode != 0 || r.SessionLifetimeMillis != 60000 {
		t.Fatalf("lifetime %d (error %d)", r.SessionLifetimeMillis, r.ErrorCode)
	}
	now.Add(int64(50 * time.Second))
	c.do(metadataReq())
	if r := c.authenticate(alice); r.ErrorCode != 0 || r.SessionLifetimeMillis != 60000 {
		t.Fatalf("re-authentication: %d", r.ErrorCode)
	}
	now.Add(int64(50 * time.Second)) // 100s after the first, 50s after the re-authentication
	c.do(metadataReq())
	now.Add(int64(11 * time.Second))
	c.send(metadataReq())
	c.expectClosed()

	c = dial(t, addr)
	c.authenticate(alice)
	if r := c.authenticate(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("principal change on re-authentication: %d", r.ErrorCode)
	}
	c.expectClosed()
	// A different mechanism on re-authentication is refused.
	c = dial(t, addr)
	c.authenticate(alice)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, ksasl.Plain
	if r := c.do(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("mechanism change on re-authentication: %d", r.ErrorCode)
	}
}

// TestSASLFranzGo: franz-go's SASL clients against the SASL listener.
func TestSASLFranzGo(t *testing.T) {
	_, addr := saslServer(t, Config{}, nil)
	for _, m := range []sasl.Mechanism{
		scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(),
		scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
		plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
	} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(m), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: "sasl-" + m.Name(), Value: []byte("x")}).FirstErr()
		cancel()
		cl.Close()
		if err != nil {
			t.Fatalf("%s produce: %v", m.Name(), err)
		}
	}
	cl, _ := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism()), kgo.RequestRetries(0))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cl.Ping(ctx)
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
}

// TestSASLHandshakeV0 runs sarama's SASL/PLAIN with SaslHandshake v0: the
// token after the handshake is a bare frame, answered with a bare frame.
func TestSASLHandshakeV0(t *testing.T) {
	_, addr := saslServer(t, Config{}, nil)
	for _, pass := range []string{"alice-secret", "wrong"} {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_1_0_0
		cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism = true, sarama.SASLTypePlaintext
		cfg.Net.SASL.Version = sarama.SASLHandshakeV0
		cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", pass
		cfg.Metadata.Retry.Max = 0
		cfg.ApiVersionsRequest = false
		cl, err := sarama.NewClient([]string{addr}, cfg)
		if pass == "wrong" {
			if err == nil {
				cl.Close()
				t.Fatal("v0 PLAIN with a wrong password connected")
			}
			continue
		}
		if err != nil {
			t.Fatalf("v0 PLAIN: %v", err)
		}
		if len(cl.Brokers()) != 1 {
			t.Fatalf("brokers %v", cl.Brokers())
		}
		cl.Close()
	}
}
