package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

// DefaultSessionTTL is the default registry session TTL: how long a node
// that stopped answering (crash, partition) stays registered. It bounds
// failover time, so it is short; etcd's minimum lease TTL is about 2 s.
const DefaultSessionTTL = 4 * time.Second

// Config configures a Node. Zero values take the documented defaults.
type Config struct {
	// Metadata is the store the registry lives in (the same store the
	// stream core commits through). Required.
	Metadata metadata.Store
	// Storage is the stream storage whose append sessions the node takes
	// for the streams it owns. Required.
	Storage stream.Storage
	// NodeID is the node's stable identity (the data dir's node-id) and
	// the WriterID of every append session it takes. Required.
	NodeID string
	// KafkaBrokerID is the node's Kafka broker id (ClaimKafkaBrokerID).
	// Required (> 0).
	KafkaBrokerID int32
	// Rack is the node's rack / availability zone (Kafka broker.rack);
	// consumers in the same rack are pointed at it (KIP-392).
	Rack string
	// Version is the software version, reported in cluster status.
	Version string
	// Weight scales the node's share of ownership (default 1).
	Weight uint32
	// Endpoints are the advertised addresses clients are told.
	Endpoints []Endpoint
	// SessionTTL is the registry session TTL (default DefaultSessionTTL).
	// A node whose keep-alives stop for this long is removed from the
	// cluster and its streams are taken over.
	SessionTTL time.Duration
	// StreamSessionTTL is the TTL of the append sessions the node takes
	// (default 30s). Failover does not wait for it: a dead owner's
	// session is pre-empted (see Writer).
	StreamSessionTTL time.Duration
	// HandoffWait bounds how long Writer waits for a live previous owner
	// to release a stream before answering ErrHandoffPending (default 10s).
	HandoffWait time.Duration
	// AdoptAfter is how long another writer's node must have been gone
	// from the registry before this node may adopt its physical sources
	// (ShouldAdopt; default DefaultAdoptAfter).
	AdoptAfter time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) withDefaults() error {
	switch {
	case c.Metadata == nil:
		return errors.New("nereus/cluster: Config.Metadata is required")
	case c.Storage == nil:
		return errors.New("nereus/cluster: Config.Storage is required")
	case c.NodeID == "":
		return errors.New("nereus/cluster: Config.NodeID is required")
	case c.KafkaBrokerID <= 0:
		return errors.New("nereus/cluster: Config.KafkaBrokerID must be > 0 (ClaimKafkaBrokerID)")
	}
	if c.Weight == 0 {
		c.Weight = 1
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.StreamSessionTTL <= 0 {
		c.StreamSessionTTL = 30 * time.Second
	}
	if c.HandoffWait <= 0 {
		c.HandoffWait = 10 * time.Second
	}
	if c.AdoptAfter <= 0 {
		c.AdoptAfter = DefaultAdoptAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// View is one node's picture of the cluster: the registered brokers,
// sorted by Kafka broker id. Seq increases with every change this node
// observed (it is local, not comparable between nodes).
type View struct {
	Brokers []Broker
	Seq     uint64
	At      time.Time
}

// Broker returns the registered broker with nodeID.
func (v *View) Broker(nodeID string) (Broker, bool) {
	for _, b := range v.Brokers {
		if b.NodeID == nodeID {
			return b, true
		}
	}
	return Broker{}, false
}

// ByKafkaID returns the registered broker with Kafka broker id id.
func (v *View) ByKafkaID(id int32) (Broker, bool) {
	for _, b := range v.Brokers {
		if b.KafkaID == id {
			return b, true
		}
	}
	return Broker{}, false
}

// Active returns the brokers taking part in ownership.
func (v *View) Active() []Broker {
	out := make([]Broker, 0, len(v.Brokers))
	for _, b := range v.Brokers {
		if b.Active() {
			out = append(out, b)
		}
	}
	return out
}

// Node is this process's membership in the cluster: its registry record
// (ephemeral, bound to a metadata session), its view of the other brokers,
// ownership decisions over that view, and the append sessions of the
// streams it owns. Safe for concurrent use.
type Node struct {
	cfg  Config
	meta metadata.Store
	log  *slog.Logger

	mu         sync.Mutex
	self       Broker // our record as last written
	sess       metadata.Session
	recVersion metadata.Version
	view       *View
	changed    chan struct{} // closed and replaced at every change
	leaving    bool
	closed     bool
	isolated   bool // last evaluated isolation state (for change signalling)
	writers    map[stream.ID]*writerEntry

	// Peer watch (peers.go): a watcher per peer incarnation, the peers
	// whose connection closed and await a verdict (settled is closed and
	// replaced when the last clears), peers found dead before the
	// registry dropped them, and the registry record version per node.
	peers    map[string]*peerWatcher
	suspects map[string]struct{}
	settled  chan struct{}
	expired  map[string]expiredPeer
	versions map[string]metadata.Version

	// lastContact is the start (Unix ms) of the last metadata round trip
	// that proved our registration alive.
	lastContact atomic.Int64
	kick        chan struct{} // wakes the reconcile loop

	stats stats

	// adoptMu guards absentSince: when this node first saw each writer
	// absent from its view (ShouldAdopt).
	adoptMu     sync.Mutex
	absentSince map[string]time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Join registers the node and starts following the registry. It returns
// once the node's view includes itself (bounded by ctx).
func Join(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, meta: cfg.Metadata, log: cfg.Logger.With("component", "cluster"),
		view: &View{}, changed: make(chan struct{}), writers: map[stream.ID]*writerEntry{},
		kick:  make(chan struct{}, 1),
		peers: map[string]*peerWatcher{}, suspects: map[string]struct{}{}, settled: make(chan struct{}),
		expired: map[string]expiredPeer{}, versions: map[string]metadata.Version{},
	}
	n.self = Broker{V: brokerRecordV, NodeID: cfg.NodeID, KafkaID: cfg.KafkaBrokerID, Rack: cfg.Rack,
		Version: cfg.Version, Weight: cfg.Weight, State: StateActive, Endpoints: slices.Clone(cfg.Endpoints),
		SessionTTLMs: cfg.SessionTTL.Milliseconds()}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	events, err := n.meta.Watch(n.ctx, keyBrokers)
	if err != nil {
		n.cancel()
		return nil, fmt.Errorf("nereus/cluster: watch the registry: %w", err)
	}
	if err := n.register(ctx); err != nil {
		n.cancel()
		return nil, err
	}
	if err := n.refresh(ctx); err != nil {
		n.cancel()
		n.closeSession()
		return nil, err
	}
	n.wg.Add(3)
	go n.watchLoop(events)
	go n.livenessLoop()
	go n.reconcileLoop()
	n.log.Info("joined the cluster", "node_id", cfg.NodeID, "kafka_broker_id", cfg.KafkaBrokerID,
		"rack", cfg.Rack, "brokers", len(n.View().Brokers), "session_ttl", cfg.SessionTTL)
	return n, nil
}

// register (re)creates the node's session if needed and writes its record
// bound to it.
func (n *Node) register(ctx context.Context) error {
	n.mu.Lock()
	sess := n.sess
	n.mu.Unlock()
	if sess != nil {
		select {
		case <-sess.Done():
			sess = nil
		default:
		}
	}
	if sess == nil {
		s, err := n.meta.NewSession(ctx, n.cfg.SessionTTL)
		if err != nil {
			return fmt.Errorf("nereus/cluster: open a registry session: %w", err)
		}
		sess = s
		n.mu.Lock()
		old := n.sess
		n.sess = sess
		n.self.RegisteredMs = time.Now().UnixMilli()
		n.mu.Unlock()
		if old != nil {
			n.stats.sessionsLost.Add(1)
		}
	}
	start := time.Now()
	n.mu.Lock()
	rec := n.self
	n.mu.Unlock()
	val, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	// AnyVersion: a record left by this node's previous incarnation (its
	// session not yet expired) is taken over and rebound to our session.
	v, err := n.meta.PutEphemeral(ctx, keyBrokers+n.cfg.NodeID, val, metadata.AnyVersion, sess.ID())
	if err != nil {
		return fmt.Errorf("nereus/cluster: register %s: %w", n.cfg.NodeID, err)
	}
	n.mu.Lock()
	n.recVersion = v
	n.mu.Unlock()
	n.lastContact.Store(start.UnixMilli())
	return nil
}

func (n *Node) closeSession() {
	n.mu.Lock()
	s := n.sess
	n.sess = nil
	n.mu.Unlock()
	if s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.Close(ctx)
		cancel()
	}
}

// refresh re-reads the registry and installs the view if it changed.
func (n *Node) refresh(ctx context.Context) error {
	recs, err := n.meta.RangeScan(ctx, keyBrokers, prefixEnd(keyBrokers), 0)
	if err != nil {
		return fmt.Errorf("nereus/cluster: read the registry: %w", err)
	}
	brokers := make([]Broker, 0, len(recs))
	versions := make(map[string]metadata.Version, len(recs))
	for _, r := range recs {
		b, err := decodeBroker(r.Value)
		if err != nil {
			n.log.Warn("skipping an undecodable broker record", "key", r.Key, "err", err)
			continue
		}
		brokers = append(brokers, b)
		versions[b.NodeID] = r.Version
	}
	sortBrokers(brokers)
	n.mu.Lock()
	n.versions = versions
	brokers = n.filterExpiredLocked(brokers, versions)
	n.mu.Unlock()
	n.install(brokers)
	return nil
}

func (n *Node) install(brokers []Broker) {
	n.mu.Lock()
	if sameBrokers(n.view.Brokers, brokers) {
		n.mu.Unlock()
		return
	}
	n.view = &View{Brokers: brokers, Seq: n.view.Seq + 1, At: time.Now()}
	n.signalLocked()
	n.syncPeersLocked(brokers)
	n.mu.Unlock()
	n.stats.viewChanges.Add(1)
	n.log.Info("cluster view changed", "brokers", brokerSummary(brokers))
}

// signalLocked wakes every Changes waiter and the reconcile loop. Caller
// holds n.mu.
func (n *Node) signalLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func sameBrokers(a, b []Broker) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.NodeID != y.NodeID || x.KafkaID != y.KafkaID || x.State != y.State || x.Rack != y.Rack ||
			x.Weight != y.Weight || x.RegisteredMs != y.RegisteredMs || x.Version != y.Version ||
			!slices.Equal(x.Endpoints, y.Endpoints) {
			return false
		}
	}
	return true
}

func brokerSummary(bs []Broker) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = fmt.Sprintf("%d=%s(%s)", b.KafkaID, b.NodeID, b.State)
	}
	return out
}

// watchLoop follows registry changes. Every event (or a resync) triggers
// a re-read of the whole registry, coalesced; a broken watch is re-opened.
func (n *Node) watchLoop(events <-chan metadata.Event) {
	defer n.wg.Done()
	periodic := time.NewTicker(max(n.cfg.SessionTTL, time.Second))
	defer periodic.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				if n.ctx.Err() != nil {
					return
				}
				// The watch ended (store restarted, client reconnect):
				// re-open it, then re-read what we may have missed.
				for {
					ch, err := n.meta.Watch(n.ctx, keyBrokers)
					if err == nil {
						events = ch
						break
					}
					select {
					case <-n.ctx.Done():
						return
					case <-time.After(500 * time.Millisecond):
					}
				}
			}
			// Coalesce a burst of events into one re-read.
			drain(events)
		case <-periodic.C:
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.SessionTTL)
		if err := n.refresh(ctx); err != nil && n.ctx.Err() == nil {
			n.log.Debug("registry refresh failed", "err", err)
		}
		cancel()
	}
}

func drain(ch <-chan metadata.Event) {
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// livenessLoop proves the registration alive every TTL/4 by reading the
// node's own record, re-registers when the record or the session is gone,
// and signals a change when the node becomes isolated (no proof for a
// whole TTL: others have dropped it by now, so it must stop claiming
// ownership) or stops being isolated.
func (n *Node) livenessLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(max(n.cfg.SessionTTL/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		n.mu.Lock()
		var done <-chan struct{}
		if n.sess != nil {
			done = n.sess.Done()
		}
		n.mu.Unlock()
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		case <-done:
		}
		n.probe()
		n.checkIsolation()
	}
}

func (n *Node) probe() {
	ctx, cancel := context.WithTimeout(n.ctx, max(n.cfg.SessionTTL/2, 500*time.Millisecond))
	defer cancel()
	start := time.Now()
	n.mu.Lock()
	sess, leavingDone := n.sess, n.closed
	n.mu.Unlock()
	if leavingDone {
		return
	}
	if sess != nil {
		select {
		case <-sess.Done():
			n.log.Warn("registry session lost; registering again")
			sess = nil
		default:
		}
	}
	if sess != nil {
		rec, err := n.meta.Get(ctx, keyBrokers+n.cfg.NodeID)
		switch {
		case err == nil && rec.Session == sess.ID():
			n.lastContact.Store(start.UnixMilli())
			return
		case err == nil, errors.Is(err, metadata.ErrKeyNotFound):
			n.log.Warn("registry record missing or rebound; registering again", "err", err)
		default:
			return // store unreachable: isolation is judged by lastContact
		}
	}
	if err := n.register(ctx); err != nil {
		if n.ctx.Err() == nil {
			n.log.Warn("re-registering failed", "err", err)
		}
		return
	}
	rctx, rcancel := context.WithTimeout(n.ctx, n.cfg.SessionTTL)
	_ = n.refresh(rctx)
	rcancel()
}

func (n *Node) checkIsolation() {
	iso := n.Isolated()
	n.mu.Lock()
	if iso != n.isolated {
		n.isolated = iso
		n.signalLocked()
		n.mu.Unlock()
		if iso {
			n.stats.isolations.Add(1)
			n.log.Warn("isolated from the metadata store for a whole session TTL: giving up ownership",
				"ttl", n.cfg.SessionTTL)
		} else {
			n.log.Info("metadata store reachable again")
		}
		return
	}
	n.mu.Unlock()
}

// Isolated reports whether the node has had no proof of its registration
// for a whole session TTL. An isolated node has most likely been dropped by
// the others; it owns nothing until it proves itself registered again.
func (n *Node) Isolated() bool {
	last := n.lastContact.Load()
	return last > 0 && time.Since(time.UnixMilli(last)) > n.cfg.SessionTTL
}

// Self returns the node's own record.
func (n *Node) Self() Broker {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.self
}

// NodeID is the node's id.
func (n *Node) NodeID() string { return n.cfg.NodeID }

// View returns the current view (never nil; do not modify).
func (n *Node) View() *View {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.view
}

// Changes returns a channel closed at the next change of the view, of this
// node's isolation, or when it starts leaving. Re-evaluate ownership after
// it fires and call Changes again.
func (n *Node) Changes() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

// excludedSelf reports whether this node must not be chosen as an owner
// (leaving or isolated) — its own view may still list it as active.
func (n *Node) excludedSelf() bool {
	n.mu.Lock()
	leaving := n.leaving || n.closed
	n.mu.Unlock()
	return leaving || n.Isolated()
}

// OwnerOf returns the broker that owns key (a stream name, or a
// coordinator key such as GroupKey(id)) in this node's view. ok is false
// when no broker is active.
func (n *Node) OwnerOf(key string) (Broker, bool) {
	v := n.View()
	exclude := ""
	if n.excludedSelf() {
		exclude = n.cfg.NodeID
	}
	i := pick(key, v.Brokers, exclude)
	if i < 0 {
		return Broker{}, false
	}
	return v.Brokers[i], true
}

// Owns reports whether this node owns key in its current view.
func (n *Node) Owns(key string) bool {
	b, ok := n.OwnerOf(key)
	return ok && b.NodeID == n.cfg.NodeID
}

// OwnsStream reports whether this node is the assigned owner of the stream
// named name (core-level background work — materialization, retention, GC —
// runs only where this is true). During a view change two nodes may briefly
// both answer true; the work must stay safe under that.
func (n *Node) OwnsStream(name string) bool { return n.Owns(name) }

// GroupKey is the ownership key of Kafka consumer group id (its
// coordinator is the key's owner).
func GroupKey(id string) string { return "kafka-group/" + id }

// TxnKey is the ownership key of Kafka transactional id id (its
// transaction coordinator is the key's owner).
func TxnKey(id string) string { return "kafka-txn/" + id }

// Leave drains the node out of the cluster gracefully: its record turns
// draining (no key is assigned to it any more, so the other nodes take its
// streams and coordinators), and every append session it holds is released
// (in-flight appends finish first) so the new owners acquire at once
// instead of waiting out a TTL. It returns when nothing is held any more
// or ctx ends. The node stays registered (and keeps serving redirects)
// until Close.
//
// Calling Leave again releases whatever is still held (e.g. after the first
// call's ctx ended).
func (n *Node) Leave(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	if n.leaving {
		n.mu.Unlock()
		return n.releaseAll(ctx, func(string) bool { return true })
	}
	n.leaving = true
	n.self.State = StateDraining
	sess := n.sess
	n.signalLocked()
	n.mu.Unlock()
	n.log.Info("leaving the cluster: handing streams over")
	if sess != nil {
		rec := n.Self()
		if val, err := encodeRecord(rec); err == nil {
			if _, err := n.meta.PutEphemeral(ctx, keyBrokers+n.cfg.NodeID, val, metadata.AnyVersion, sess.ID()); err != nil {
				n.log.Warn("could not mark this node draining; the others see it leave when its record goes", "err", err)
			}
		}
	}
	err := n.releaseAll(ctx, func(string) bool { return true })
	if err == nil {
		n.log.Info("left the cluster: every stream handed over")
	}
	return err
}

// Close stops following the registry and ends the node's session (which
// deletes its record). It releases nothing: call Leave first for a
// graceful exit; after a crash-like Close the streams are taken over once
// the others see the record gone.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.signalLocked()
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
	n.closeSession()
	return nil
}

func prefixEnd(p string) string { return p[:len(p)-1] + string(p[len(p)-1]+1) }
