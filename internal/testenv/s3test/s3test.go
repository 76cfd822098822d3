// Package s3test runs a real S3-compatible server (versitygw, posix backend)
// for tests and benchmarks: one server per test binary, started on first
// use on a free loopback port with a temporary root, stopped by pid when the
// tests end. It owns finding the binary, starting, readiness and shutdown.
// It must never be imported by non-test code, and never touch anything but
// the process and directory it created.
//
// Use it from any package:
//
//	func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		srv := s3test.Require(t)  // skips (or fails) when versitygw is missing
//		store := srv.NewStore(t)  // fresh bucket, *s3store.Store
//		cfg := srv.Config(srv.NewBucket(t)) // or just the s3store.Config
//		...
//	}
//
// The binary is found, in order, at $NEREUS_VERSITYGW, at
// <module root>/.cache/bin/versitygw (installed by scripts/install-tools.sh),
// or on $PATH. When it is missing, Require skips the test with a message,
// or fails it if NEREUS_REQUIRE_EXTERNAL=1 (CI sets that, so a missing
// install step cannot pass as a skip).
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nereusstream/nereus-go/internal/testenv"
	"github.com/nereusstream/nereus-go/objectstore/s3store"
)

// Environment variables.
const (
	// EnvBinary names the versitygw binary to use.
	EnvBinary = "NEREUS_VERSITYGW"
)

const (
	accessKey = "nereus-test"
	secretKey = "nereus-test-secret"
	region    = "us-east-1"
	// startTimeout bounds how long the server may take to answer S3 calls
	// (the machine is shared and loaded).
	startTimeout = 60 * time.Second
)

// Server is a running versitygw. Its methods are safe for concurrent use.
type Server struct {
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:40123.
	Endpoint string
	// Root is the posix backend's directory (buckets are subdirectories).
	Root string

	bin, addr string
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
	buckets   atomic.Uint64
	admin     *s3.Client
}

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
)

// Main runs the package's tests and then stops the shared server if any
// test started it. Call it from TestMain: os.Exit(s3test.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "s3test: stopping versitygw: %v\n", err)
		}
		shared = nil
	}
	return code
}

// Require returns the test binary's shared server, starting it on first
// use. If versitygw is not installed it skips tb, or fails it when
// NEREUS_REQUIRE_EXTERNAL=1. A server that fails to start fails tb.
func Require(tb testing.TB) *Server {
	tb.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		bin, err := FindBinary()
		if err != nil {
			sharedErr = err
		} else {
			shared, sharedErr = Start(bin)
		}
	}
	if sharedErr != nil {
		var nb *notInstalledError
		if errors.As(sharedErr, &nb) {
			testenv.SkipOrFail(tb, "s3test: %v", sharedErr)
		}
		tb.Fatalf("s3test: %v", sharedErr)
	}
	return shared
}

type notInstalledError struct{ detail string }

func (e *notInstalledError) Error() string {
	return "versitygw not found (" + e.detail + "); install it with scripts/install-tools.sh"
}

// FindBinary locates versitygw: $NEREUS_VERSITYGW, then
// <module root>/.cache/bin/versitygw, then $PATH.
func FindBinary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", &notInstalledError{detail: fmt.Sprintf("%s=%s: %v", EnvBinary, p, err)}
		}
		return p, nil
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, ".cache", "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	return "", &notInstalledError{detail: "not in $" + EnvBinary + ", .cache/bin or $PATH"}
}

// moduleRoot walks up from the working directory (a test's package
// directory) to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Start starts versitygw from bin on a free loopback port with a fresh
// temporary root and waits until it answers S3 requests. Most callers want
// Require; Start is for harnesses that manage the lifetime themselves.
func Start(bin string) (*Server, error) {
	var lastErr error
	// The free port is chosen by binding :0 and releasing it, so another
	// process can grab it before versitygw binds: retry a few times.
	for range 3 {
		s, err := start(bin)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(bin string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "nereus-versitygw-")
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := &Server{Endpoint: "http://" + addr, Root: root, bin: bin, addr: addr}
	s.admin = s3.New(s3.Options{
		Region:       region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  aws.NewCredentialsCache(staticCreds{}),
	})
	if err := s.launch(); err != nil {
		_ = os.RemoveAll(root)
		return nil, err
	}
	return s, nil
}

// launch starts the process on s.addr and s.Root and waits until it
// answers S3 calls.
func (s *Server) launch() error {
	// Global flags go before the backend subcommand; the root is positional.
	cmd := exec.Command(s.bin, "--quiet", "--port", s.addr, "posix", s.Root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+accessKey, "ROOT_SECRET_KEY="+secretKey)
	var stderr strings.Builder
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	cmd.SysProcAttr = testenv.ChildProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.waitReady(ctx); err != nil {
		s.kill()
		return fmt.Errorf("versitygw on %s did not become ready: %w; output: %s", s.addr, err, stderr.String())
	}
	return nil
}

// Kill stops the process with SIGKILL and keeps its root (its buckets and
// objects), to simulate an object-store outage; Restart brings it back.
// Only for a server from Start, never the shared one of Require.
func (s *Server) Kill() { s.kill() }

func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	select {
	case <-exited:
	default:
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Restart starts a killed server again on the same address and root. The
// port was free a moment ago, so a retry covers a brief reuse delay.
func (s *Server) Restart() error {
	var err error
	for attempt := range 10 {
		if err = s.launch(); err == nil {
			return nil
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	return err
}

type staticCreds struct{}

func (staticCreds) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey, Source: "s3test"}, nil
}

func (s *Server) exitedCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exited
}

// waitReady polls ListBuckets until it succeeds, the process exits, or ctx
// ends.
func (s *Server) waitReady(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.admin.ListBuckets(callCtx, &s3.ListBucketsInput{})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exitedCh():
			return errors.New("process exited")
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop terminates the server (SIGTERM, then SIGKILL after 10s) by its pid
// and removes its root directory.
func (s *Server) Stop() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	select {
	case <-exited:
	default:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	return os.RemoveAll(s.Root)
}

// NewBucket creates a uniquely named empty bucket through the S3 API (a
// bare directory would lack the bucket's metadata) and returns its name.
// The bucket is left for Stop to remove with the whole root.
func (s *Server) NewBucket(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("nereus-%d-%d", os.Getpid(), s.buckets.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		tb.Fatalf("s3test: create bucket %s: %v", name, err)
	}
	return name
}

// Config returns an s3store configuration for bucket on this server
// (path-style, static credentials, loopback endpoint).
func (s *Server) Config(bucket string) s3store.Config {
	return s3store.Config{
		Bucket:          bucket,
		Region:          region,
		Endpoint:        s.Endpoint,
		UsePathStyle:    true,
		AccessKeyID:     accessKey,
		SecretAccessKey: secretKey,
	}
}

// NewStore creates a fresh bucket and returns a store on it.
func (s *Server) NewStore(tb testing.TB) *s3store.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := s3store.New(ctx, s.Config(s.NewBucket(tb)))
	if err != nil {
		tb.Fatalf("s3test: %v", err)
	}
	return st
}
