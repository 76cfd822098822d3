// Package securitytest runs unmodified clients against one `nereus serve`
// with every security feature switched on: TLS on Kafka (SSL, SASL_SSL),
// Pulsar (pulsar+ssl://) and admin HTTP (https://) listeners next to
// plaintext loopback ones, certificates from a throwaway CA
// (internal/testenv/certs) reloaded on SIGHUP, Kafka SASL (PLAIN,
// SCRAM-SHA-256/512, OAUTHBEARER with JWTs from a test key) with KIP-368
// re-authentication, Kafka ACLs (the test principals get base ACLs; eve and
// erin get none or their own), Pulsar token and client-certificate
// authentication with authorization, and admin API authentication. One
// server serves the whole package (CI budget); tests use unique names.
//
// It holds tests only and must never be imported.
package securitytest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testenv/certs"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

var (
	srv      *testserver.Server
	tlsCA    *certs.Set
	tokenKey string // HS256 secret for JWTs (Kafka OAUTHBEARER, Pulsar, admin)
)

// reauth is the server's SASL session lifetime (KIP-368): short enough that
// the Kafka tests' clients re-authenticate while they run.
const reauth = 5 * time.Second

// The SCRAM users every test may use (created through the admin API, as
// `nereus kafka user set` does).
// admin is the super user; eve has credentials and no ACLs at all.
var users = map[string]string{"alice": "alice-secret", "bob": "bob-secret", "admin": "admin-secret", "eve": "eve-secret",
	"erin": "erin-secret"}

// trusted principals get every topic and group operation (the plaintext
// loopback and SSL listeners' anonymous clients, the SASL users of the
// TLS/SASL tests, the OAUTHBEARER subject); ACL tests use their own
// principals.
var trusted = []string{"User:ANONYMOUS", "User:alice", "User:bob", "User:svc-etl", "User:dave",
	"User:CN=localhost,O=Nereus"}

func grantBaseACLs() error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.ListenerAddr("kafka:SASL_PLAINTEXT")),
		kgo.SASL(scram.Auth{User: "admin", Pass: users["admin"]}.AsSha512Mechanism()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := kadm.NewACLs().Allow(trusted...).Topics("*").Groups("*").TransactionalIDs("*").Operations(kadm.OpAll)
	res, err := kadm.NewClient(cl).CreateACLs(ctx, b)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func createUsers() error {
	c, err := adminapi.NewClient(srv.URL(), nil)
	if err != nil {
		return err
	}
	secret, err := os.ReadFile(tokenKey)
	if err != nil {
		return err
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "admin"}).SignedString(secret)
	if err != nil {
		return err
	}
	c = c.WithToken(tok)
	for u, p := range users {
		for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := c.SetKafkaScram(ctx, u, adminapi.SetKafkaScramRequest{Mechanism: m, Password: p, Iterations: 4096})
			cancel()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "nereus-securitytest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	tlsCA, err = certs.New(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "certificates:", err)
		return 1
	}
	tokenKey = filepath.Join(dir, "token-secret.key")
	if err := os.WriteFile(tokenKey, []byte("nereus-securitytest-hs256-secret-0123456789"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv, err = testserver.Launch(testserver.Options{Args: serverArgs()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start nereus serve:", err)
		return 1
	}
	defer srv.Close()
	if err := createUsers(); err != nil {
		fmt.Fprintln(os.Stderr, "create SCRAM users:", err)
		return 1
	}
	if err := grantBaseACLs(); err != nil {
		fmt.Fprintln(os.Stderr, "create ACLs:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "last lines of the server log:\n%s\n", srv.LogTail(80))
	}
	return code
}

func serverArgs() []string {
	return []string{
		"--kafka-listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"--kafka-sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,OAUTHBEARER",
		"--kafka-max-reauth", reauth.String(),
		"--kafka-authorizer", "--kafka-super-users", "User:admin",
		"--token-secret-key-file", tokenKey,
		"--pulsar-listeners", "pulsar://127.0.0.1:0,pulsar+ssl://127.0.0.1:0",
		"--pulsar-authentication-providers", "token,tls", "--pulsar-authorization",
		"--pulsar-superuser-roles", "admin", "--pulsar-auth-refresh-check", "1s",
		"--http-listeners", "http://127.0.0.1:0,https://127.0.0.1:0",
		"--tls-cert-file", tlsCA.CertFile, "--tls-key-file", tlsCA.KeyFile,
		"--tls-ca-file", tlsCA.CAFile, "--tls-client-auth", "requested",
		"--tls-reload-interval", "0",
		"--admin-auth", "token,tls", "--admin-roles", "admin", "--admin-read-only-roles", "monitor",
	}
}

// addr is the bound address of a listener by ID, failing the test if the
// server has none.
func addr(t testing.TB, id string) string {
	t.Helper()
	a := srv.ListenerAddr(id)
	if a == "" {
		t.Fatalf("server has no listener %s", id)
	}
	return a
}

var seq atomic.Int64

func unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, seq.Add(1))
}
