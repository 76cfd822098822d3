// Package etcdproc runs a real etcd server process for multi-process tests
// (several `nereus serve` processes sharing one metadata store), where the
// embedded server of etcdtest would live and die with the test binary
// instead of standing apart like a production etcd.
//
// The binary is $NEREUS_ETCD, else <module root>/.cache/bin/etcd (built by
// scripts/install-tools.sh etcd with `go build go.etcd.io/etcd/server/v3`,
// the etcd server module pinned in go.mod), else etcd on $PATH. It owns only
// the processes it starts (stopped by pid) and their temporary data dirs.
// It must never be imported by non-test code.
package etcdproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nereusstream/nereus-go/internal/testenv"
)

// EnvBinary overrides the etcd binary.
const EnvBinary = "NEREUS_ETCD"

// Server is a running etcd process.
type Server struct {
	// Endpoint is the client address (host:port).
	Endpoint string
	cmd      *exec.Cmd
	dir      string
	done     chan struct{}
	once     sync.Once
}

// FindBinary locates etcd.
func FindBinary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, ".cache", "bin", "etcd")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	return "", errors.New("etcd not found ($NEREUS_ETCD, .cache/bin/etcd, $PATH); build it with scripts/install-tools.sh etcd")
}

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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts an etcd process on free loopback ports and waits until it
// answers; tb's cleanup stops it. A missing binary is testenv.SkipOrFail.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := FindBinary()
	if err != nil {
		testenv.SkipOrFail(tb, "etcdproc: %v", err)
	}
	dir, err := os.MkdirTemp("", "nereus-etcdproc-")
	if err != nil {
		tb.Fatal(err)
	}
	cport, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	pport, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	client := "http://127.0.0.1:" + strconv.Itoa(cport)
	peer := "http://127.0.0.1:" + strconv.Itoa(pport)
	cmd := exec.Command(bin, "--name", "nereus-test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "nereus-test="+peer, "--log-level", "error")
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = testenv.ChildProcAttr()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("etcdproc: start %s: %v", bin, err)
	}
	s := &Server{Endpoint: "127.0.0.1:" + strconv.Itoa(cport), cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(s.done) }()
	tb.Cleanup(s.Stop)
	if err := s.waitReady(60 * time.Second); err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
		tb.Fatalf("etcdproc: %v\n%s", err, b)
	}
	return s
}

func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 2 * time.Second})
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err = c.Get(ctx, "ready-probe")
			cancel()
			c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-s.done:
			return errors.New("etcd exited during start-up")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd did not answer within %v: %v", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop terminates the process (by pid) and removes its data dir.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		os.RemoveAll(s.dir)
	})
}
