package listener

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ClientAuth is whether TLS listeners ask for client certificates, in
// Kafka's words (ssl.client.auth).
type ClientAuth string

const (
	// ClientAuthNone asks for no client certificate.
	ClientAuthNone ClientAuth = "none"
	// ClientAuthRequested verifies a client certificate against the CA
	// when the client sends one; clients without one are still admitted.
	ClientAuthRequested ClientAuth = "requested"
	// ClientAuthRequired refuses the handshake of clients without a
	// certificate the CA verifies.
	ClientAuthRequired ClientAuth = "required"
)

// ParseClientAuth parses none | requested | required ("" is none).
func ParseClientAuth(s string) (ClientAuth, error) {
	switch ClientAuth(s) {
	case "", ClientAuthNone:
		return ClientAuthNone, nil
	case ClientAuthRequested, ClientAuthRequired:
		return ClientAuth(s), nil
	}
	return "", fmt.Errorf("tls client auth %q: want none, requested or required", s)
}

// TLSFiles names the TLS material of the process's TLS listeners. The
// files are PEM; they are read at start-up and again on every Reload.
type TLSFiles struct {
	// CertFile holds the server certificate, followed by any intermediate
	// certificates clients need to build the chain.
	CertFile string
	// KeyFile holds the certificate's private key (PKCS #1, PKCS #8 or
	// SEC 1). It is never logged.
	KeyFile string
	// CAFile holds the CA certificates client certificates are verified
	// against. Required unless ClientAuth is none.
	CAFile string
	// ClientAuth is none (default), requested or required.
	ClientAuth ClientAuth
}

// Configured reports whether any TLS material is named.
func (f TLSFiles) Configured() bool { return f.CertFile != "" || f.KeyFile != "" }

// Validate checks that the settings fit together.
func (f TLSFiles) Validate() error {
	if (f.CertFile == "") != (f.KeyFile == "") {
		return errors.New("tls-cert-file and tls-key-file go together")
	}
	ca, err := ParseClientAuth(string(f.ClientAuth))
	if err != nil {
		return err
	}
	if ca != ClientAuthNone && f.CAFile == "" {
		return fmt.Errorf("tls-client-auth %s needs tls-ca-file (the CA client certificates are verified against)", ca)
	}
	if ca != ClientAuthNone && f.CertFile == "" {
		return fmt.Errorf("tls-client-auth %s needs tls-cert-file and tls-key-file", ca)
	}
	return nil
}

// material is one loaded generation of the TLS files.
type material struct {
	cert     tls.Certificate
	pool     *x509.CertPool // nil without CAFile
	notAfter time.Time
	digest   [sha256.Size]byte // of the file contents, to skip no-op reloads
}

// Source serves the current TLS configuration of every TLS listener and
// reloads it: on Reload (the server calls it on SIGHUP) and, with Watch,
// when the files change. A reload that fails (unreadable file, key not
// matching the certificate, bad CA) keeps the previous material and
// reports the error: a rotated-in broken certificate must not take the
// listeners down. Connections already established keep the certificate
// they were accepted with; new handshakes get the new one.
type Source struct {
	files TLSFiles
	log   *slog.Logger
	cur   atomic.Pointer[material]
	mu    sync.Mutex // serialises loads

	reloads, failures atomic.Int64
}

// NewSource loads the files once; it fails if they are unusable.
func NewSource(files TLSFiles, log *slog.Logger) (*Source, error) {
	if err := files.Validate(); err != nil {
		return nil, err
	}
	if files.CertFile == "" {
		return nil, errors.New("nereus/listener: a TLS listener needs tls-cert-file and tls-key-file")
	}
	if log == nil {
		log = slog.Default()
	}
	files.ClientAuth, _ = ParseClientAuth(string(files.ClientAuth))
	s := &Source{files: files, log: log}
	m, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(m)
	return s, nil
}

func (s *Source) load() (*material, error) {
	certPEM, err := os.ReadFile(s.files.CertFile)
	if err != nil {
		return nil, fmt.Errorf("nereus/listener: tls cert file: %w", err)
	}
	keyPEM, err := os.ReadFile(s.files.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("nereus/listener: tls key file: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair's errors name no key bytes.
		return nil, fmt.Errorf("nereus/listener: tls cert %s / key %s: %w", s.files.CertFile, s.files.KeyFile, err)
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write(keyPEM)
	m := &material{cert: cert}
	if cert.Leaf != nil {
		m.notAfter = cert.Leaf.NotAfter
	}
	if s.files.CAFile != "" {
		caPEM, err := os.ReadFile(s.files.CAFile)
		if err != nil {
			return nil, fmt.Errorf("nereus/listener: tls ca file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("nereus/listener: tls ca file %s holds no PEM certificate", s.files.CAFile)
		}
		m.pool = pool
		h.Write(caPEM)
	}
	copy(m.digest[:], h.Sum(nil))
	return m, nil
}

// Reload re-reads the files. changed is false when their contents are the
// same as what is served; on error the served material is kept.
func (s *Source) Reload() (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.load()
	if err != nil {
		s.failures.Add(1)
		return false, err
	}
	old := s.cur.Load()
	if old != nil && bytes.Equal(old.digest[:], m.digest[:]) {
		return false, nil
	}
	s.cur.Store(m)
	s.reloads.Add(1)
	return true, nil
}

// ReloadAndLog reloads and logs the outcome (for SIGHUP and Watch).
func (s *Source) ReloadAndLog(cause string) {
	changed, err := s.Reload()
	switch {
	case err != nil:
		s.log.Error("TLS reload failed; still serving the previous certificate", "cause", cause, "err", err)
	case changed:
		s.log.Info("TLS certificate reloaded", "cause", cause, "cert", s.files.CertFile, "not_after", s.NotAfter())
	default:
		s.log.Debug("TLS files unchanged", "cause", cause)
	}
}

// Watch polls the files every interval until ctx ends and reloads when
// their contents change. Polling (rather than inotify) follows the
// atomic-rename and symlink-swap rotations secret managers do.
func (s *Source) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.ReloadAndLog("file change check")
		}
	}
}

// NotAfter is the expiry of the served certificate.
func (s *Source) NotAfter() time.Time { return s.cur.Load().notAfter }

// Reloads and Failures count applied and failed reloads.
func (s *Source) Reloads() int64  { return s.reloads.Load() }
func (s *Source) Failures() int64 { return s.failures.Load() }

// ClientAuth is the configured client-certificate policy.
func (s *Source) ClientAuth() ClientAuth { return s.files.ClientAuth }

// ServerConfig returns a tls.Config for a listener. Each handshake picks
// up the material current at that moment.
func (s *Source) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.cur.Load()
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{m.cert},
				ClientCAs:    m.pool,
			}
			switch s.files.ClientAuth {
			case ClientAuthRequested:
				c.ClientAuth = tls.VerifyClientCertIfGiven
			case ClientAuthRequired:
				c.ClientAuth = tls.RequireAndVerifyClientCert
			}
			return c, nil
		},
	}
}

// DefaultHandshakeTimeout bounds a TLS handshake on Kafka and Pulsar
// listeners (HTTP uses the server's header timeout).
const DefaultHandshakeTimeout = 10 * time.Second

// Handshake completes the TLS handshake of a connection accepted from a
// TLS listener, within timeout; for a plaintext connection it does
// nothing. Front ends call it first thing on the connection's goroutine,
// so a client that opens a socket and never finishes (or sends garbage)
// costs one goroutine for at most timeout and never blocks Accept.
func Handshake(nc net.Conn, timeout time.Duration) error {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return nil
	}
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	if err := tc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if err := tc.Handshake(); err != nil {
		return err
	}
	return tc.SetDeadline(time.Time{})
}

// PeerCertificate returns the client certificate of a TLS connection whose
// handshake completed and which the CA verified, or nil (plaintext, no
// certificate sent, or no handshake yet).
func PeerCertificate(nc net.Conn) *x509.Certificate {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return nil
	}
	st := tc.ConnectionState()
	if !st.HandshakeComplete || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return nil
	}
	return st.PeerCertificates[0]
}

// IsTLS reports whether the connection is a TLS one.
func IsTLS(nc net.Conn) bool {
	_, ok := nc.(*tls.Conn)
	return ok
}
