package securitytest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

func scramMech(mech, user, pass string) sasl.Mechanism {
	a := scram.Auth{User: user, Pass: pass}
	switch mech {
	case "SCRAM-SHA-512":
		return a.AsSha512Mechanism()
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism()
	}
	return a.AsSha256Mechanism()
}

// saslClient is a franz-go client on the SASL_SSL listener.
func saslClient(t testing.TB, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr(t, "kafka:SASL_SSL")), kgo.DialTLSConfig(clientTLS(t)),
		kgo.SASL(m), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produceConsume(t testing.TB, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	cl.AddConsumeTopics(topic)
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Value[0] != byte(got) {
				t.Fatalf("record %d: %v", got, r.Value)
			}
			got++
		})
	}
}

// TestKafkaSASLFranzGo: SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN over TLS.
func TestKafkaSASLFranzGo(t *testing.T) {
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"} {
		t.Run(mech, func(t *testing.T) {
			produceConsume(t, saslClient(t, scramMech(mech, "alice", users["alice"])), unique("sasl"), 20)
		})
	}
	t.Run("SASL_PLAINTEXT", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr(t, "kafka:SASL_PLAINTEXT")), kgo.AllowAutoTopicCreation(),
			kgo.SASL(scramMech("SCRAM-SHA-512", "bob", users["bob"])))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		produceConsume(t, cl, unique("saslplain"), 5)
	})
}

// TestKafkaSASLRefused: wrong password, unknown user and no SASL at all get
// SASL_AUTHENTICATION_FAILED (or a closed connection) and no data.
func TestKafkaSASLRefused(t *testing.T) {
	topic := unique("refused")
	good := saslClient(t, scramMech("SCRAM-SHA-256", "alice", users["alice"]))
	if err := good.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte("secret")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    sasl.Mechanism
	}{
		{"wrong password SCRAM-SHA-256", scramMech("SCRAM-SHA-256", "alice", "wrong")},
		{"wrong password SCRAM-SHA-512", scramMech("SCRAM-SHA-512", "alice", "wrong")},
		{"wrong password PLAIN", scramMech("PLAIN", "alice", "wrong")},
		{"unknown user", scramMech("SCRAM-SHA-256", "mallory", "x")},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := saslClient(t, c.m, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RequestRetries(0))
			if err := cl.Ping(ctxT(t, 10*time.Second)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("got %v, want SASL_AUTHENTICATION_FAILED", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if n := cl.PollFetches(ctx).NumRecords(); n != 0 {
				t.Fatalf("read %d records without authenticating", n)
			}
		})
	}
	t.Run("no SASL", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr(t, "kafka:SASL_SSL")), kgo.DialTLSConfig(clientTLS(t)),
			kgo.ConsumeTopics(topic), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.Ping(ctxT(t, 10*time.Second)); err == nil {
			t.Fatal("metadata answered without SASL")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if n := cl.PollFetches(ctx).NumRecords(); n != 0 {
			t.Fatalf("read %d records without SASL", n)
		}
	})
}

func mintToken(t testing.TB, sub string, exp time.Time, key []byte) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": sub}
	if !exp.IsZero() {
		claims["exp"] = exp.Unix()
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func tokenSecret(t testing.TB) []byte {
	b, err := os.ReadFile(tokenKey)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKafkaOAuthBearer: a JWT signed with the server's key authenticates
// as its subject; expired and forged tokens are refused.
func TestKafkaOAuthBearer(t *testing.T) {
	good := mintToken(t, "svc-etl", time.Now().Add(time.Hour), tokenSecret(t))
	produceConsume(t, saslClient(t, oauth.Auth{Token: good}.AsMechanism()), unique("oauth"), 5)
	for name, tok := range map[string]string{
		"expired": mintToken(t, "svc-etl", time.Now().Add(-time.Minute), tokenSecret(t)),
		"forged":  mintToken(t, "svc-etl", time.Now().Add(time.Hour), []byte("not-the-server-key-not-the-server-key")),
	} {
		t.Run(name, func(t *testing.T) {
			cl := saslClient(t, oauth.Auth{Token: tok}.AsMechanism(), kgo.RequestRetries(0))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := cl.Ping(ctx); err == nil {
				t.Fatal("token accepted")
			}
		})
	}
}

// TestKafkaReauthentication: with a session lifetime of reauth, franz-go
// re-authenticates on its own and keeps producing across several
// lifetimes on one connection.
func TestKafkaReauthentication(t *testing.T) {
	t.Parallel() // mostly waiting: overlaps the other tests
	if testing.Short() {
		t.Skip("runs for two session lifetimes") // skip-ok: -short skips slow tests by design
	}
	before := metric(t, "nereus_kafka_sasl_authentications_total")
	cl := saslClient(t, scramMech("SCRAM-SHA-512", "alice", users["alice"]))
	topic := unique("reauth")
	deadline := time.Now().Add(2*reauth + 2*time.Second)
	n := 0
	for time.Now().Before(deadline) {
		if err := cl.ProduceSync(ctxT(t, 30*time.Second), &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce %d across re-authentication: %v", n, err)
		}
		n++
		time.Sleep(200 * time.Millisecond)
	}
	if got := metric(t, "nereus_kafka_sasl_authentications_total") - before; got < 3 {
		t.Fatalf("%v authentications over two session lifetimes, want the first plus re-authentications", got)
	}
}

// TestKcatSASLSSLPlain: librdkafka (kcat) with SASL_SSL and PLAIN (and
// SCRAM-SHA-256/512).
func TestKcatSASLSSLPlain(t *testing.T) {
	t.Parallel()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		testenv.SkipOrFail(t, "kcat not available (apt-get install kcat)")
	}
	topic := unique("kcat")
	args := []string{"-b", addr(t, "kafka:SASL_SSL"), "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username=bob", "-X", "sasl.password=" + users["bob"], "-X", "ssl.ca.location=" + tlsCA.CAFile}
	ctx := ctxT(t, 60*time.Second)
	prod := exec.CommandContext(ctx, kcat, append(args, "-P", "-t", topic)...)
	prod.Stdin = strings.NewReader("one\ntwo\nthree\n")
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, kcat, append(args, "-C", "-t", topic, "-o", "beginning", "-e", "-q")...).CombinedOutput()
	if err != nil || string(out) != "one\ntwo\nthree\n" {
		t.Fatalf("kcat consume: %v\n%q", err, out)
	}
	// SCRAM too (librdkafka repeats its client nonce in the final message;
	// the server accepts that as Kafka does).
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		scramArgs := append([]string(nil), args...)
		scramArgs[5] = "sasl.mechanisms=" + mech
		if out, err := exec.CommandContext(ctx, kcat, append(scramArgs, "-C", "-t", topic, "-o", "beginning", "-e", "-q")...).CombinedOutput(); err != nil || string(out) != "one\ntwo\nthree\n" {
			t.Fatalf("kcat %s: %v\n%q", mech, err, out)
		}
	}
	bad := append([]string(nil), args...)
	bad[9] = "sasl.password=wrong"
	failures := metric(t, "nereus_kafka_sasl_authentication_failures_total")
	out, err = exec.CommandContext(ctx, kcat, append(bad, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-m", "5")...).CombinedOutput()
	if err == nil || strings.Contains(string(out), "one") {
		t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
	}
	if metric(t, "nereus_kafka_sasl_authentication_failures_total") <= failures {
		t.Fatalf("kcat's wrong password was not refused by SASL: %s", out)
	}
}
