package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/internal/authtoken"
	"github.com/nereusstream/nereus-go/kafka"
	"github.com/nereusstream/nereus-go/kafka/kafkaprom"
	"github.com/nereusstream/nereus-go/kop"
	"github.com/nereusstream/nereus-go/listener"
	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/pulsar"
	"github.com/nereusstream/nereus-go/pulsar/pulsarprom"
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
	// Addr is the address the front end's first listener is bound to (the
	// real port when the configured one was ":0").
	Addr net.Addr
	// Listeners are the front end's bound listeners, in configuration
	// order; Serve is called once for each.
	Listeners []*listener.Bound
	// Endpoints are the advertised endpoints of every listener of this
	// process, all protocols (Pulsar lookups hand out the pulsar+ssl:// and
	// https:// addresses next to the one the client used).
	Endpoints []listener.Endpoint
	// HTTPAddr is the first admin HTTP listener's bound address.
	HTTPAddr net.Addr
	// TLS serves the certificate of TLS listeners (nil without TLS).
	TLS *listener.Source
	// Tokens validates JWT bearer credentials (nil without a token key).
	Tokens *authtoken.Validator
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
	// Listeners are the listeners the front end serves; none disables it.
	Listeners []listener.Spec
	// Addr is a shorthand for one plaintext listener (tests); ignored when
	// Listeners is set. Empty (and no Listeners) disables the front end.
	Addr string
	// HTTPPatterns are admin-mux patterns (Go 1.22 ServeMux syntax, e.g.
	// "/admin/v2/") routed to the front end's HTTPHandler, if it has one.
	HTTPPatterns []string
	// New builds the front end once its listeners are bound.
	New func(Deps) (Frontend, error)
}

func (f FrontendSpec) listenerSpecs() []listener.Spec {
	if len(f.Listeners) > 0 || f.Addr == "" {
		return f.Listeners
	}
	return []listener.Spec{{Protocol: listener.Protocol(f.Name), Name: listener.DefaultName, Bind: f.Addr}}
}

// DefaultFrontends returns the front ends `nereus serve` hosts for cfg.
//
// This is the one place protocol front ends are wired in. Each serves the
// configured listeners of its protocol; none disables it.
func DefaultFrontends(cfg Config) []FrontendSpec {
	specs, _ := cfg.ListenerSpecs() // validated by Start
	of := func(p listener.Protocol) []listener.Spec {
		var out []listener.Spec
		for _, s := range specs {
			if s.Protocol == p {
				out = append(out, s)
			}
		}
		return out
	}
	// One Pulsar storage boundary per process, shared by the Pulsar front
	// end and the Kafka front end's KoP projection (Kafka clients on Pulsar
	// topics), so both hold one append session per stream.
	ledgers := &sharedLedgers{}
	return []FrontendSpec{
		{Name: "kafka", Listeners: of(listener.Kafka), HTTPPatterns: kafka.HTTPPatterns,
			New: func(d Deps) (Frontend, error) { return newKafkaFrontend(d, ledgers) }},
		{Name: "pulsar", Listeners: of(listener.Pulsar), HTTPPatterns: []string{"/admin/v2/", "/lookup/v2/"},
			New: func(d Deps) (Frontend, error) { return newPulsarFrontend(d, ledgers) }},
	}
}

// sharedLedgers makes the process's managed-ledger factory once, for
// whichever front end needs it first.
type sharedLedgers struct {
	mu sync.Mutex
	f  *managedledger.Factory
}

func (s *sharedLedgers) get(d Deps) (*managedledger.Factory, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		return s.f, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := pulsar.NewLedgers(ctx, d.Storage, d.Metadata, pulsar.Config{Cluster: d.Cluster, Logger: d.Logger.With("frontend", "pulsar")})
	if err != nil {
		return nil, err
	}
	s.f = f
	return f, nil
}

func newPulsarFrontend(d Deps, ledgers *sharedLedgers) (Frontend, error) {
	ml, err := ledgers.get(d)
	if err != nil {
		return nil, err
	}
	var eps []listener.Endpoint
	for _, e := range d.Endpoints {
		if e.Protocol == listener.Pulsar || e.Protocol == listener.HTTP {
			eps = append(eps, e)
		}
	}
	srv, err := pulsar.NewServer(pulsar.Config{
		Endpoints:                 eps,
		Cluster:                   d.Cluster,
		Logger:                    d.Logger.With("frontend", "pulsar"),
		Ledgers:                   ml,
		MaxMessageSize:            int(d.Config.Pulsar.MaxMessageSize),
		DefaultRetention:          d.Config.Pulsar.defaultRetention(),
		BacklogQuotaCheckInterval: d.Config.Pulsar.BacklogQuotaCheckInterval,
		Auth: pulsar.AuthConfig{
			Providers:      d.Config.pulsarProviders(),
			Tokens:         d.Tokens,
			AnonymousRole:  d.Config.PulsarAnonymousRole,
			Authorization:  d.Config.PulsarAuthorization,
			SuperUserRoles: splitRoles(d.Config.PulsarSuperUserRoles),
			RefreshCheck:   d.Config.PulsarAuthRefreshCheck,
		},
	}, d.Storage, d.Metadata)
	if err != nil {
		return nil, err
	}
	if d.Registerer != nil {
		if err := d.Registerer.Register(pulsarprom.New(srv, "standalone")); err != nil {
			d.Logger.Warn("pulsar metrics not registered", "err", err)
		}
	}
	return srv, nil
}

func newKafkaFrontend(d Deps, ledgers *sharedLedgers) (Frontend, error) {
	m := kafkaprom.New()
	ml, err := ledgers.get(d)
	if err != nil {
		return nil, err
	}
	proj, err := kop.New(kop.Config{Ledgers: ml, MaxMessageSize: int(d.Config.Pulsar.MaxMessageSize), Logger: d.Logger.With("frontend", "kafka")})
	if err != nil {
		return nil, err
	}
	srv, err := kafka.NewServer(kafka.Config{
		Cluster: d.Cluster, WriterID: d.NodeID, Logger: d.Logger.With("frontend", "kafka"),
		RequestHook: m.RequestHook, MaxRequestBytes: int32(d.Config.KafkaMaxRequestBytes),
		DisableAutoCreateTopics: !d.Config.KafkaAutoCreateTopics, DefaultPartitions: int32(d.Config.KafkaNumPartitions),
		MinSessionTimeout: d.Config.KafkaGroupMinSessionTimeout, MaxSessionTimeout: d.Config.KafkaGroupMaxSessionTimeout,
		MaxTransactionTimeout:       d.Config.KafkaTransactionMaxTimeout,
		ConsumerGroupSessionTimeout: d.Config.KafkaConsumerSessionTimeout, ConsumerGroupHeartbeatInterval: d.Config.KafkaConsumerHeartbeatInterval,
		Security: kafka.SecurityConfig{
			SASLMechanisms: d.Config.kafkaMechanisms(),
			Tokens:         d.Tokens,
			MaxReauth:      d.Config.KafkaMaxReauth,

			Authorizer:           d.Config.KafkaAuthorizer,
			SuperUsers:           d.Config.kafkaSuperUsers(),
			AllowEveryoneIfNoACL: d.Config.KafkaAllowEveryoneIfNoACL,
		},
		Projection: proj,
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
