package listener

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv/certs"
)

func TestParseKafka(t *testing.T) {
	specs, err := ParseKafka("PLAINTEXT://127.0.0.1:9092, SASL_SSL://0.0.0.0:9093,INTERNAL://:9094",
		"SASL_SSL://broker.example:19093", "INTERNAL:SASL_PLAINTEXT")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 {
		t.Fatalf("specs: %+v", specs)
	}
	if s := specs[1]; s.Name != "SASL_SSL" || !s.Security.TLS || !s.Security.SASL || s.Advertise != "broker.example:19093" || s.Bind != "0.0.0.0:9093" {
		t.Fatalf("SASL_SSL: %+v", s)
	}
	if s := specs[2]; s.Name != "INTERNAL" || s.Security != (Security{SASL: true}) || s.ID() != "kafka:INTERNAL" {
		t.Fatalf("INTERNAL: %+v", s)
	}
	for _, bad := range []struct{ l, a, m string }{
		{"FOO://127.0.0.1:1", "", ""},                               // unmapped name
		{"PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2", "", ""}, // duplicate name
		{"PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:1", "", ""},       // same port
		{"PLAINTEXT://127.0.0.1", "", ""},                           // no port
		{"PLAINTEXT://127.0.0.1:1", "SSL://h:1", ""},                // advertises unknown listener
		{"PLAINTEXT://127.0.0.1:1", "PLAINTEXT://0.0.0.0:1", ""},    // wildcard advertised
		{"PLAINTEXT://127.0.0.1:1", "PLAINTEXT://:1", ""},           // empty advertised host
		{"X://127.0.0.1:1", "", "X:KERBEROS"},                       // bad map
	} {
		if _, err := ParseKafka(bad.l, bad.a, bad.m); err == nil {
			t.Errorf("ParseKafka(%q, %q, %q) accepted", bad.l, bad.a, bad.m)
		}
	}
}

func TestParsePulsarAndHTTP(t *testing.T) {
	specs, err := ParsePulsar("pulsar://127.0.0.1:6650,pulsar+ssl://127.0.0.1:6651,external:pulsar+ssl://0.0.0.0:7651",
		"external:pulsar+ssl://pulsar.example:443")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 || specs[0].Name != DefaultName || specs[1].Scheme() != "pulsar+ssl" || specs[2].Name != "external" ||
		specs[2].Advertise != "pulsar.example:443" || specs[1].ID() != "pulsar:internal:pulsar+ssl" {
		t.Fatalf("specs: %+v", specs)
	}
	if _, err := ParsePulsar("pulsar://127.0.0.1:1,pulsar://127.0.0.1:2", ""); err == nil {
		t.Fatal("two plaintext listeners in one name accepted")
	}
	if _, err := ParsePulsar("http://127.0.0.1:1", ""); err == nil {
		t.Fatal("http scheme accepted for pulsar")
	}
	h, err := ParseHTTP("http://127.0.0.1:8080,https://127.0.0.1:8443", "")
	if err != nil || len(h) != 2 || !h[1].Security.TLS || h[1].Scheme() != "https" {
		t.Fatalf("http: %+v %v", h, err)
	}
}

func TestExposure(t *testing.T) {
	for _, c := range []struct {
		s    Spec
		auth bool
		want string
	}{
		{Spec{Protocol: Kafka, Name: "PLAINTEXT", Bind: "127.0.0.1:9092"}, false, ""},
		{Spec{Protocol: Kafka, Name: "PLAINTEXT", Bind: "localhost:9092"}, false, ""},
		{Spec{Protocol: Kafka, Name: "PLAINTEXT", Bind: "[::1]:9092"}, false, ""},
		{Spec{Protocol: Kafka, Name: "PLAINTEXT", Bind: "0.0.0.0:9092"}, false, "no TLS, no authentication"},
		{Spec{Protocol: Kafka, Name: "SSL", Security: Security{TLS: true}, Bind: ":9093"}, false, "no authentication"},
		{Spec{Protocol: Kafka, Name: "SASL_SSL", Security: Security{TLS: true, SASL: true}, Bind: "10.0.0.1:9093"}, true, ""},
		{Spec{Protocol: HTTP, Name: "internal", Bind: "10.0.0.1:8080"}, true, "no TLS"},
	} {
		got := Exposure(c.s, c.auth)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("Exposure(%v, %v) = %q, want %q", c.s, c.auth, got, c.want)
		}
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// serveEcho accepts on b, handshakes each connection and echoes a line.
func serveEcho(t *testing.T, b *Bound) {
	t.Helper()
	go func() {
		for {
			c, err := b.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if err := Handshake(c, 500*time.Millisecond); err != nil {
					return
				}
				buf := make([]byte, 5)
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				peer := "-"
				if pc := PeerCertificate(c); pc != nil {
					peer = pc.Subject.CommonName
				}
				_, _ = c.Write([]byte(string(buf) + " " + peer + "\n"))
			}()
		}
	}()
}

func roundTrip(t *testing.T, addr string, cfg *tls.Config) (string, error) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hello")); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

func TestTLSListenerClientAuthAndReload(t *testing.T) {
	cs := certs.NewT(t)
	cliCert, cliKey, err := cs.Issue("alice", "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(TLSFiles{CertFile: cs.CertFile, KeyFile: cs.KeyFile, CAFile: cs.CAFile, ClientAuth: ClientAuthRequested}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Listen(Spec{Protocol: Kafka, Name: "SSL", Security: Security{TLS: true}, Bind: "127.0.0.1:0"}, src)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	serveEcho(t, b)

	anon, _ := cs.ClientConfig("", "")
	anon.ServerName = "localhost"
	if got, err := roundTrip(t, b.Addr().String(), anon); err != nil || got != "hello -\n" {
		t.Fatalf("anonymous TLS client: %q %v", got, err)
	}
	withCert, _ := cs.ClientConfig(cliCert, cliKey)
	if got, err := roundTrip(t, b.Addr().String(), withCert); err != nil || got != "hello alice\n" {
		t.Fatalf("client certificate: %q %v", got, err)
	}
	old12 := &tls.Config{RootCAs: cs.Pool(), MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10}
	if _, err := roundTrip(t, b.Addr().String(), old12); err == nil {
		t.Fatal("TLS 1.1 accepted")
	}

	// Rotate: a new CA and server certificate over the same file names.
	before := src.NotAfter()
	cs2, err := certs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range [][2]string{{cs2.CertFile, cs.CertFile}, {cs2.KeyFile, cs.KeyFile}} {
		raw, _ := os.ReadFile(f[0])
		if err := os.WriteFile(f[1], raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if changed, err := src.Reload(); err != nil || !changed {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if _, err := roundTrip(t, b.Addr().String(), anon); err == nil {
		t.Fatal("old CA still verifies the server after rotation")
	}
	cli2, _ := cs2.ClientConfig("", "")
	if got, err := roundTrip(t, b.Addr().String(), cli2); err != nil || got != "hello -\n" {
		t.Fatalf("after rotation: %q %v", got, err)
	}
	if changed, err := src.Reload(); err != nil || changed {
		t.Fatalf("no-op reload: %v %v", changed, err)
	}
	// A broken key file is refused; the listener keeps serving.
	if err := os.WriteFile(cs.KeyFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Reload(); err == nil {
		t.Fatal("broken key accepted")
	}
	if got, err := roundTrip(t, b.Addr().String(), cli2); err != nil || got != "hello -\n" {
		t.Fatalf("after a failed reload: %q %v", got, err)
	}
	if src.Reloads() != 1 || src.Failures() != 1 || before.IsZero() {
		t.Fatalf("reloads %d failures %d notAfter %v", src.Reloads(), src.Failures(), before)
	}
}

func TestTLSRequiredClientCert(t *testing.T) {
	cs := certs.NewT(t)
	src, err := NewSource(TLSFiles{CertFile: cs.CertFile, KeyFile: cs.KeyFile, CAFile: cs.CAFile, ClientAuth: ClientAuthRequired}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Listen(Spec{Protocol: Pulsar, Name: DefaultName, Security: Security{TLS: true}, Bind: "127.0.0.1:0"}, src)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	serveEcho(t, b)
	anon, _ := cs.ClientConfig("", "")
	if got, err := roundTrip(t, b.Addr().String(), anon); err == nil {
		t.Fatalf("client without certificate admitted: %q", got)
	}
	// A certificate from another CA is refused too.
	other := certs.NewT(t)
	oc, ok, _ := other.Issue("mallory", "mallory", false)
	foreign, _ := cs.ClientConfig(oc, ok)
	if got, err := roundTrip(t, b.Addr().String(), foreign); err == nil {
		t.Fatalf("foreign client certificate admitted: %q", got)
	}
	cc, ck, _ := cs.Issue("bob", "bob", false)
	good, _ := cs.ClientConfig(cc, ck)
	if got, err := roundTrip(t, b.Addr().String(), good); err != nil || got != "hello bob\n" {
		t.Fatalf("good client: %q %v", got, err)
	}
}

// TestTLSGarbageAndHalfOpen: garbage bytes and handshakes that never finish
// cost a bounded goroutine each and never stop the listener from serving.
func TestTLSGarbageAndHalfOpen(t *testing.T) {
	cs := certs.NewT(t)
	src, err := NewSource(TLSFiles{CertFile: cs.CertFile, KeyFile: cs.KeyFile}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Listen(Spec{Protocol: Kafka, Name: "SSL", Security: Security{TLS: true}, Bind: "127.0.0.1:0"}, src)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	serveEcho(t, b)
	var idle []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", b.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c) // opens and says nothing
	}
	for _, junk := range [][]byte{[]byte("GET / HTTP/1.1\r\n\r\n"), {0x16, 0x03, 0x01, 0xff, 0xff}, make([]byte, 4096)} {
		c, err := net.Dial("tcp", b.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(junk)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.ReadAll(c) // the server answers with an alert or closes
		c.Close()
	}
	cli, _ := cs.ClientConfig("", "")
	if got, err := roundTrip(t, b.Addr().String(), cli); err != nil || got != "hello -\n" {
		t.Fatalf("served after garbage: %q %v", got, err)
	}
	// The silent connections are closed by the handshake deadline.
	for _, c := range idle {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("half-open connection got data")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("half-open connection was not closed by the server")
		}
		c.Close()
	}
}

func TestEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := Wrap(ln, Kafka, KafkaPlaintext)
	if e := b.Endpoint(); e.Host != "127.0.0.1" || e.Port == 0 || e.URL() != "PLAINTEXT://"+ln.Addr().String() {
		t.Fatalf("endpoint %+v", e)
	}
	w, err := Listen(Spec{Protocol: Pulsar, Name: DefaultName, Bind: "0.0.0.0:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if e := w.Endpoint(); e.Host != "" || Dialable(e) == nil {
		t.Fatalf("wildcard endpoint %+v", e)
	}
	local := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 1}
	if e := w.AdvertisedFor(local); e.Host != "127.0.0.1" || e.URL() != "pulsar://127.0.0.1:"+strconv.Itoa(w.Endpoint().Port) {
		t.Fatalf("advertised for %v: %+v", local, e)
	}
	a, err := Listen(Spec{Protocol: HTTP, Name: DefaultName, Bind: "127.0.0.1:0", Advertise: "admin.example:443"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if e := a.AdvertisedFor(local); e.Addr() != "admin.example:443" {
		t.Fatalf("configured advertised: %+v", e)
	}
	if _, err := Listen(Spec{Protocol: HTTP, Name: DefaultName, Security: Security{TLS: true}, Bind: "127.0.0.1:0"}, nil); err == nil {
		t.Fatal("TLS listener without a certificate")
	}
}
