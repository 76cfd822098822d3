package cluster

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// Peer watch: fast detection of a crashed peer process.
//
// The registry TTL bounds how long a node that stopped answering stays
// registered, but a client that re-reads metadata right after a broker
// failed (franz-go does, then waits MetadataMinAge — 5 s — before the next
// read) must already be told the new owner, or its failover takes one more
// refresh period. So each node keeps one idle TCP connection to every
// registered peer's advertised address. When a peer process dies its
// kernel closes that connection at once; the node then redials, and a
// refused connection (nothing listens at the peer's address any more) is
// proof enough that this incarnation of the peer is gone: the node drops
// it from its own view immediately and deletes the peer's registry record
// (conditional on the record's version, so a restarted peer's new record
// is never touched), which the other nodes see through their watch.
// Between the closed connection and that verdict the peer is "suspect",
// and Settle (called by the front ends before answering metadata and
// lookups) waits for the verdict, bounded by suspectWait.
//
// This decides liveness only, never safety: ownership of the peer's
// streams is still taken through the core's append session (pre-emption
// with a higher authority epoch, head CAS). A peer expired by mistake —
// alive, but its listener refused a connection — has its record
// re-registered by its own liveness probe within TTL/4, and the appends it
// attempts meanwhile under sessions that were taken from it fail as fenced.
//
// A silent peer (host gone, network partition: no connection reset, dials
// time out) is not expired early: only the TTL removes it. A peer whose
// address was refused before any connection succeeded is not suspected
// either (a stale or unreachable advertised address proves nothing).

const (
	// suspectWait bounds how long Settle holds an answer while a peer's
	// connection closed and the redial has not decided yet.
	suspectWait = time.Second
	// peerDialTimeout bounds one dial of a peer's address.
	peerDialTimeout = time.Second
	// peerSettleRead is how long a re-established connection must stay
	// open before a suspicion is cleared: a dying process may still accept
	// a connection on a listening socket the kernel has not closed yet.
	peerSettleRead = 50 * time.Millisecond
	// peerRedials bounds the reconnects within one suspicion.
	peerRedials = 5
)

// peerWatcher follows one incarnation of one peer (its record's
// registration time and address).
type peerWatcher struct {
	key    string // nodeID|registeredMs|addr
	cancel context.CancelFunc
}

// expiredPeer is a peer this node found dead before the registry says so:
// excluded from the view until the registry no longer holds that record
// version, or until a TTL passed (the registry must have dropped a really
// dead peer by then; one still registered is alive).
type expiredPeer struct {
	version metadata.Version
	until   time.Time
}

// watchAddr picks the address to watch: a plain Kafka endpoint, else any
// plain endpoint, else any (a TLS listener accepts the TCP connection just
// the same; the handshake is never started).
func watchAddr(b Broker) (string, bool) {
	for _, pass := range []func(Endpoint) bool{
		func(e Endpoint) bool { return e.Protocol == ProtocolKafka && !e.TLS },
		func(e Endpoint) bool { return !e.TLS },
		func(Endpoint) bool { return true },
	} {
		for _, e := range b.Endpoints {
			if e.Host != "" && e.Port > 0 && pass(e) {
				return e.Addr(), true
			}
		}
	}
	return "", false
}

// syncPeersLocked starts a watcher for every peer incarnation in view and
// stops those whose peer left the view. Caller holds n.mu.
func (n *Node) syncPeersLocked(view []Broker) {
	if n.closed {
		return
	}
	want := map[string]Broker{}
	for _, b := range view {
		if b.NodeID == n.cfg.NodeID {
			continue
		}
		if _, ok := watchAddr(b); ok {
			want[b.NodeID] = b
		}
	}
	for id, w := range n.peers {
		b, ok := want[id]
		if !ok || peerKey(b) != w.key {
			w.cancel()
			delete(n.peers, id)
		}
	}
	for id, b := range want {
		if _, ok := n.peers[id]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(n.ctx)
		w := &peerWatcher{key: peerKey(b), cancel: cancel}
		n.peers[id] = w
		n.wg.Add(1)
		go n.watchPeer(ctx, w, b)
	}
}

func peerKey(b Broker) string {
	addr, _ := watchAddr(b)
	return b.NodeID + "|" + time.UnixMilli(b.RegisteredMs).String() + "|" + addr
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// watchPeer holds a connection to the peer and judges it when the
// connection ends. It returns when ctx ends or the peer was found dead.
func (n *Node) watchPeer(ctx context.Context, w *peerWatcher, b Broker) {
	defer n.wg.Done()
	defer func() {
		n.mu.Lock()
		if n.peers[b.NodeID] == w {
			delete(n.peers, b.NodeID)
		}
		n.mu.Unlock()
		n.setSuspect(b.NodeID, false)
	}()
	addr, _ := watchAddr(b)
	d := net.Dialer{Timeout: peerDialTimeout}
	backoff := func(attempt int) bool {
		return sleepCtx(ctx, time.Duration(min(attempt, 8))*250*time.Millisecond) == nil
	}
	// Only a connection that was established and then ended leads to a
	// verdict: an address that never accepted proves nothing.
	for attempt := 0; ctx.Err() == nil; {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			attempt++
			if !backoff(attempt) {
				return
			}
			continue
		}
		attempt = 0
		holdOpen(ctx, conn) // blocks until the connection ends
		if ctx.Err() != nil {
			return
		}
		// The connection ended: suspect the peer and redial at once.
		n.setSuspect(b.NodeID, true)
		switch n.judgePeer(ctx, &d, addr) {
		case peerDead:
			n.expirePeer(b)
			return
		case peerAlive:
		case peerUnknown:
			// Silent or slow: leave it to the TTL, keep watching.
			n.setSuspect(b.NodeID, false)
			if !backoff(1) {
				return
			}
		}
		n.setSuspect(b.NodeID, false)
	}
}

type peerVerdict int

const (
	peerUnknown peerVerdict = iota
	peerAlive
	peerDead
)

// judgePeer redials a peer whose connection just closed: refused = dead;
// a connection that stays open for peerSettleRead = alive (it is held no
// longer: the watch loop dials again); a timeout = unknown.
func (n *Node) judgePeer(ctx context.Context, d *net.Dialer, addr string) peerVerdict {
	for i := 0; i < peerRedials; i++ {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			if isRefused(err) {
				return peerDead
			}
			return peerUnknown
		}
		_ = conn.SetReadDeadline(time.Now().Add(peerSettleRead))
		_, err = conn.Read(make([]byte, 1))
		_ = conn.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return peerAlive
		}
		if err == nil {
			return peerAlive // it spoke: alive
		}
		// Closed again at once: the process is going away; dial again.
	}
	return peerUnknown
}

// holdOpen reads (and discards) from conn until it ends or ctx ends.
func holdOpen(ctx context.Context, conn net.Conn) {
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	defer conn.Close()
	buf := make([]byte, 512)
	for {
		if _, err := conn.Read(buf); err != nil {
			return
		}
	}
}

// setSuspect marks or clears a suspicion and wakes Settle waiters when
// the last one clears.
func (n *Node) setSuspect(nodeID string, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, was := n.suspects[nodeID]
	switch {
	case on && !was:
		n.suspects[nodeID] = struct{}{}
	case !on && was:
		delete(n.suspects, nodeID)
		if len(n.suspects) == 0 {
			close(n.settled)
			n.settled = make(chan struct{})
		}
	}
}

// Settle waits while a peer is suspect (its connection closed and the
// verdict is pending), at most suspectWait, so that an answer naming owners
// (Kafka Metadata, FindCoordinator, Pulsar lookup) given right after a peer
// crashed already names the new ones. It returns at once when no peer is
// suspect.
func (n *Node) Settle(ctx context.Context) {
	var timer *time.Timer
	for {
		n.mu.Lock()
		if len(n.suspects) == 0 {
			n.mu.Unlock()
			return
		}
		ch := n.settled
		n.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(suspectWait)
			defer timer.Stop()
		}
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		case <-n.ctx.Done():
			return
		}
	}
}

// expirePeer drops a peer found dead: from this node's view at once, then
// from the registry (delete conditional on the record being the same
// incarnation at the same version), then re-reads the registry.
func (n *Node) expirePeer(b Broker) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.SessionTTL)
	defer cancel()
	key := keyBrokers + b.NodeID
	n.mu.Lock()
	var brokers []Broker
	for _, o := range n.view.Brokers {
		if o.NodeID != b.NodeID {
			brokers = append(brokers, o)
		}
	}
	n.expired[b.NodeID] = expiredPeer{version: n.versions[b.NodeID], until: time.Now().Add(n.cfg.SessionTTL)}
	n.mu.Unlock()
	n.stats.peersExpired.Add(1)
	n.log.Warn("peer's connection closed and its address refuses connections: expiring it before its registry TTL",
		"peer", b.NodeID, "kafka_broker_id", b.KafkaID)
	n.install(brokers)
	n.setSuspect(b.NodeID, false)

	rec, err := n.meta.Get(ctx, key)
	switch {
	case errors.Is(err, metadata.ErrKeyNotFound):
		n.forgetExpired(b.NodeID)
	case err != nil:
		// Unknown: the exclusion stays until the TTL (the registry drops
		// a really dead peer by then).
	default:
		cur, derr := decodeBroker(rec.Value)
		if derr != nil || cur.RegisteredMs != b.RegisteredMs {
			n.forgetExpired(b.NodeID) // another incarnation registered: trust the registry
			break
		}
		err = n.meta.Delete(ctx, key, rec.Version)
		switch {
		case err == nil, errors.Is(err, metadata.ErrKeyNotFound), errors.Is(err, metadata.ErrUnexpectedVersion):
			// Applied, or the record changed meanwhile (re-registered):
			// either way the registry is the truth again.
			n.forgetExpired(b.NodeID)
		default:
			n.log.Debug("deleting an expired peer's record failed; excluded until its TTL", "peer", b.NodeID, "err", err)
		}
	}
	_ = n.refresh(ctx)
}

func (n *Node) forgetExpired(nodeID string) {
	n.mu.Lock()
	delete(n.expired, nodeID)
	n.mu.Unlock()
}

// filterExpiredLocked removes from recs (the registry as read) the peers
// found dead whose record is still the one found dead. Caller holds n.mu.
func (n *Node) filterExpiredLocked(brokers []Broker, versions map[string]metadata.Version) []Broker {
	if len(n.expired) == 0 {
		return brokers
	}
	out := brokers[:0]
	for _, b := range brokers {
		if e, ok := n.expired[b.NodeID]; ok {
			if versions[b.NodeID] == e.version && time.Now().Before(e.until) {
				continue
			}
			delete(n.expired, b.NodeID)
		}
		out = append(out, b)
	}
	return out
}
