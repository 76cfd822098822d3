package pulsar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/internal/latency"
	"github.com/nereusstream/nereus-go/listener"
	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/stream"
)

// ServerVersion is reported in CONNECTED.
const ServerVersion = "Nereus Pulsar 0.1.0"

// Server is a Pulsar broker over Nereus storage.
type Server struct {
	cfg         Config
	log         *slog.Logger
	ml          *managedledger.Factory
	incarnation int64
	producerSeq atomic.Int64
	ctx         context.Context // canceled by Shutdown/kill
	cancel      context.CancelFunc
	publish     [numPublishStages]latency.Histogram // publish_metrics.go

	mu        sync.Mutex
	listeners []*listener.Bound
	conns     map[*conn]struct{}
	topics    map[string]*topicLoad
	closing   bool
	wg        sync.WaitGroup // connection and background goroutines

	compactions compactions // last compaction pass per topic (compaction.go)
	advertise   string

	// cluster decides which topics this broker serves (cfg.Cluster, or a
	// cluster of one the server made: ownCluster).
	cluster    *cluster.Node
	ownCluster bool
}

type topicLoad struct {
	done chan struct{}
	t    *topic
	err  error
}

// NewServer returns a broker over storage and meta. It allocates a broker
// incarnation from metadata, part of every generated producer name (unique
// across restarts). Append sessions come from the cluster node, which
// fences a previous owner by the session's own CAS — not by incarnation, so
// an older broker can own a topic again once it is assigned it.
func NewServer(cfg Config, storage stream.Storage, meta metadata.Store) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	initCtx, initCancel := context.WithTimeout(ctx, 30*time.Second)
	defer initCancel()
	inc, err := managedledger.AllocateIncarnation(initCtx, meta)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("nereus/pulsar: allocate broker incarnation: %w", err)
	}
	node, own := cfg.Cluster, false
	if node == nil {
		node, err = cluster.Join(initCtx, cluster.Config{Metadata: meta, Storage: storage,
			NodeID: fmt.Sprintf("pulsar-broker-%d", inc), KafkaBrokerID: 1, Logger: cfg.Logger})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("nereus/pulsar: joining a cluster of one: %w", err)
		}
		own = true
	}
	ml := cfg.Ledgers
	if ml == nil {
		lc := cfg
		lc.Cluster = node
		if ml, err = NewLedgers(initCtx, storage, meta, lc); err != nil {
			cancel()
			if own {
				_ = node.Close()
			}
			return nil, err
		}
	}
	s := &Server{
		cluster:     node,
		ownCluster:  own,
		cfg:         cfg,
		log:         cfg.Logger.With("component", "pulsar"),
		incarnation: inc,
		ctx:         ctx,
		cancel:      cancel,
		conns:       map[*conn]struct{}{},
		topics:      map[string]*topicLoad{},
		advertise:   cfg.AdvertisedAddr,
		ml:          ml,
	}
	s.wg.Add(3)
	go s.statsLoop()
	go s.followCluster()
	go s.backlogQuotaLoop()
	return s, nil
}

// NewLedgers makes the managed-ledger factory a broker serves topics
// from, and creates the default tenant and namespace as a Pulsar standalone
// does. Append sessions come from cfg.Cluster (the owner of each topic's
// stream takes it); without one, straight from the storage under a fresh
// broker incarnation as authority epoch, so a later broker fences an
// earlier one (embedding and tests).
func NewLedgers(ctx context.Context, storage stream.Storage, meta metadata.Store, cfg Config) (*managedledger.Factory, error) {
	cfg = cfg.withDefaults()
	mc := managedledger.Config{Profile: cfg.StorageProfile, Logger: cfg.Logger.With("component", "pulsar")}
	if cfg.Cluster != nil {
		mc.Writers = cfg.Cluster
	} else {
		inc, err := managedledger.AllocateIncarnation(ctx, meta)
		if err != nil {
			return nil, fmt.Errorf("nereus/pulsar: allocate broker incarnation: %w", err)
		}
		mc.WriterID, mc.AuthorityEpoch = fmt.Sprintf("pulsar-broker-%d", inc), inc
	}
	ml := managedledger.NewFactory(storage, meta, mc)
	if err := ml.EnsureDefaults(ctx); err != nil {
		return nil, fmt.Errorf("nereus/pulsar: create default tenant/namespace: %w", err)
	}
	// Retention never trims what a durable subscription still needs,
	// whoever serves the topics (the Pulsar front end, KoP, both).
	if g, ok := storage.(guardRegistry); ok {
		g.RegisterRetentionGuard(isPulsarStream, retentionGuard{ml: ml})
	}
	return ml, nil
}

// Serve accepts Pulsar connections on ln until Shutdown; it may be called
// for several listeners at once. A *listener.Bound brings its name and
// security (pulsar+ssl:// listeners run the TLS handshake on the
// connection's goroutine); any other listener is a plaintext one. It
// returns nil after Shutdown, or the listener's error.
func (s *Server) Serve(l net.Listener) error {
	ln := listener.Wrap(l, listener.Pulsar, listener.DefaultName)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.listeners = append(s.listeners, ln)
	if s.advertise == "" {
		s.advertise = ln.Addr().String()
	}
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		c := newConn(s, nc, ln)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			_ = nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.run()
		}()
	}
}

// AdvertisedAddr is the broker address given out in lookups.
func (s *Server) AdvertisedAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.advertise
}

// advertisedFor is the address to give a client that reached this broker
// at local: the configured AdvertisedAddr, else the listener's address, or
// — when the listener is bound to a wildcard address (0.0.0.0, ::) — the
// address the client actually connected to.
func (s *Server) advertisedFor(local string) string {
	if s.cfg.AdvertisedAddr != "" {
		return s.cfg.AdvertisedAddr
	}
	adv := s.AdvertisedAddr()
	if host, _, err := net.SplitHostPort(adv); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() && local != "" {
			return local
		}
	}
	return adv
}

// brokerURLs are the pulsar:// and pulsar+ssl:// URLs of this broker in the
// listener group name ("" for the default), with missing hosts completed
// from host (the address the client reached). ok is false when the broker
// has no listener of that name.
func (s *Server) brokerURLs(name, host string) (plain, tls string, ok bool) {
	if len(s.cfg.Endpoints) == 0 {
		if name != "" && name != listener.DefaultName {
			return "", "", false
		}
		return "pulsar://" + s.advertisedFor(host), "", true
	}
	if name == "" {
		name = s.defaultGroup(listener.Pulsar)
	}
	for _, e := range s.cfg.Endpoints {
		if e.Protocol != listener.Pulsar || e.Name != name {
			continue
		}
		ok = true
		if e.Host == "" {
			e.Host = hostOnly(host)
		}
		if e.Security.TLS {
			tls = e.URL()
		} else {
			plain = e.URL()
		}
	}
	return plain, tls, ok
}

// httpURLs are the http:// and https:// URLs of this broker's admin API for
// listener group name (falling back to any HTTP listener), completed with
// host (the Host the HTTP client used).
func (s *Server) httpURLs(name, host string) (plain, tls string) {
	if len(s.cfg.Endpoints) == 0 {
		if s.cfg.HTTPAdvertisedURL != "" {
			return s.cfg.HTTPAdvertisedURL, ""
		}
		return "http://" + host, ""
	}
	pick := func(match func(listener.Endpoint) bool) {
		for _, e := range s.cfg.Endpoints {
			if e.Protocol != listener.HTTP || !match(e) {
				continue
			}
			if e.Host == "" {
				e.Host = hostOnly(host)
			}
			if e.Security.TLS && tls == "" {
				tls = e.URL()
			} else if !e.Security.TLS && plain == "" {
				plain = e.URL()
			}
		}
	}
	pick(func(e listener.Endpoint) bool { return e.Name == name })
	pick(func(listener.Endpoint) bool { return true })
	return plain, tls
}

// defaultGroup is "internal" when the broker has such a listener group of
// protocol p, else the first group.
func (s *Server) defaultGroup(p listener.Protocol) string {
	first := ""
	for _, e := range s.cfg.Endpoints {
		if e.Protocol != p {
			continue
		}
		if e.Name == listener.DefaultName {
			return e.Name
		}
		if first == "" {
			first = e.Name
		}
	}
	return first
}

// hostOnly strips a port from host:port ("" stays "").
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// Shutdown stops accepting connections, tells clients their producers and
// consumers are closed (so they reconnect elsewhere or later), persists
// every cursor, releases append sessions and waits for goroutines, or until
// ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	lns := s.listeners
	topics := make([]*topic, 0, len(s.topics))
	for _, tl := range s.topics {
		select {
		case <-tl.done:
			if tl.t != nil {
				topics = append(topics, tl.t)
			}
		default:
		}
	}
	s.mu.Unlock()
	for _, ln := range lns {
		_ = ln.Close()
	}
	var firstErr error
	for _, t := range topics {
		if err := t.close(ctx, true); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		if firstErr == nil {
			firstErr = ctx.Err()
		}
	}
	if s.ownCluster {
		_ = s.cluster.Leave(ctx)
		_ = s.cluster.Close()
	}
	return firstErr
}

// kill stops the broker abruptly, as a crash would: connections are cut,
// nothing is flushed and no session is released. Tests use it to prove that
// only confirmed state survives.
func (s *Server) kill() {
	s.mu.Lock()
	s.closing = true
	lns := s.listeners
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	topics := make([]*topic, 0, len(s.topics))
	for _, tl := range s.topics {
		select {
		case <-tl.done:
			if tl.t != nil {
				topics = append(topics, tl.t)
			}
		default:
		}
	}
	s.mu.Unlock()
	s.cancel()
	for _, ln := range lns {
		_ = ln.Close()
	}
	for _, t := range topics {
		t.abort()
	}
	for _, c := range conns {
		c.close()
	}
	s.wg.Wait()
}

// getTopic returns the loaded topic, loading (and with create, creating)
// it once.
func (s *Server) getTopic(ctx context.Context, name managedledger.TopicName, create bool) (*topic, error) {
	if _, self, _ := s.topicOwner(name); !self {
		return nil, s.errNotOwner(name)
	}
	key := name.String()
	for {
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return nil, newError(pb.ServerError_ServiceNotReady, "broker is shutting down")
		}
		tl, ok := s.topics[key]
		if !ok {
			tl = &topicLoad{done: make(chan struct{})}
			s.topics[key] = tl
			s.mu.Unlock()
			tl.t, tl.err = s.loadTopic(ctx, name, create)
			close(tl.done)
			if tl.err != nil {
				s.mu.Lock()
				if s.topics[key] == tl {
					delete(s.topics, key)
				}
				s.mu.Unlock()
			}
			return tl.t, tl.err
		}
		s.mu.Unlock()
		select {
		case <-tl.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if tl.err != nil {
			// A failed load (e.g. topic missing without create) is not
			// cached; try again with our own create flag.
			s.mu.Lock()
			if s.topics[key] == tl {
				delete(s.topics, key)
			}
			s.mu.Unlock()
			continue
		}
		return tl.t, nil
	}
}

// loadedTopic returns the topic if it is loaded.
func (s *Server) loadedTopic(name string) *topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	tl, ok := s.topics[name]
	if !ok {
		return nil
	}
	select {
	case <-tl.done:
		return tl.t
	default:
		return nil
	}
}

func (s *Server) forgetTopic(t *topic) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tl, ok := s.topics[t.name.String()]; ok && tl.t == t {
		delete(s.topics, t.name.String())
	}
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// autoCreate reports whether the broker creates unknown topics.
func (s *Server) autoCreate() bool { return !s.cfg.DisableAutoTopicCreation }

// dedupEnabled reports whether deduplication is on for a topic: its
// topic policy, else its namespace's, else the broker default.
func (s *Server) dedupEnabled(ctx context.Context, topic managedledger.TopicName) bool {
	if tp, err := s.ml.GetTopicPolicies(ctx, topic); err == nil && tp.Deduplication != nil {
		return *tp.Deduplication
	}
	p, err := s.ml.GetNamespace(ctx, topic.NamespaceName())
	if err == nil && p.Deduplication != nil {
		return *p.Deduplication
	}
	return !s.cfg.DisableDeduplication
}

// nextProducerName generates a broker-unique producer name; the broker
// incarnation keeps names unique across restarts, so a new producer never
// inherits an old one's deduplication state.
func (s *Server) nextProducerName() string {
	return fmt.Sprintf("%s-%d-%d", s.cfg.ClusterName, s.incarnation, s.producerSeq.Add(1)-1)
}

// HTTPHandler returns the HTTP lookup and admin API (mount it on the admin
// port).
func (s *Server) HTTPHandler() http.Handler { return newHTTPHandler(s) }

func (s *Server) statsLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-tick.C:
			s.mu.Lock()
			ts := make([]*topic, 0, len(s.topics))
			for _, tl := range s.topics {
				select {
				case <-tl.done:
					if tl.t != nil {
						ts = append(ts, tl.t)
					}
				default:
				}
			}
			s.mu.Unlock()
			for _, t := range ts {
				t.updateRates(now)
			}
		}
	}
}

// defaultProfile is the storage profile of new topics without a namespace
// or topic storage-profile policy.
func (s *Server) defaultProfile() stream.Profile {
	if s.cfg.StorageProfile == stream.ProfileUnspecified {
		return stream.DefaultProfile
	}
	return s.cfg.StorageProfile
}
