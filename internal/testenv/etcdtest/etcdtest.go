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
package etcdtest

import (
	"fmt"
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
