package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/internal/authtoken"
	"github.com/nereusstream/nereus-go/listener"
	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/stream"
)

// Option customises Start.
type Option func(*options)

type options struct {
	frontends    []FrontendSpec
	setFrontends bool
	storage      *openedStorage
}

// WithFrontends replaces DefaultFrontends(cfg) (tests host fakes this way).
func WithFrontends(specs ...FrontendSpec) Option {
	return func(o *options) { o.frontends, o.setFrontends = specs, true }
}

// WithStorage serves the given storage instead of opening one from the
// config (tests). durable is what /healthz reports. The server closes it
// on shutdown if it implements io.Closer.
func WithStorage(s stream.Storage, backend string, durable bool) Option {
	return func(o *options) {
		st := openedStorage{Storage: s, Backend: backend, Durable: durable}
		if c, ok := s.(interface{ Close() error }); ok {
			st.Closer = c
		}
		o.storage = &st
	}
}

type runningFrontend struct {
	spec      FrontendSpec
	fe        Frontend
	listeners []*listener.Bound
}

// Server is a running Nereus process: storage, the admin HTTP server and the
// protocol front ends. Start it with Start; stop it with Shutdown.
type Server struct {
	cfg     Config
	logger  *slog.Logger
	nodeID  string
	storage openedStorage
	cluster *cluster.Node
	// ownership is the core's view of which streams this node owns: the
	// cluster node, bound once it has joined (the core opens first).
	ownership *lateOwnership
	reg       *prometheus.Registry
	metrics   *metrics
	api       *api

	httpServer    *http.Server
	httpListeners []*listener.Bound
	httpDone      chan error
	frontends     []*runningFrontend
	// tls serves every TLS listener's certificate (nil without TLS).
	tls       *listener.Source
	stopWatch context.CancelFunc
	// tokens validates JWT bearer credentials (nil without a token key).
	tokens *authtoken.Validator

	startedAt time.Time
	draining  atomic.Bool
	drain     chan struct{}
	// failed receives the first unexpected listener failure.
	failed   chan error
	shutOnce sync.Once
	shutErr  error
}

// Start opens storage, binds every listener and starts serving. On error
// everything already started is torn down.
func Start(cfg Config, logger *slog.Logger, opts ...Option) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if !o.setFrontends {
		o.frontends = DefaultFrontends(cfg)
	}
	nodeID, err := loadNodeID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, logger: logger, nodeID: nodeID, reg: newRegistry(), ownership: newLateOwnership(),
		startedAt: time.Now(), drain: make(chan struct{}), failed: make(chan error, 1),
	}
	s.metrics = newMetrics(s.reg)

	if o.storage != nil {
		s.storage = *o.storage
		if s.storage.Metadata == nil {
			// Injected storage (tests): protocol state lives in memory too.
			s.storage.Metadata = memstore.New()
		}
	} else if s.storage, err = openStorage(cfg, nodeID, logger, s.reg, s.ownership); err != nil {
		return nil, fmt.Errorf("opening storage: %w", err)
	}
	defer func() {
		if err != nil {
			s.abort()
		}
	}()
	if s.storage.Durable {
		s.metrics.durable.Set(1)
	}
	if s.storage.ObjectStoreInfo != nil && s.storage.MetadataInfo != nil {
		s.metrics.backends.WithLabelValues(s.storage.ObjectStoreInfo.Kind, s.storage.MetadataInfo.Kind).Set(1)
	}
	s.api = &api{storage: s.storage, nodeID: nodeID, logger: logger, metrics: s.metrics, drain: s.drain}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.handleHealth)
	// ContinueOnError: a collector that cannot reach a store (the per-stream
	// listing while etcd is down) must not turn the whole scrape into a 500
	// exactly when nereus_storage_degraded matters most.
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg, ErrorHandling: promhttp.ContinueOnError}))
	s.api.routes(mux)
	s.consoleRoutes(mux)

	specs, err := cfg.ListenerSpecs()
	if err != nil {
		return nil, err
	}
	var feSpecs [][]listener.Spec
	needTLS := cfg.TLSFiles().Configured()
	for _, spec := range o.frontends {
		ls := spec.listenerSpecs()
		feSpecs = append(feSpecs, ls)
		for _, l := range ls {
			needTLS = needTLS || l.Security.TLS
		}
	}
	if tc := cfg.TokenConfig(); tc.Configured() {
		if s.tokens, err = authtoken.New(tc); err != nil {
			return nil, err
		}
	}
	if needTLS {
		if s.tls, err = listener.NewSource(cfg.TLSFiles(), logger.With("component", "tls")); err != nil {
			return nil, err
		}
	}

	// Every socket is bound before anything serves, so a bad address fails
	// start-up before /healthz can report a half-started server as ready,
	// and front ends that hand out other listeners' addresses (Pulsar
	// lookups name the HTTP and TLS ones) know their real ports.
	var bound []listener.Spec
	for _, sp := range specs {
		if sp.Protocol != listener.HTTP {
			continue
		}
		l, err := listener.Listen(sp, s.tls)
		if err != nil {
			return nil, fmt.Errorf("admin HTTP listener on %s: %w", sp.Bind, err)
		}
		s.httpListeners = append(s.httpListeners, l)
		bound = append(bound, l.Spec())
	}
	if len(s.httpListeners) == 0 {
		return nil, errors.New("no admin HTTP listener configured")
	}
	for i, spec := range o.frontends {
		if len(feSpecs[i]) == 0 {
			logger.Info("front end disabled (no listener)", "frontend", spec.Name)
			continue
		}
		rf := &runningFrontend{spec: spec}
		for _, sp := range feSpecs[i] {
			l, err := listener.Listen(sp, s.tls)
			if err != nil {
				for _, b := range rf.listeners {
					b.Close()
				}
				return nil, fmt.Errorf("%s listener on %s: %w", spec.Name, sp.Bind, err)
			}
			rf.listeners = append(rf.listeners, l)
			bound = append(bound, l.Spec())
		}
		s.frontends = append(s.frontends, rf)
	}
	var endpoints []listener.Endpoint
	for _, l := range s.httpListeners {
		endpoints = append(endpoints, l.Endpoint())
	}
	for _, rf := range s.frontends {
		for _, l := range rf.listeners {
			endpoints = append(endpoints, l.Endpoint())
		}
	}
	// Every listener is bound, so the endpoints the registry advertises
	// are known. Joining before the front ends are built lets them ask the
	// cluster who owns what from their first request.
	if s.cluster, err = joinCluster(cfg, nodeID, s.storage, s.storage.Metadata, endpoints, logger); err != nil {
		return nil, fmt.Errorf("joining the cluster: %w", err)
	}
	s.ownership.bind(s.cluster)
	if err := s.reg.Register(newClusterCollector(s.cluster)); err != nil {
		logger.Warn("cluster metrics not registered", "err", err)
	}
	s.api.cluster = s.cluster
	mux.HandleFunc("GET /v1/cluster", s.clusterStatus)
	for _, rf := range s.frontends {
		fe, err := rf.spec.New(Deps{Storage: s.storage, Metadata: s.storage.Metadata, NodeID: nodeID, Config: cfg,
			Logger: logger.With("frontend", rf.spec.Name), Registerer: s.reg, Addr: rf.listeners[0].Addr(),
			Listeners: rf.listeners, Endpoints: endpoints, HTTPAddr: s.httpListeners[0].Addr(), TLS: s.tls, Tokens: s.tokens,
			Cluster: s.cluster})
		if err != nil {
			return nil, fmt.Errorf("%s front end: %w", rf.spec.Name, err)
		}
		rf.fe = fe
		if h, ok := fe.(HTTPFrontend); ok {
			for _, p := range rf.spec.HTTPPatterns {
				mux.Handle(p, h.HTTPHandler())
			}
		}
	}
	warnExposed(logger, cfg, bound)
	var handler http.Handler = mux
	if aa := newAdminAuth(cfg, s.tokens); aa != nil {
		handler = aa.wrap(mux, s)
	}

	s.httpServer = &http.Server{
		Handler:           s.metrics.instrument(handler),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	s.httpDone = make(chan error, len(s.httpListeners))

	for _, rf := range s.frontends {
		for _, l := range rf.listeners {
			go func() {
				err := rf.fe.Serve(l)
				if !s.draining.Load() {
					s.reportFailure(fmt.Errorf("%s front end stopped serving %s: %v", rf.spec.Name, l.Spec().ID(), err))
				}
			}()
			logger.Info("front end listening", "frontend", rf.spec.Name, "listener", l.Spec().ID(),
				"addr", l.Addr().String(), "advertised", l.Endpoint().URL())
		}
		s.metrics.frontendUp.WithLabelValues(rf.spec.Name).Set(1)
	}
	for _, l := range s.httpListeners {
		go func() {
			err := s.httpServer.Serve(l)
			s.httpDone <- err
			if !errors.Is(err, http.ErrServerClosed) {
				s.reportFailure(fmt.Errorf("admin HTTP server stopped: %w", err))
			}
		}()
		logger.Info("admin HTTP listening", "listener", l.Spec().ID(), "addr", l.Addr().String())
	}
	if s.tls != nil || s.tokens != nil {
		var wctx context.Context
		wctx, s.stopWatch = context.WithCancel(context.Background())
		if s.tls != nil {
			go s.tls.Watch(wctx, cfg.TLSReloadInterval)
		}
		if s.tokens != nil {
			tlog := logger.With("component", "token-key")
			go s.tokens.Watch(wctx, cfg.TLSReloadInterval, func(changed bool, err error) {
				logTokenReload(tlog, "file change check", changed, err)
			})
		}
	}
	if cfg.AddrFile != "" {
		if err := s.writeAddrFile(cfg.AddrFile); err != nil {
			return nil, fmt.Errorf("addr-file: %w", err)
		}
	}
	logger.Info("nereus serving", "version", Version, "node_id", nodeID, "http_addr", s.HTTPAddr(),
		"data_dir", cfg.DataDir, "storage", s.storage.Backend, "durable", s.storage.Durable)
	return s, nil
}

func (s *Server) reportFailure(err error) {
	select {
	case s.failed <- err:
	default:
	}
}

// Failed yields an error if a listener stopped unexpectedly; the caller
// should then shut the server down.
func (s *Server) Failed() <-chan error { return s.failed }

// HTTPAddr is the address of the first admin HTTP listener.
func (s *Server) HTTPAddr() string { return s.httpListeners[0].Addr().String() }

// ReloadTLS re-reads the TLS certificate, key and CA files and the JWT
// verification key file (SIGHUP). A failed reload is logged and the
// previous material stays in use.
func (s *Server) ReloadTLS() {
	if s.tls != nil {
		s.tls.ReloadAndLog("SIGHUP")
	}
	if s.tokens != nil {
		changed, err := s.tokens.Reload()
		logTokenReload(s.logger.With("component", "token-key"), "SIGHUP", changed, err)
	}
}

// logTokenReload logs a token key reload's outcome; it names the cause,
// never the key.
func logTokenReload(l *slog.Logger, cause string, changed bool, err error) {
	switch {
	case err != nil:
		l.Warn("token key reload failed; keeping the previous key", "cause", cause, "err", err)
	case changed:
		l.Info("token key reloaded", "cause", cause)
	}
}

// Registry is the Prometheus registry served on /metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Listeners maps listener names to bound addresses: "http" and each front
// end's name ("kafka", "pulsar") to its first listener, and every
// listener's ID ("kafka:SASL_SSL", "http:internal:https") to its own.
func (s *Server) Listeners() map[string]string {
	m := map[string]string{"http": s.HTTPAddr()}
	for _, l := range s.httpListeners {
		m[l.Spec().ID()] = l.Addr().String()
	}
	for _, rf := range s.frontends {
		m[rf.spec.Name] = rf.listeners[0].Addr().String()
		for _, l := range rf.listeners {
			m[l.Spec().ID()] = l.Addr().String()
		}
	}
	return m
}

func (s *Server) writeAddrFile(path string) error {
	b, err := json.Marshal(s.Listeners())
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".addr-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := adminapi.Health{Status: "ok", Durable: s.storage.Durable, Backend: s.storage.Backend, NodeID: s.nodeID,
		Version: Version, Listeners: s.Listeners(), StartedAt: s.startedAt,
		ObjectStore: s.storage.ObjectStoreInfo, Metadata: s.storage.MetadataInfo}
	status := http.StatusOK
	if hr, ok := s.storage.Storage.(storageHealth); ok {
		for _, c := range hr.Health() {
			if c.Degraded {
				h.Status = "degraded"
				h.Degraded = append(h.Degraded, adminapi.DegradedComponent{Component: c.Component, Reason: c.Reason, Since: c.Since})
			}
		}
	}
	if s.draining.Load() {
		h.Status, status = "draining", http.StatusServiceUnavailable
	}
	writeJSON(w, status, h)
}

// abort tears down a partially started server.
func (s *Server) abort() {
	for _, rf := range s.frontends {
		for _, l := range rf.listeners {
			l.Close()
		}
	}
	for _, l := range s.httpListeners {
		l.Close()
	}
	if s.cluster != nil {
		_ = s.cluster.Close()
	}
	if s.storage.Closer != nil {
		s.storage.Close()
	}
}

// Shutdown drains the server: /healthz turns 503, listeners stop accepting,
// long polls return, in-flight requests and front-end work finish (until ctx
// ends, after which connections are closed), append sessions are released
// and storage is closed last. It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() { s.shutErr = s.shutdown(ctx) })
	return s.shutErr
}

func (s *Server) shutdown(ctx context.Context) error {
	start := time.Now()
	s.logger.Info("draining: stop accepting, finish in-flight work", "timeout", deadlineString(ctx))
	s.draining.Store(true)
	s.metrics.draining.Set(1)
	close(s.drain)
	if s.stopWatch != nil {
		s.stopWatch()
	}

	// Hand every owned stream and coordinator over while the front ends
	// still answer: their clients get NOT_LEADER / a redirect to the new
	// owner instead of a dead connection. Bounded by half the drain time
	// so in-flight requests still get the rest.
	leaveCtx, leaveCancel := context.WithTimeout(ctx, time.Until(halfway(ctx)))
	if err := s.cluster.Leave(leaveCtx); err != nil {
		s.logger.Warn("not every stream was handed over; the rest move when this node's session ends", "err", err)
	}
	leaveCancel()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	note := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for _, rf := range s.frontends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rf.fe.Shutdown(ctx); err != nil {
				note(fmt.Errorf("%s front end shutdown: %w", rf.spec.Name, err))
			}
			s.metrics.frontendUp.WithLabelValues(rf.spec.Name).Set(0)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.httpServer.Shutdown(ctx); err != nil {
			// The drain deadline passed: cut the remaining connections.
			s.httpServer.Close()
			note(fmt.Errorf("admin HTTP shutdown: %w", err))
		}
	}()
	wg.Wait()

	// In-flight requests are done (or cut); release what is still held
	// (appends that arrived during the drain) so another owner need not
	// wait for a TTL, then deregister (ending the registry session) before
	// storage closes.
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if err := s.cluster.Leave(relCtx); err != nil {
		s.logger.Warn("releasing append sessions failed", "err", err)
	}
	cancel()
	_ = s.cluster.Close()

	if s.storage.Closer != nil {
		if err := s.storage.Close(); err != nil {
			note(fmt.Errorf("closing storage: %w", err))
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		s.logger.Warn("shutdown finished with errors", "elapsed", time.Since(start).Round(time.Millisecond), "err", err)
	} else {
		s.logger.Info("shutdown complete", "elapsed", time.Since(start).Round(time.Millisecond))
	}
	return err
}

// halfway is the point halfway between now and ctx's deadline (30s from
// now without one).
func halfway(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(30 * time.Second)
	}
	return time.Now().Add(time.Until(d) / 2)
}

func deadlineString(ctx context.Context) string {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d).Round(time.Millisecond).String()
	}
	return "none"
}

// Run starts the server and serves until ctx is cancelled (e.g. by SIGTERM)
// or a listener fails, then drains within cfg.ShutdownTimeout.
func Run(ctx context.Context, cfg Config, logger *slog.Logger, opts ...Option) error {
	s, err := Start(cfg, logger, opts...)
	if err != nil {
		return err
	}
	// SIGHUP re-reads the TLS files (certificate rotation without restart).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var runErr error
wait:
	for {
		select {
		case <-ctx.Done():
			logger.Info("shutdown requested", "cause", context.Cause(ctx))
			break wait
		case runErr = <-s.Failed():
			logger.Error("listener failed; shutting down", "err", runErr)
			break wait
		case <-hup:
			s.ReloadTLS()
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(runErr, s.Shutdown(sctx))
}
