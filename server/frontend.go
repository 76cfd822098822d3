package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/kafka"
	"github.com/nereusstream/nereus-go/kafka/kafkaprom"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/pulsar"
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
	// Metadata is the metadata store the storage commits through. Front
	// ends keep protocol state (topics, offsets, cursors) in it under their
	// own key prefix ("kafka/", "pulsar/"), never touching stream records.
	Metadata metadata.Store
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
	// HTTPAddr is the admin HTTP listener's bound address (for front ends
	// that hand out HTTP URLs, e.g. Pulsar lookups), when known.
	HTTPAddr net.Addr
	// Cluster is this node's cluster membership: who the other brokers
	// are, who owns which stream or coordinator, and the append sessions of
	// owned streams (front ends take them only through Cluster.Writer).
	// One node alone is a cluster of one.
	Cluster *cluster.Node
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
// its configured address; an empty address disables it.
func DefaultFrontends(cfg Config) []FrontendSpec {
	return []FrontendSpec{
		{Name: "kafka", Addr: cfg.KafkaAddr, New: newKafkaFrontend},
		{Name: "pulsar", Addr: cfg.PulsarAddr, HTTPPatterns: []string{"/admin/v2/", "/lookup/v2/"}, New: newPulsarFrontend},
	}
}

func newPulsarFrontend(d Deps) (Frontend, error) {
	host, port, err := advertised(d.Config.PulsarAdvertisedAddr, d.Addr)
	if err != nil {
		return nil, fmt.Errorf("pulsar advertised address: %w", err)
	}
	httpURL := ""
	if d.HTTPAddr != nil {
		if h, p, err := advertised(d.Config.HTTPAdvertisedAddr, d.HTTPAddr); err == nil {
			httpURL = "http://" + net.JoinHostPort(h, strconv.Itoa(p))
		}
	}
	return pulsar.NewServer(pulsar.Config{
		AdvertisedAddr: net.JoinHostPort(host, strconv.Itoa(port)), HTTPAdvertisedURL: httpURL,
		Logger: d.Logger.With("frontend", "pulsar"),
	}, d.Storage, d.Metadata)
}

func newKafkaFrontend(d Deps) (Frontend, error) {
	host, port, err := advertised(d.Config.KafkaAdvertisedAddr, d.Addr)
	if err != nil {
		return nil, fmt.Errorf("kafka advertised address: %w", err)
	}
	m := kafkaprom.New()
	srv, err := kafka.NewServer(kafka.Config{
		Cluster: d.Cluster, WriterID: d.NodeID, Logger: d.Logger.With("frontend", "kafka"),
		AdvertisedHost: host, AdvertisedPort: int32(port), RequestHook: m.RequestHook,
	}, d.Storage, d.Metadata)
	if err != nil {
		return nil, err
	}
	m.Attach(srv)
	if d.Registerer != nil {
		if err := d.Registerer.Register(m); err != nil {
			d.Logger.Warn("kafka metrics not registered", "err", err)
		}
	}
	return srv, nil
}

// advertised picks the address to tell clients: the configured one, else
// the bound listener's.
func advertised(configured string, bound net.Addr) (string, int, error) {
	addr := configured
	if addr == "" {
		addr = bound.String()
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		return "", 0, fmt.Errorf("%q is not an address clients can dial; set an advertised address", addr)
	}
	return host, port, nil
}
