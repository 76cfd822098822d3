// Package securitytest runs unmodified clients against one `nereus serve`
// with every security feature switched on: TLS on Kafka (SSL), Pulsar
// (pulsar+ssl://) and admin HTTP (https://) listeners next to plaintext
// loopback ones, certificates from a throwaway CA (internal/testenv/certs),
// and the reload of rotated certificates on SIGHUP. One server serves the
// whole package (CI budget); tests use unique topic names.
//
// It holds tests only and must never be imported.
package securitytest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/internal/testenv/certs"
	"github.com/nereusstream/nereus-go/internal/testserver"
)

var (
	srv   *testserver.Server
	tlsCA *certs.Set
)

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
	srv, err = testserver.Launch(testserver.Options{Args: serverArgs()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start nereus serve:", err)
		return 1
	}
	defer srv.Close()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "last lines of the server log:\n%s\n", srv.LogTail(80))
	}
	return code
}

func serverArgs() []string {
	return []string{
		"--kafka-listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"--pulsar-listeners", "pulsar://127.0.0.1:0,pulsar+ssl://127.0.0.1:0",
		"--http-listeners", "http://127.0.0.1:0,https://127.0.0.1:0",
		"--tls-cert-file", tlsCA.CertFile, "--tls-key-file", tlsCA.KeyFile,
		"--tls-ca-file", tlsCA.CAFile, "--tls-client-auth", "requested",
		"--tls-reload-interval", "0",
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
