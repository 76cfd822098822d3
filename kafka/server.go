// Package kafka is the native Kafka front end of Nereus: a Kafka wire
// protocol server that unmodified Kafka clients (franz-go, sarama, kafka-go,
// librdkafka/kcat, the Java clients) talk to, over Nereus streams.
//
// It owns the connection layer (framing, request headers, in-order
// responses, the ApiVersions fallback rules), one handler file per Kafka API
// key (NN_name.go, each registering its version range in init), RecordBatch
// validation on produce and header patching on fetch. Topic metadata,
// partition streams, committed offsets and the partitions' transaction
// indexes live behind package kstore; the classic group protocol is package
// kgroup, the transaction coordinator package ktxn (glue in txn.go).
//
// Mapping (seed 000): one complete Kafka RecordBatch is one stream entry
// whose RecordCount covers the batch's records; the Kafka offset is the
// stream offset. Batches are stored byte-for-byte as produced (validated;
// LogAppendTime topics get their timestamp and CRC rewritten), with the
// partition leader epoch stamped into the header at append. baseOffset is
// assigned by the core at commit, so the fetch path patches it into each
// batch header it serves; both fields lie outside the CRC-32C.
//
// It must never acknowledge a produce before the core committed it, never
// serve bytes the core did not return, never advertise an API version whose
// semantics it does not implement (see skipped_features), and never let one
// client's bad bytes take the server down: malformed, truncated, oversized
// or unknown-version requests close that connection with a log line.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/kafka/kacl"
	"github.com/nereusstream/nereus-go/kafka/kauth"
	"github.com/nereusstream/nereus-go/kafka/kconsumer"
	"github.com/nereusstream/nereus-go/kafka/kgroup"
	"github.com/nereusstream/nereus-go/kafka/kstore"
	"github.com/nereusstream/nereus-go/kafka/ktxn"
	"github.com/nereusstream/nereus-go/listener"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("kafka: server closed")

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// AdvertisedHost and AdvertisedPort are what Metadata and
	// FindCoordinator tell clients of a listener without its own advertised
	// address to dial. Default: each listener's advertised endpoint
	// (listener.Bound; for a bare net.Listener its address, or for a
	// wildcard bind the address the client reached).
	AdvertisedHost string
	AdvertisedPort int32
	// Cluster is this broker's cluster membership: the other brokers,
	// partition leadership and group coordination come from it, and it
	// holds the append sessions. Nil: the server joins a cluster of its own
	// on the given metadata store (one broker owning everything), with
	// NodeID as its broker id and WriterID as its node id.
	Cluster *cluster.Node
	// NodeID is this broker's id (default: the cluster's Kafka broker id
	// of this node, or 1 without a cluster).
	NodeID int32
	// ClusterID is the stable cluster id reported in Metadata (default
	// "nereus-cluster").
	ClusterID string
	// Logger receives connection and error logs (default slog.Default()).
	Logger *slog.Logger
	// WriterID names this broker as writer of partition streams when the
	// server makes its own cluster (default "kafka-node-<NodeID>"); with a
	// Cluster, the cluster's node id is the writer.
	WriterID string

	// MaxRequestBytes bounds a Produce request frame (default 100 MiB,
	// Kafka's socket.request.max.bytes). Larger frames close the connection.
	MaxRequestBytes int32
	// MaxOtherRequestBytes bounds frames of every other API (default
	// 8 MiB). Kept smaller because decoding amplifies array counts into
	// allocations.
	MaxOtherRequestBytes int32
	// MaxInFlightPerConn bounds requests read but not yet answered on one
	// connection (default 64). Reading pauses at the bound.
	MaxInFlightPerConn int

	// AutoCreateTopics creates unknown topics named in Metadata requests
	// that allow it (default true, like Kafka).
	DisableAutoCreateTopics bool
	// DefaultPartitions is the partition count for auto-created topics and
	// CreateTopics with -1 (default 1).
	DefaultPartitions int32

	// MinSessionTimeout / MaxSessionTimeout bound group member session
	// timeouts (defaults 6s / 30m).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration

	// MaxTransactionTimeout bounds a transactional producer's
	// transaction.timeout.ms (default 15m, Kafka's
	// transaction.max.timeout.ms); TransactionCheckInterval is how often
	// expired transactions are aborted (default 1s).
	MaxTransactionTimeout    time.Duration
	TransactionCheckInterval time.Duration

	// ConsumerGroupSessionTimeout and ConsumerGroupHeartbeatInterval are
	// Kafka's group.consumer.session.timeout.ms (default 45s) and
	// group.consumer.heartbeat.interval.ms (default 5s) for KIP-848 groups.
	ConsumerGroupSessionTimeout    time.Duration
	ConsumerGroupHeartbeatInterval time.Duration

	// RequestHook, if set, is called after each request is answered with
	// its key, version and handling latency (for metrics).
	RequestHook func(apiKey, apiVersion int16, latency time.Duration)

	// Security is authentication (SASL) and authorization; the zero
	// value authenticates nobody and allows everything.
	Security SecurityConfig

	// Now is the clock (default time.Now).
	Now func() time.Time

	// Projection, if set, serves the Kafka topics it claims through
	// another storage boundary: KoP, Pulsar topics addressed as
	// persistent://tenant/namespace/topic (see kstore.Projection).
	Projection kstore.Projection
}

func (c *Config) setDefaults() {
	if c.NodeID == 0 && c.Cluster != nil {
		c.NodeID = c.Cluster.Self().KafkaID
	}
	if c.NodeID == 0 {
		c.NodeID = 1
	}
	if c.ClusterID == "" {
		c.ClusterID = "nereus-cluster"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.WriterID == "" {
		c.WriterID = fmt.Sprintf("kafka-node-%d", c.NodeID)
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 100 << 20
	}
	if c.MaxOtherRequestBytes <= 0 {
		c.MaxOtherRequestBytes = 8 << 20
	}
	if c.MaxInFlightPerConn <= 0 {
		c.MaxInFlightPerConn = 64
	}
	if c.DefaultPartitions <= 0 {
		c.DefaultPartitions = 1
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Security.setDefaults()
}

// Stats are cumulative counters, safe to read at any time.
type Stats struct {
	ConnectionsOpened  atomic.Int64
	ConnectionsClosed  atomic.Int64
	ProtocolErrors     atomic.Int64 // connections closed for bad input
	Requests           atomic.Int64
	BytesIn, BytesOut  atomic.Int64
	ProducedBatches    atomic.Int64
	ProducedRecords    atomic.Int64
	ProducedBytes      atomic.Int64
	ProduceErrors      atomic.Int64
	FetchedBytes       atomic.Int64
	DuplicateBatches   atomic.Int64
	GroupRebalances    atomic.Int64
	AuthSuccesses      atomic.Int64 // SASL authentications (incl. re-authentications)
	AuthFailures       atomic.Int64 // failed or refused SASL exchanges
	OffsetCommits      atomic.Int64
	requestsByKey      [128]atomic.Int64
	requestLatencySumN [128]atomic.Int64 // nanoseconds
}

// RequestsByKey returns how many requests of each API key were answered,
// and the summed handling latency.
func (st *Stats) RequestsByKey() map[int16][2]int64 {
	out := map[int16][2]int64{}
	for k := range st.requestsByKey {
		if n := st.requestsByKey[k].Load(); n > 0 {
			out[int16(k)] = [2]int64{n, st.requestLatencySumN[k].Load()}
		}
	}
	return out
}

// Server is a Kafka protocol server over Nereus streams.
type Server struct {
	cfg       Config
	log       *slog.Logger
	store     *kstore.Store
	auth      *kauth.Store
	groups    *kgroup.Coordinator
	txns      *ktxn.Coordinator
	consumers *kconsumer.Coordinator
	quotas    *quotaManager
	stats     Stats
	// cluster is cfg.Cluster, or the one-broker cluster the server made
	// (ownCluster) and closes at Shutdown.
	cluster    *cluster.Node
	ownCluster bool
	stopWatch  chan struct{}
	stopOnce   sync.Once
	watchDone  chan struct{}
	// authz and acls are nil without Security.Authorizer.
	authz        *kacl.Authorizer
	acls         *kauth.ACLs
	stopACLWatch context.CancelFunc

	advHost string
	advPort int32

	mu        sync.Mutex
	listeners map[*listener.Bound]struct{}
	conns     map[*conn]struct{}
	closing   bool
	stopping  chan struct{} // closed at Shutdown: long polls return early
	connWG    sync.WaitGroup
}

// NewServer builds a server over the given stream storage and metadata
// store. It does not listen until Serve.
func NewServer(cfg Config, storage stream.Storage, meta metadata.Store) (*Server, error) {
	if storage == nil || meta == nil {
		return nil, errors.New("kafka: NewServer needs a stream.Storage and a metadata.Store")
	}
	cfg.setDefaults()
	node, own := cfg.Cluster, false
	if node == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var err error
		node, err = cluster.Join(ctx, cluster.Config{Metadata: meta, Storage: storage, NodeID: cfg.WriterID,
			KafkaBrokerID: cfg.NodeID, Logger: cfg.Logger})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("kafka: joining a cluster of one: %w", err)
		}
		own = true
	}
	st, err := kstore.New(storage, meta, kstore.Config{Cluster: node, Logger: cfg.Logger, Now: cfg.Now,
		Projection: cfg.Projection})
	if err != nil {
		if own {
			_ = node.Close()
		}
		return nil, err
	}
	if v, ok := storage.(stream.Views); ok {
		// Compacted topics: the core runs passes where a partition is led.
		v.RegisterCompactionPolicy(kstore.CompactViewKind, st.IsCompactedStream, st.CompactionPolicy())
	}
	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger,
		store:      st,
		auth:       kauth.New(meta),
		cluster:    node,
		ownCluster: own,
		groups: kgroup.NewCoordinator(kgroup.Config{MinSessionTimeout: cfg.MinSessionTimeout,
			MaxSessionTimeout: cfg.MaxSessionTimeout, Now: cfg.Now, Store: st.GroupStore(), Logger: cfg.Logger,
			Owns: func(id string) bool { return node.Owns(cluster.GroupKey(id)) }}),
		advHost:   cfg.AdvertisedHost,
		advPort:   cfg.AdvertisedPort,
		listeners: map[*listener.Bound]struct{}{},
		conns:     map[*conn]struct{}{},
		stopping:  make(chan struct{}),
		stopWatch: make(chan struct{}),
		watchDone: make(chan struct{}),
	}
	s.quotas = newQuotaManager(st, cfg.Now)
	s.consumers = kconsumer.New(consumerTopics{st}, kconsumer.Config{SessionTimeout: cfg.ConsumerGroupSessionTimeout,
		HeartbeatInterval: cfg.ConsumerGroupHeartbeatInterval, Now: cfg.Now, Logger: cfg.Logger, Store: st.ConsumerGroupStore(),
		Owns: func(id string) bool { return node.Owns(cluster.GroupKey(id)) }})
	s.txns = ktxn.New(meta, txnStorage{s}, ktxn.Config{Logger: cfg.Logger, Now: cfg.Now,
		MaxTimeout: cfg.MaxTransactionTimeout, CheckInterval: cfg.TransactionCheckInterval,
		Owns: func(id string) bool { return node.Owns(cluster.TxnKey(id)) }})
	// Load transactions and finish any whose outcome was decided before a
	// crash, before the first client can read a partition they touch.
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.txns.Start(sctx); err != nil {
		s.consumers.Close()
		_ = st.Close(sctx)
		if own {
			_ = node.Close()
		}
		return nil, err
	}
	// KIP-848 groups resume from their stored state (same epochs and
	// assignments: no rebalance after a restart).
	if err := s.consumers.Load(sctx); err != nil {
		s.consumers.Close()
		s.txns.Close()
		_ = st.Close(sctx)
		if own {
			_ = node.Close()
		}
		return nil, fmt.Errorf("nereus/kafka: loading consumer groups: %w", err)
	}
	if err := s.ensureInternalTopics(sctx); err != nil {
		s.consumers.Close()
		s.txns.Close()
		_ = st.Close(sctx)
		if own {
			_ = node.Close()
		}
		return nil, err
	}
	if cfg.Security.Authorizer {
		s.authz = kacl.New(kacl.Config{SuperUsers: cfg.Security.SuperUsers, AllowIfNoACL: cfg.Security.AllowEveryoneIfNoACL})
		s.acls = s.auth.NewACLs(s.authz, cfg.Logger)
		// The ACL set is loaded before the first request is authorized;
		// a store that cannot answer fails start-up (serving with an
		// empty set would deny or allow on no evidence).
		if err := s.acls.Load(sctx); err != nil {
			s.consumers.Close()
			s.txns.Close()
			_ = st.Close(sctx)
			if own {
				_ = node.Close()
			}
			return nil, fmt.Errorf("nereus/kafka: loading ACLs: %w", err)
		}
		wctx, wcancel := context.WithCancel(context.Background())
		s.stopACLWatch = wcancel
		go s.acls.Watch(wctx)
	}
	go s.followCluster()
	return s, nil
}

// followCluster hands over the groups this broker stops coordinating at
// every cluster change (their members are told NOT_COORDINATOR and find
// the new coordinator, which resumes the stored group), and moves
// transaction coordination the same way (ktxn.Reconcile: ids no longer
// owned are forgotten, newly owned ones loaded and their decided
// transactions completed).
func (s *Server) followCluster() {
	defer close(s.watchDone)
	for {
		ch := s.cluster.Changes()
		s.groups.Reconcile()
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := s.consumers.Reconcile(rctx); err != nil {
			s.log.Warn("kafka: loading consumer groups after a cluster change failed", "err", err)
		}
		if err := s.txns.Reconcile(rctx); err != nil {
			s.log.Warn("kafka: reloading transactions after a cluster change failed", "err", err)
		}
		cancel()
		select {
		case <-ch:
		case <-s.stopWatch:
			return
		}
	}
}

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Store exposes the storage boundary (for tools and tests).
func (s *Server) Store() *kstore.Store { return s.store }

// Serve accepts connections on ln until Shutdown; it may be called for
// several listeners at once. A *listener.Bound brings its name, security
// and advertised address; any other listener is a PLAINTEXT one. It always
// returns a non-nil error; after Shutdown it is ErrServerClosed.
func (s *Server) Serve(l net.Listener) error {
	ln := listener.Wrap(l, listener.Kafka, listener.KafkaPlaintext)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("kafka: accept error; retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		if !s.startConn(nc, ln) {
			_ = nc.Close()
			return ErrServerClosed
		}
	}
}

// ListenAndServe listens on addr (TCP) and serves.
func (s *Server) ListenAndServe(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// Shutdown stops accepting, lets every connection finish the requests it
// has read (long polls return early with what they have), writes their
// responses and closes. If ctx ends first, remaining connections are closed
// at once. Committed data is never affected: an append either committed
// (and its response may be lost with the connection) or did not.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		close(s.stopping)
		if s.stopACLWatch != nil {
			s.stopACLWatch()
		}
	}
	for ln := range s.listeners {
		_ = ln.Close()
	}
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() { s.connWG.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.close()
		}
		s.mu.Unlock()
		<-done
		err = ctx.Err()
	}
	s.stopOnce.Do(func() { close(s.stopWatch) })
	<-s.watchDone
	s.groups.Close()
	s.consumers.Close()
	s.txns.Close()
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cerr := s.store.Close(cctx); err == nil {
		err = cerr
	}
	if s.ownCluster {
		// A cluster of one: hand nothing over, just deregister.
		if lerr := s.cluster.Leave(cctx); err == nil {
			err = lerr
		}
		_ = s.cluster.Close()
	}
	return err
}

func (s *Server) startConn(nc net.Conn, ln *listener.Bound) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	c := newConn(s, nc, ln)
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.stats.ConnectionsOpened.Add(1)
	go func() {
		defer s.connWG.Done()
		c.serve()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.stats.ConnectionsClosed.Add(1)
	}()
	return true
}
