package listener

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
)

// Bound is a listening socket with its Spec. Accept returns plain TCP
// connections, or *tls.Conn for a TLS listener with the handshake not yet
// run (Handshake runs it on the connection's goroutine; net/http runs it
// itself under its header timeout), so accepting never waits on a client.
type Bound struct {
	net.Listener
	spec Spec
	tls  *tls.Config
}

// Listen binds spec. A TLS listener needs src.
func Listen(spec Spec, src *Source) (*Bound, error) {
	if spec.Security.TLS && src == nil {
		return nil, fmt.Errorf("listener %s uses TLS but no TLS certificate is configured (tls-cert-file, tls-key-file)", spec.ID())
	}
	ln, err := net.Listen("tcp", spec.Bind)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", spec.ID(), err)
	}
	b := &Bound{Listener: ln, spec: spec}
	if spec.Security.TLS {
		b.tls = src.ServerConfig()
	}
	return b, nil
}

// Wrap describes an already bound listener. A *Bound is returned as is; any
// other listener becomes a plaintext listener of protocol p named name
// (front ends served a bare net.Listener in tests).
func Wrap(ln net.Listener, p Protocol, name string) *Bound {
	if b, ok := ln.(*Bound); ok {
		return b
	}
	return &Bound{Listener: ln, spec: Spec{Protocol: p, Name: name, Bind: ln.Addr().String()}}
}

// Accept waits for the next connection.
func (b *Bound) Accept() (net.Conn, error) {
	c, err := b.Listener.Accept()
	if err != nil || b.tls == nil {
		return c, err
	}
	return tls.Server(c, b.tls), nil
}

// Spec is the listener's configuration, with Bind the actual bound
// address (the real port when ":0" was configured).
func (b *Bound) Spec() Spec {
	s := b.spec
	s.Bind = b.Listener.Addr().String()
	return s
}

// Endpoint is what the listener advertises: the configured advertised
// address, else the bound address; Host is empty for a wildcard bind
// without an advertised address (see AdvertisedFor).
func (b *Bound) Endpoint() Endpoint {
	s := b.Spec()
	e := Endpoint{Protocol: s.Protocol, Name: s.Name, Security: s.Security}
	addr := s.Advertise
	if addr == "" {
		addr = s.Bind
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return e
	}
	e.Port, _ = strconv.Atoi(port)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = ""
	}
	e.Host = host
	return e
}

// AdvertisedFor is the endpoint to give a client whose connection arrived
// at local (its net.Conn's LocalAddr): Endpoint, with a missing host filled
// in from the address the client reached.
func (b *Bound) AdvertisedFor(local net.Addr) Endpoint {
	e := b.Endpoint()
	if e.Host != "" || local == nil {
		return e
	}
	if host, _, err := net.SplitHostPort(local.String()); err == nil {
		e.Host = host
	}
	return e
}

// ErrNoHost is returned by Dialable for an endpoint without a host.
var ErrNoHost = errors.New("nereus/listener: listener binds a wildcard address and has no advertised address")

// Dialable checks an endpoint can be handed to a client that did not
// connect through it (a broker registry, another node's Metadata answer).
func Dialable(e Endpoint) error {
	if e.Host == "" {
		return ErrNoHost
	}
	return nil
}
