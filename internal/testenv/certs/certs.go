// Package certs makes a throwaway certificate authority and certificates
// for TLS tests: a CA, a server certificate valid for 127.0.0.1, ::1 and
// localhost, and client certificates with a chosen common name, written as
// PEM files into a directory.
//
// It is for tests only and must never be imported by non-test code (the
// keys are weak by design: ECDSA P-256, short-lived, unprotected files).
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Set is a CA and the files of one server certificate.
type Set struct {
	Dir string
	// CAFile, CertFile, KeyFile are PEM files: the CA certificate, the
	// server certificate and its key.
	CAFile, CertFile, KeyFile string

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	pool  *x509.CertPool
}

// New writes a CA and a server certificate into dir.
func New(dir string) (*Set, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Nereus Test CA", Organization: []string{"Nereus"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(48 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	s := &Set{Dir: dir, CAFile: filepath.Join(dir, "ca.pem"), ca: ca, caKey: caKey, pool: x509.NewCertPool()}
	s.pool.AddCert(ca)
	if err := writePEM(s.CAFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	s.CertFile, s.KeyFile, err = s.Issue("server", "localhost", true)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// NewT is New in t.TempDir(), failing the test on error.
func NewT(t testing.TB) *Set {
	t.Helper()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Issue writes <name>.pem and <name>-key.pem: a certificate for commonName
// signed by the CA; server certificates also name 127.0.0.1, ::1 and
// localhost.
func (s *Set) Issue(name, commonName string, server bool) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"Nereus"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca, &key.PublicKey, s.caKey)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile = filepath.Join(s.Dir, name+".pem")
	keyFile = filepath.Join(s.Dir, name+"-key.pem")
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	if err := writePEM(keyFile, "PRIVATE KEY", kder); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// ClientConfig is a TLS client configuration trusting the CA, presenting
// the given client certificate files when certFile is not empty.
func (s *Set) ClientConfig(certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{RootCAs: s.pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Pool is the CA as a certificate pool.
func (s *Set) Pool() *x509.CertPool { return s.pool }

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func writePEM(path, typ string, der []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
