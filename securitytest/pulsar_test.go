package securitytest

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// pulsarAdmin calls the Pulsar admin REST API over https:// as role.
func pulsarAdmin(t *testing.T, method, path, role, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, "https://"+addr(t, "http:internal:https")+path, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+mintToken(t, role, time.Time{}, tokenSecret(t)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpsClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// securePulsarNamespace creates tenant/namespace as the superuser and grants
// role produce and consume there.
func securePulsarNamespace(t *testing.T, role string) string {
	t.Helper()
	tenant := unique("tenant")
	if code := pulsarAdmin(t, "PUT", "/admin/v2/tenants/"+tenant, "admin", `{"adminRoles":[],"allowedClusters":["standalone"]}`); code/100 != 2 {
		t.Fatalf("create tenant: %d", code)
	}
	ns := tenant + "/apps"
	if code := pulsarAdmin(t, "PUT", "/admin/v2/namespaces/"+ns, "admin", `{}`); code/100 != 2 {
		t.Fatalf("create namespace: %d", code)
	}
	if code := pulsarAdmin(t, "POST", "/admin/v2/namespaces/"+ns+"/permissions/"+role, "admin", `["produce","consume"]`); code != 204 {
		t.Fatalf("grant: %d", code)
	}
	return ns
}

func pulsarClient(t *testing.T, url, tok string) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, TLSTrustCertsFilePath: tlsCA.CAFile, TLSValidateHostname: true,
		OperationTimeout: 3 * time.Second, ConnectionTimeout: 5 * time.Second, Logger: quietPulsarLog(),
		Authentication: pulsar.NewAuthenticationToken(tok)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestPulsarTokenAuthTLS: pulsar-client-go with token auth over
// pulsar+ssl:// and over an https:// service URL (HTTP lookup); expired
// and forged tokens are refused (AuthenticationError), a role without
// permission gets AuthorizationError.
func TestPulsarTokenAuthTLS(t *testing.T) {
	ns := securePulsarNamespace(t, "app")
	good := mintToken(t, "app", time.Now().Add(time.Hour), tokenSecret(t))
	for _, url := range []string{"pulsar+ssl://" + addr(t, "pulsar:internal:pulsar+ssl"), "https://" + addr(t, "http:internal:https")} {
		t.Run(url[:strings.Index(url, ":")], func(t *testing.T) {
			topic := "persistent://" + ns + "/" + unique("t")
			c := pulsarClient(t, url, good)
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
			ctx := ctxT(t, 30*time.Second)
			if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("hello")}); err != nil {
				t.Fatal(err)
			}
			m, err := cons.Receive(ctx)
			if err != nil || string(m.Payload()) != "hello" {
				t.Fatalf("receive: %v", err)
			}
			for name, tok := range map[string]string{
				"expired": mintToken(t, "app", time.Now().Add(-time.Minute), tokenSecret(t)),
				"forged":  mintToken(t, "app", time.Now().Add(time.Hour), []byte("not-the-server-key-not-the-server-key")),
			} {
				if _, err := pulsarClient(t, url, tok).CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil {
					t.Errorf("%s token: producer created", name)
				}
			}
			mallory := pulsarClient(t, url, mintToken(t, "mallory", time.Now().Add(time.Hour), tokenSecret(t)))
			_, err = mallory.CreateProducer(pulsar.ProducerOptions{Topic: topic})
			if err == nil || !strings.Contains(err.Error(), "AuthorizationError") && !strings.Contains(err.Error(), "authoriz") && !strings.Contains(err.Error(), "403") {
				t.Errorf("role without permission: %v", err)
			}
			if _, err := mallory.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "m"}); err == nil {
				t.Error("role without permission subscribed")
			}
		})
	}
	// The admin REST API answers 401 without a token and 403 for a role
	// that administers nothing.
	if code := pulsarAdmin(t, "GET", "/admin/v2/namespaces/"+ns+"/permissions", "app", ""); code != 403 {
		t.Errorf("permissions as app: %d, want 403", code)
	}
	resp, err := httpsClient(t).Get("https://" + addr(t, "http:internal:https") + "/admin/v2/namespaces/" + ns + "/permissions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("permissions without a token: %d, want 401", resp.StatusCode)
	}
}

// TestPulsarTLSClientCertAuth: a client certificate (CN = role) over
// pulsar+ssl:// with Pulsar's "tls" authentication.
func TestPulsarTLSClientCertAuth(t *testing.T) {
	ns := securePulsarNamespace(t, "device-7")
	cert, key, err := tlsCA.Issue("device-7", "device-7", false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar+ssl://" + addr(t, "pulsar:internal:pulsar+ssl"),
		TLSTrustCertsFilePath: tlsCA.CAFile, Authentication: pulsar.NewAuthenticationTLS(cert, key),
		OperationTimeout: 10 * time.Second, Logger: quietPulsarLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://" + ns + "/" + unique("tls")})
	if err != nil {
		t.Fatalf("producer as device-7 (client certificate): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	p.Close()
}

// TestJavaPulsarToken: the Java Pulsar client with token auth over
// pulsar+ssl:// and an https:// service URL, and its exceptions for
// expired / forged tokens and a role without permission.
func TestJavaPulsarToken(t *testing.T) {
	ns := securePulsarNamespace(t, "java-app")
	sec := tokenSecret(t)
	runJava(t, "PulsarSecure", "pulsar+ssl://"+addr(t, "pulsar:internal:pulsar+ssl"), "https://"+addr(t, "http:internal:https"),
		tlsCA.CAFile, "persistent://"+ns+"/"+unique("java"),
		mintToken(t, "java-app", time.Now().Add(time.Hour), sec),
		mintToken(t, "java-app", time.Now().Add(-time.Minute), sec),
		mintToken(t, "java-app", time.Now().Add(time.Hour), []byte("not-the-server-key-not-the-server-key")),
		mintToken(t, "mallory", time.Now().Add(time.Hour), sec))
}

// TestTokenKeyReloadOnSIGHUP rotates the JWT secret key file and sends
// SIGHUP: tokens signed with the new key authenticate (admin REST and a
// Pulsar client), tokens of the old key are refused with 401. It leaves
// the new key in place; tokenSecret re-reads the file, so later tests sign
// with it.
func TestTokenKeyReloadOnSIGHUP(t *testing.T) {
	oldKey := tokenSecret(t)
	newKey := []byte("nereus-securitytest-rotated-secret-9876543210")
	if err := os.WriteFile(tokenKey+".new", newKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tokenKey+".new", tokenKey); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(srv.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	tenants := func(key []byte) int {
		req, _ := http.NewRequest("GET", "https://"+addr(t, "http:internal:https")+"/admin/v2/tenants", nil)
		req.Header.Set("Authorization", "Bearer "+mintToken(t, "admin", time.Now().Add(time.Hour), key))
		resp, err := httpsClient(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(30 * time.Second)
	for tenants(newKey) != 200 {
		if time.Now().After(deadline) {
			t.Fatal("a token of the rotated key is still refused 30 s after SIGHUP")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := tenants(oldKey); code != 401 {
		t.Errorf("token of the old key after rotation: %d, want 401", code)
	}
	ns := securePulsarNamespace(t, "rotated")
	topic := "persistent://" + ns + "/" + unique("t")
	c := pulsarClient(t, "pulsar+ssl://"+addr(t, "pulsar:internal:pulsar+ssl"), mintToken(t, "rotated", time.Now().Add(time.Hour), newKey))
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("producer with a token of the rotated key: %v", err)
	}
	defer p.Close()
	if _, err := p.Send(ctxT(t, 30*time.Second), &pulsar.ProducerMessage{Payload: []byte("after rotation")}); err != nil {
		t.Fatal(err)
	}
	stale := pulsarClient(t, "pulsar+ssl://"+addr(t, "pulsar:internal:pulsar+ssl"), mintToken(t, "rotated", time.Now().Add(time.Hour), oldKey))
	if _, err := stale.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil {
		t.Error("producer with a token of the old key was created after rotation")
	}
}
