package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/listener"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

// kafkaBrokerIDFile keeps the node's Kafka broker id once the cluster
// allocated (or the config chose) it, so it never changes across restarts.
const kafkaBrokerIDFile = "kafka-broker-id"

// kafkaBrokerID claims this node's Kafka broker id: the one kept in the
// data dir, else the configured one, else the next free one; then keeps it
// in the data dir.
func kafkaBrokerID(ctx context.Context, cfg Config, nodeID string, meta metadata.Store) (int32, error) {
	path := filepath.Join(cfg.DataDir, kafkaBrokerIDFile)
	want := cfg.KafkaBrokerID
	if b, err := os.ReadFile(path); err == nil {
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 32)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%s: not a broker id (remove it to allocate a new one)", path)
		}
		if want != 0 && int32(n) != want {
			return 0, fmt.Errorf("kafka-broker-id %d, but this data dir belongs to broker %d (%s)", want, n, path)
		}
		want = int32(n)
	} else if !os.IsNotExist(err) {
		return 0, err
	}
	id, err := cluster.ClaimKafkaBrokerID(ctx, meta, nodeID, want)
	if err != nil {
		return 0, err
	}
	if err := writeFileAtomic(cfg.DataDir, kafkaBrokerIDFile, []byte(strconv.Itoa(int(id))+"\n")); err != nil {
		return 0, fmt.Errorf("keeping the kafka broker id in %s: %w", path, err)
	}
	return id, nil
}

// registryEndpoints are the addresses this node advertises in the cluster
// registry: every listener's advertised endpoint (several per protocol,
// told apart by listener name), the same ones its front ends tell clients.
// A listener bound to a wildcard address without an advertised address
// registers the host name (other nodes redirect clients there).
func registryEndpoints(eps []listener.Endpoint, logger *slog.Logger) []cluster.Endpoint {
	out := make([]cluster.Endpoint, 0, len(eps))
	for _, e := range eps {
		host := e.Host
		if host == "" {
			h, err := os.Hostname()
			if err != nil || h == "" {
				h = "localhost"
			}
			logger.Warn("listener bound to a wildcard address without an advertised address; registering the host name",
				"protocol", e.Protocol, "listener", e.Name, "host", h)
			host = h
		}
		out = append(out, cluster.Endpoint{Protocol: string(e.Protocol), Listener: e.Name, Host: host, Port: e.Port,
			TLS: e.Security.TLS})
	}
	return out
}

// joinCluster registers this node in the cluster registry of its metadata
// store. On a single node (embedded metadata) the cluster has one member,
// which owns everything: the same code path as a many-node cluster.
func joinCluster(cfg Config, nodeID string, storage stream.Storage, meta metadata.Store, eps []listener.Endpoint,
	logger *slog.Logger) (*cluster.Node, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.BackendTimeout+cfg.ClusterSessionTTL)
	defer cancel()
	id, err := kafkaBrokerID(ctx, cfg, nodeID, meta)
	if err != nil {
		return nil, err
	}
	return cluster.Join(ctx, cluster.Config{Metadata: meta, Storage: storage, NodeID: nodeID, KafkaBrokerID: id,
		Rack: cfg.Rack, Version: Version, Weight: cfg.ClusterWeight, Endpoints: registryEndpoints(eps, logger),
		SessionTTL: cfg.ClusterSessionTTL, StreamSessionTTL: cfg.SessionTTL, AdoptAfter: cfg.Lifecycle.GCAdoptAfter, Logger: logger})
}

// clusterCollector exports the node's cluster counters at scrape time.
type clusterCollector struct {
	node                                         *cluster.Node
	moves, brokers, held, viewChanges, sessLost  *prometheus.Desc
	isolations, isolated, acquireDur, releaseDur *prometheus.Desc
	peersExpired                                 *prometheus.Desc
}

func newClusterCollector(n *cluster.Node) *clusterCollector {
	return &clusterCollector{
		node: n,
		moves: prometheus.NewDesc("nereus_cluster_ownership_moves_total",
			"Stream ownership moves of this node by kind: acquired (taken after a release or expiry), preempted (taken from a dead owner), handoff_wait (taken after waiting for a live owner's release), released (handed over), release_failed, lost (fenced by another writer).",
			[]string{"kind"}, nil),
		brokers:     prometheus.NewDesc("nereus_cluster_brokers", "Registered brokers in this node's view by state.", []string{"state"}, nil),
		held:        prometheus.NewDesc("nereus_cluster_owned_streams", "Streams whose append session this node holds.", nil, nil),
		viewChanges: prometheus.NewDesc("nereus_cluster_view_changes_total", "Registry changes this node observed.", nil, nil),
		sessLost:    prometheus.NewDesc("nereus_cluster_registry_sessions_lost_total", "Registry sessions of this node that ended and were replaced.", nil, nil),
		isolations:  prometheus.NewDesc("nereus_cluster_isolations_total", "Times this node could not prove its registration for a whole session TTL.", nil, nil),
		peersExpired: prometheus.NewDesc("nereus_cluster_peers_expired_total",
			"Peers this node found dead before their registry TTL (their connection closed and their address refused a new one).", nil, nil),
		isolated: prometheus.NewDesc("nereus_cluster_isolated", "1 while this node is isolated from the metadata store (it owns nothing).", nil, nil),
		acquireDur: prometheus.NewDesc("nereus_cluster_ownership_acquire_seconds",
			"Duration of taking a stream's ownership (from the first request that needed it to the acquired session, handoff waits included).", nil, nil),
		releaseDur: prometheus.NewDesc("nereus_cluster_ownership_release_seconds",
			"Duration of handing a stream over (draining in-flight appends and releasing the session).", nil, nil),
	}
}

func (cc *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cc.moves, cc.brokers, cc.held, cc.viewChanges, cc.sessLost, cc.isolations, cc.isolated, cc.acquireDur, cc.releaseDur, cc.peersExpired} {
		ch <- d
	}
}

func (cc *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	s := cc.node.Stats()
	for kind, v := range map[string]int64{"acquired": s.Acquired - s.Preempted, "preempted": s.Preempted, "handoff_wait": s.HandoffWaits,
		"released": s.Released, "release_failed": s.ReleaseFailed, "lost": s.Lost} {
		ch <- prometheus.MustNewConstMetric(cc.moves, prometheus.CounterValue, float64(v), kind)
	}
	ch <- prometheus.MustNewConstMetric(cc.brokers, prometheus.GaugeValue, float64(s.ActiveBrokers), "active")
	ch <- prometheus.MustNewConstMetric(cc.brokers, prometheus.GaugeValue, float64(s.Brokers-s.ActiveBrokers), "draining")
	ch <- prometheus.MustNewConstMetric(cc.held, prometheus.GaugeValue, float64(s.Held))
	ch <- prometheus.MustNewConstMetric(cc.viewChanges, prometheus.CounterValue, float64(s.ViewChanges))
	ch <- prometheus.MustNewConstMetric(cc.sessLost, prometheus.CounterValue, float64(s.SessionsLost))
	ch <- prometheus.MustNewConstMetric(cc.isolations, prometheus.CounterValue, float64(s.Isolations))
	ch <- prometheus.MustNewConstMetric(cc.peersExpired, prometheus.CounterValue, float64(s.PeersExpired))
	iso := 0.0
	if cc.node.Isolated() {
		iso = 1
	}
	ch <- prometheus.MustNewConstMetric(cc.isolated, prometheus.GaugeValue, iso)
	ch <- histogramMetric(cc.acquireDur, s.AcquireSeconds, s.AcquireBuckets)
	ch <- histogramMetric(cc.releaseDur, s.ReleaseSeconds, s.ReleaseBuckets)
}

func histogramMetric(d *prometheus.Desc, sum float64, counts []int64) prometheus.Metric {
	buckets := map[float64]uint64{}
	var cum, total uint64
	for i, n := range counts {
		total += uint64(n)
		if i < len(cluster.MoveBounds) {
			cum += uint64(n)
			buckets[cluster.MoveBounds[i].Seconds()] = cum
		}
	}
	return prometheus.MustNewConstHistogram(d, total, sum, buckets)
}

// clusterStatus serves GET /v1/cluster: the brokers this node sees, their
// endpoints and session ages, and how many streams each is assigned and
// holds (over up to ?limit= streams, default 100000).
func (s *Server) clusterStatus(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			writeError(w, adminapi.CodeInvalidArgument, "limit: want a positive integer", "")
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	st, err := s.cluster.Status(ctx, limit)
	if err != nil {
		writeError(w, errorCode(err), message(err), "")
		return
	}
	writeJSON(w, http.StatusOK, toAPICluster(st))
}

func toAPICluster(st cluster.Status) adminapi.ClusterStatus {
	out := adminapi.ClusterStatus{Self: st.Self, Isolated: st.Isolated, Leaving: st.Leaving, Streams: st.Streams,
		Truncated: st.Truncated, Unowned: st.Unowned, Brokers: []adminapi.ClusterBroker{}}
	for _, b := range st.Brokers {
		cb := adminapi.ClusterBroker{NodeID: b.NodeID, KafkaBrokerID: b.KafkaID, Rack: b.Rack, Version: b.Version,
			Weight: b.Weight, State: string(b.State), Self: b.Self, RegisteredAt: b.Registered().UTC(),
			SessionAgeSeconds: b.SessionAge.Seconds(), SessionTTLSeconds: float64(b.SessionTTLMs) / 1000,
			AssignedStreams: b.Assigned, HeldStreams: b.Held}
		for _, e := range b.Endpoints {
			cb.Endpoints = append(cb.Endpoints, adminapi.ClusterEndpoint{Protocol: e.Protocol, Listener: e.Listener,
				Address: e.Addr(), TLS: e.TLS})
		}
		out.Brokers = append(out.Brokers, cb)
	}
	return out
}

// lateOwnership is the stream core's stream.Ownership: the core is opened
// before the node can join the cluster (joining needs the core), so it
// starts unbound — owning nothing, so no lifecycle work runs on a stream
// another node owns — and forwards to the cluster node once bound.
type lateOwnership struct {
	mu    sync.Mutex
	node  *cluster.Node
	bound chan struct{}
}

func newLateOwnership() *lateOwnership { return &lateOwnership{bound: make(chan struct{})} }

func (l *lateOwnership) bind(n *cluster.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.node == nil {
		l.node = n
		close(l.bound)
	}
}

func (l *lateOwnership) get() *cluster.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.node
}

// OwnsStream implements stream.Ownership.
func (l *lateOwnership) OwnsStream(name string) bool {
	n := l.get()
	return n != nil && n.OwnsStream(name)
}

// ShouldAdopt implements stream.AdoptionPolicy (nothing before the node
// joined).
func (l *lateOwnership) ShouldAdopt(writer string) bool {
	n := l.get()
	return n != nil && n.ShouldAdopt(writer)
}

// Changes implements stream.Ownership.
func (l *lateOwnership) Changes() <-chan struct{} {
	if n := l.get(); n != nil {
		return n.Changes()
	}
	return l.bound
}
