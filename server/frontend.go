package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/stream"
)

// Frontend is a protocol front end (Kafka, Pulsar) hosted by the server.
// The server owns the listener: it binds the configured address, hands the
// listener to Serve, and calls Shutdown once on drain.
//
// Serve blocks until the front end stops; after Shutdown it must return
// (any error it returns then is ignored). Shutdown must stop accepting,
// let in-flight requests finish (their appends settle) until ctx ends, then
// close remaining connections and return. The server closes storage only
// after every front end's Shutdown returned.
type Frontend interface {
	Serve(l net.Listener) error
	Shutdown(ctx context.Context) error
}

// HTTPFrontend is implemented by front ends that also serve HTTP on the
// admin port (e.g. Pulsar's lookup and admin REST paths). The handler is
// mounted at every pattern in FrontendSpec.HTTPPatterns.
type HTTPFrontend interface {
	HTTPHandler() http.Handler
}

// Deps is what a front end gets from the server.
type Deps struct {
	Storage stream.Storage
	// NodeID is this broker's stable identity (persisted in the data dir).
	// Use it as stream.SessionOptions.WriterID so every front end in the
	// process shares one owner per stream and a restarted process is
	// recognised as the same writer.
	NodeID string
	Config Config
	Logger *slog.Logger
	// Registerer is the server's Prometheus registry (/metrics).
	Registerer prometheus.Registerer
	// Addr is the address the front end's listener is bound to (the real
	// port when the configured one was ":0"); advertise this one.
	Addr net.Addr
}

// FrontendSpec describes one front end to host.
type FrontendSpec struct {
	// Name labels logs, metrics and /healthz listeners ("kafka").
	Name string
	// Addr is the listen address; empty disables the front end.
	Addr string
	// HTTPPatterns are admin-mux patterns (Go 1.22 ServeMux syntax, e.g.
	// "/admin/v2/") routed to the front end's HTTPHandler, if it has one.
	HTTPPatterns []string
	// New builds the front end once its listener is bound.
	New func(Deps) (Frontend, error)
}

// DefaultFrontends returns the front ends `nereus serve` hosts for cfg.
//
// This is the one place protocol front ends are wired in. Each entry binds
// its configured address; an empty address disables it. For example:
//
//	{Name: "kafka", Addr: cfg.KafkaAddr, New: func(d Deps) (Frontend, error) {
//		return kafka.NewServer(kafka.Config{Storage: d.Storage, ...})
//	}},
//	{Name: "pulsar", Addr: cfg.PulsarAddr, HTTPPatterns: []string{"/admin/v2/", "/lookup/v2/"},
//		New: func(d Deps) (Frontend, error) { return pulsar.NewServer(...) }},
func DefaultFrontends(cfg Config) []FrontendSpec {
	return nil
}
