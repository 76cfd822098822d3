package securitytest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func clientTLS(t testing.TB) *tls.Config {
	t.Helper()
	c, err := tlsCA.ClientConfig("", "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKafkaTLS: franz-go over the SSL listener produces and consumes, and
// each listener advertises itself (Kafka's per-listener advertised
// addresses: a client that bootstrapped on SSL is sent to SSL).
func TestKafkaTLS(t *testing.T) {
	sslAddr, plainAddr := addr(t, "kafka:SSL"), addr(t, "kafka:PLAINTEXT")
	topic := unique("tls")
	cl, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(clientTLS(t)),
		kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 60*time.Second)
	for i := range 100 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce over TLS: %v", err)
		}
	}
	got := 0
	for got < 100 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch over TLS: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Value[0] != byte(got) {
				t.Fatalf("record %d: %v", got, r.Value)
			}
			got++
		})
	}
	for _, c := range []struct {
		seed string
		tls  bool
	}{{sslAddr, true}, {plainAddr, false}} {
		opts := []kgo.Opt{kgo.SeedBrokers(c.seed)}
		if c.tls {
			opts = append(opts, kgo.DialTLSConfig(clientTLS(t)))
		}
		mc, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		md, err := kadm.NewClient(mc).BrokerMetadata(ctx)
		mc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, itoa(md.Brokers[0].Port)) != c.seed {
			t.Fatalf("metadata through %s advertises %+v", c.seed, md.Brokers)
		}
	}
	// A plaintext client on the TLS port gets nowhere (and the server
	// stays up, see TestTLSListenersSurviveGarbage).
	bad, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bad.Ping(pctx); err == nil {
		t.Fatal("plaintext client talked to the SSL listener")
	}
}

// TestPulsarTLS: pulsar-client-go over pulsar+ssl:// (binary lookup) and
// with an https:// service URL (HTTP lookup answers brokerUrlTls).
func TestPulsarTLS(t *testing.T) {
	for _, url := range []string{"pulsar+ssl://" + addr(t, "pulsar:internal:pulsar+ssl"), "https://" + addr(t, "http:internal:https")} {
		t.Run(url[:5], func(t *testing.T) {
			c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, TLSTrustCertsFilePath: tlsCA.CAFile,
				TLSValidateHostname: true, OperationTimeout: 30 * time.Second, Logger: quietPulsarLog(),
				Authentication: pulsar.NewAuthenticationToken(mintToken(t, "admin", time.Now().Add(time.Hour), tokenSecret(t)))})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			topic := "persistent://public/default/" + unique("tls")
			cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx := ctxT(t, 60*time.Second)
			for i := range 20 {
				if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte{byte(i)}}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 20 {
				m, err := cons.Receive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if m.Payload()[0] != byte(i) {
					t.Fatalf("message %d: %v", i, m.Payload())
				}
				_ = cons.Ack(m)
			}
		})
	}
	// The HTTP lookup names both URLs of the listener group.
	req, _ := http.NewRequest("GET", "https://"+addr(t, "http:internal:https")+"/lookup/v2/topic/persistent/public/default/x", nil)
	req.Header.Set("Authorization", "Bearer "+mintToken(t, "admin", time.Time{}, tokenSecret(t)))
	resp, err := httpsClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lk map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&lk); err != nil {
		t.Fatal(err)
	}
	if lk["brokerUrl"] != "pulsar://"+addr(t, "pulsar:internal:pulsar") || lk["brokerUrlTls"] != "pulsar+ssl://"+addr(t, "pulsar:internal:pulsar+ssl") ||
		lk["httpUrlTls"] != "https://"+addr(t, "http:internal:https") || lk["httpUrl"] != "http://"+addr(t, "http:internal:http") {
		t.Fatalf("lookup answer %v", lk)
	}
}

func httpsClient(t testing.TB) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(t)}}
}

// servedCert is the certificate a TLS listener presents.
func servedCert(t testing.TB, a string) *x509.Certificate {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", a, clientTLS(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

// TestTLSListenersSurviveGarbage: on every TLS listener, connections that
// send garbage, plaintext protocol bytes, or open and say nothing cost the
// server nothing lasting; TLS clients are served throughout.
func TestTLSListenersSurviveGarbage(t *testing.T) {
	ids := []string{"kafka:SSL", "pulsar:internal:pulsar+ssl", "http:internal:https"}
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for _, id := range ids {
		a := addr(t, id)
		for range 10 {
			c, err := net.Dial("tcp", a)
			if err != nil {
				t.Fatal(err)
			}
			idle = append(idle, c)
		}
		for _, junk := range [][]byte{
			{0, 0, 0, 20, 0, 18, 0, 3, 0, 0, 0, 1, 0, 0}, // a Kafka ApiVersions header, plaintext
			[]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
			{0x16, 0x03, 0x01, 0x7f, 0xff, 1, 2, 3}, // a ClientHello header with a lying length
			make([]byte, 64<<10),
		} {
			c, err := net.Dial("tcp", a)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write(junk)
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
		servedCert(t, a) // still handshakes
	}
	resp, err := httpsClient(t).Get("https://" + addr(t, "http:internal:https") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz over https: %d", resp.StatusCode)
	}
}

// TestTLSReloadOnSIGHUP rotates the server certificate files and sends
// SIGHUP: new handshakes get the new certificate on every TLS listener.
// It runs last in this file's order and leaves the new certificate in
// place (same CA, so other tests are unaffected).
func TestTLSReloadOnSIGHUP(t *testing.T) {
	before := servedCert(t, addr(t, "kafka:SSL")).SerialNumber
	cert, key, err := tlsCA.Issue("server-rotated", "localhost", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range [][2]string{{cert, tlsCA.CertFile}, {key, tlsCA.KeyFile}} {
		raw, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1]+".new", raw, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f[1]+".new", f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(srv.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"kafka:SSL", "pulsar:internal:pulsar+ssl", "http:internal:https"} {
		deadline := time.Now().Add(30 * time.Second)
		for servedCert(t, addr(t, id)).SerialNumber.Cmp(before) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s still serves the old certificate after SIGHUP", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
