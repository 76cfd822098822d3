// Package etcdtest runs an embedded etcd (go.etcd.io/etcd/server/v3/embed)
// for tests: one server per test binary, started lazily by the first test
// that needs it, on loopback ports the OS picks, in a temporary directory.
// It owns only that server's lifetime and directory. It must never be
// imported by non-test code.
//
// The server is started inside a test, never in TestMain before m.Run:
// etcd's goroutines read process globals that testing.M.Run initialises,
// and starting it earlier races with them.
//
//	func TestMain(m *testing.M) { code := m.Run(); etcdtest.Stop(); os.Exit(code) }
//
//	func TestSomething(t *testing.T) {
//		ep := etcdtest.Endpoint(t)   // "127.0.0.1:PORT"
//		prefix := etcdtest.Prefix()  // a fresh "/nereus-test/N/" per call
//		...
//	}
//
// Embedded etcd needs no install, so tests using it never skip.
//
// A test that needs to stop and restart etcd (an outage) uses its own
// server: s := etcdtest.StartServer(t); s.Stop(); s.Restart(t).
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// readyTimeout bounds the server's start (the machine is shared and
// loaded).
const readyTimeout = 60 * time.Second

var (
	mu       sync.Mutex
	server   *embed.Etcd
	dir      string
	startErr error
	prefixes atomic.Int64
)

// Endpoint returns the client address (host:port) of the test binary's
// embedded etcd, starting it on first use. A failed start fails tb.
func Endpoint(tb testing.TB) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if server == nil && startErr == nil {
		startErr = start()
	}
	if startErr != nil {
		tb.Fatalf("etcdtest: %v", startErr)
	}
	return server.Clients[0].Addr().String()
}

// Prefix returns a key prefix no other caller in this test binary gets,
// so tests sharing the server do not see each other's keys.
func Prefix() string { return fmt.Sprintf("/nereus-test/%d/", prefixes.Add(1)) }

func start() error {
	d, err := os.MkdirTemp("", "nereus-etcdtest-")
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Dir = d
	cfg.LogLevel = "error"
	// Start-up failures come back from StartEtcd; what the server logs
	// besides is shutdown noise ("use of closed network connection").
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		_ = os.RemoveAll(d)
		return fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(readyTimeout):
		e.Close()
		_ = os.RemoveAll(d)
		return fmt.Errorf("embedded etcd not ready within %v", readyTimeout)
	}
	server, dir = e, d
	return nil
}

// Stop closes the server if a test started it and removes its directory.
// Call it from TestMain after m.Run.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if server != nil {
		server.Close()
		server = nil
	}
	if dir != "" {
		_ = os.RemoveAll(dir)
		dir = ""
	}
}

// Server is a private embedded etcd a test can stop and restart on the same
// ports and data directory, to simulate a metadata-store outage. Unlike
// the shared server of Endpoint it belongs to one test.
type Server struct {
	// Endpoint is the client address (host:port); it survives restarts.
	Endpoint string
	// TLS, when set, serves clients over TLS with this certificate and,
	// with TLS.CAFile, requires client certificates the CA verifies.
	TLS    *TLSFiles
	dir    string
	client string
	peer   string
	mu     sync.Mutex
	e      *embed.Etcd
}

// TLSFiles are PEM files of a TLS server (see StartTLSServer).
type TLSFiles struct{ CertFile, KeyFile, CAFile string }

// StartTLSServer is StartServer with client TLS (https) on, and client
// certificates required when f.CAFile is set.
func StartTLSServer(tb testing.TB, f TLSFiles) *Server {
	tb.Helper()
	return startServer(tb, &f)
}

// StartServer starts a private server; a cleanup stops it and removes its
// directory. A failed start fails tb.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	return startServer(tb, nil)
}

func startServer(tb testing.TB, tlsFiles *TLSFiles) *Server {
	tb.Helper()
	dir := tb.TempDir()
	client, err := freeAddr()
	if err != nil {
		tb.Fatal(err)
	}
	peer, err := freeAddr()
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{Endpoint: client, TLS: tlsFiles, dir: dir, client: client, peer: peer}
	if err := s.launch(); err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (s *Server) launch() error {
	cfg := embed.NewConfig()
	cfg.Dir = s.dir
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	c := url.URL{Scheme: "http", Host: s.client}
	if s.TLS != nil {
		c.Scheme = "https"
		cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = s.TLS.CertFile, s.TLS.KeyFile
		if s.TLS.CAFile != "" {
			cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = s.TLS.CAFile, true
		}
	}
	p := url.URL{Scheme: "http", Host: s.peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{c}, []url.URL{c}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{p}, []url.URL{p}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	var e *embed.Etcd
	var err error
	for attempt := range 20 { // a just-closed port can take a moment to free
		if e, err = embed.StartEtcd(cfg); err == nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("start embedded etcd on %s: %w", s.client, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(readyTimeout):
		e.Close()
		return fmt.Errorf("embedded etcd not ready within %v", readyTimeout)
	}
	s.mu.Lock()
	s.e = e
	s.mu.Unlock()
	return nil
}

// Stop closes the server and keeps its data (idempotent).
func (s *Server) Stop() {
	s.mu.Lock()
	e := s.e
	s.e = nil
	s.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts a stopped server again on the same ports and data.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.launch(); err != nil {
		tb.Fatalf("etcdtest: restart: %v", err)
	}
}
