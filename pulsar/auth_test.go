package pulsar

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/golang-jwt/jwt/v5"

	"github.com/nereusstream/nereus-go/internal/authtoken"
)

var testSecret = []byte("pulsar-auth-test-secret-0123456789abcdef")

func authBroker(t *testing.T, authz bool) *broker {
	t.Helper()
	f := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(f, testSecret, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := authtoken.New(authtoken.Config{SecretKeyFile: f})
	if err != nil {
		t.Fatal(err)
	}
	return startInProcessBroker(t, Config{Auth: AuthConfig{Providers: []string{"token"}, Tokens: v,
		Authorization: authz, SuperUserRoles: []string{"admin"}, RefreshCheck: 300 * time.Millisecond}})
}

func token(t testing.TB, role string, exp time.Time, key []byte) string {
	t.Helper()
	c := jwt.MapClaims{"sub": role}
	if !exp.IsZero() {
		c["exp"] = exp.Unix()
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tokenClient(t *testing.T, url string, auth pulsar.Authentication) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, Authentication: auth, OperationTimeout: 2 * time.Second,
		ConnectionTimeout: 5 * time.Second, Logger: quietPulsarLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestTokenAuthentication(t *testing.T) {
	b := authBroker(t, false)
	topic := newTopic("auth")
	good := tokenClient(t, b.URL, pulsar.NewAuthenticationToken(token(t, "alice", time.Now().Add(time.Hour), testSecret)))
	p, err := good.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("valid token: %v", err)
	}
	p.Close()
	for name, auth := range map[string]pulsar.Authentication{
		"no credentials": nil,
		"expired":        pulsar.NewAuthenticationToken(token(t, "alice", time.Now().Add(-time.Minute), testSecret)),
		"forged":         pulsar.NewAuthenticationToken(token(t, "alice", time.Now().Add(time.Hour), []byte("another-key-another-key-another-key"))),
	} {
		c := tokenClient(t, b.URL, auth)
		if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil {
			t.Errorf("%s: producer created", name)
		}
	}
	// HTTP: 401 without or with a bad token, 200 with a good one.
	for tok, want := range map[string]int{"": 401, "garbage": 401, token(t, "alice", time.Time{}, testSecret): 200} {
		req, _ := http.NewRequest("GET", b.HTTPURL+"/admin/v2/clusters", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /admin/v2/clusters with %q: %d, want %d", tok, resp.StatusCode, want)
		}
	}
}

func adminDo(t *testing.T, b *broker, method, path, role, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, b.HTTPURL+path, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+token(t, role, time.Time{}, testSecret))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAuthorization(t *testing.T) {
	b := authBroker(t, true)
	topic := newTopic("authz")
	bob := tokenClient(t, b.URL, pulsar.NewAuthenticationToken(token(t, "bob", time.Time{}, testSecret)))
	if _, err := bob.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil || !strings.Contains(err.Error(), "AuthorizationError") {
		t.Fatalf("producer without permission: %v", err)
	}
	// Only a tenant admin or superuser grants.
	if code := adminDo(t, b, "POST", "/admin/v2/namespaces/public/default/permissions/bob", "bob", `["produce"]`); code != 403 {
		t.Fatalf("bob grants himself: %d", code)
	}
	if code := adminDo(t, b, "POST", "/admin/v2/namespaces/public/default/permissions/bob", "admin", `["produce"]`); code != 204 {
		t.Fatalf("admin grants produce: %d", code)
	}
	p, err := bob.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err != nil {
		t.Fatalf("producer with namespace produce: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"}); err == nil {
		t.Fatal("subscribe with produce only")
	}
	// Topic-level consume.
	if code := adminDo(t, b, "POST", "/admin/v2/persistent/public/default/"+strings.TrimPrefix(topic, "persistent://public/default/")+"/permissions/bob", "admin", `["consume"]`); code != 204 {
		t.Fatalf("grant consume on the topic: %d", code)
	}
	c, err := bob.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		t.Fatalf("subscribe with topic consume: %v", err)
	}
	c.Close()
	// Tenant admins may administrate their tenant.
	if code := adminDo(t, b, "PUT", "/admin/v2/tenants/acme", "admin", `{"adminRoles":["carol"],"allowedClusters":["standalone"]}`); code/100 != 2 {
		t.Fatalf("create tenant: %d", code)
	}
	if code := adminDo(t, b, "PUT", "/admin/v2/tenants/other", "carol", `{"adminRoles":["carol"]}`); code != 403 {
		t.Fatalf("tenant admin creates a tenant: %d", code)
	}
	if code := adminDo(t, b, "PUT", "/admin/v2/namespaces/acme/ns", "carol", `{}`); code/100 != 2 {
		t.Fatalf("tenant admin creates a namespace: %d", code)
	}
	carol := tokenClient(t, b.URL, pulsar.NewAuthenticationToken(token(t, "carol", time.Time{}, testSecret)))
	cp, err := carol.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://acme/ns/t"})
	if err != nil {
		t.Fatalf("tenant admin produces in her tenant: %v", err)
	}
	cp.Close()
	if _, err := carol.CreateProducer(pulsar.ProducerOptions{Topic: newTopic("not-carols")}); err == nil {
		t.Fatal("tenant admin produced outside her tenant")
	}
	// Revoke.
	if code := adminDo(t, b, "DELETE", "/admin/v2/namespaces/public/default/permissions/bob", "admin", ""); code != 204 {
		t.Fatalf("revoke: %d", code)
	}
	if _, err := bob.CreateProducer(pulsar.ProducerOptions{Topic: newTopic("after-revoke")}); err == nil {
		t.Fatal("producer after revoke")
	}
}

// TestTokenRefresh: a session whose token expires gets AUTH_CHALLENGE; a
// client supplying a fresh token keeps its connection and producer; one
// that cannot is disconnected.
func TestTokenRefresh(t *testing.T) {
	b := authBroker(t, false)
	var current atomic.Value
	current.Store(token(t, "alice", time.Now().Add(1500*time.Millisecond), testSecret))
	refreshed := atomic.Int32{}
	c := tokenClient(t, b.URL, pulsar.NewAuthenticationTokenFromSupplier(func() (string, error) {
		tok := current.Load().(string)
		if refreshed.Add(1) > 1 {
			tok = token(t, "alice", time.Now().Add(time.Hour), testSecret)
			current.Store(tok)
		}
		return tok, nil
	}))
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: newTopic("refresh")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x")})
		cancel()
		if err != nil {
			t.Fatalf("send across the token refresh: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if refreshed.Load() < 2 {
		t.Fatalf("the client was never asked for a new token (%d calls)", refreshed.Load())
	}

	// A client that can only offer the expired token loses its session.
	stale := token(t, "alice", time.Now().Add(1200*time.Millisecond), testSecret)
	sc := tokenClient(t, b.URL, pulsar.NewAuthenticationTokenFromSupplier(func() (string, error) { return stale, nil }))
	sp, err := sc.CreateProducer(pulsar.ProducerOptions{Topic: newTopic("stale"), SendTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	time.Sleep(2500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := sp.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}); err == nil {
		t.Fatal("a send succeeded after the token expired without a refresh")
	}
}
