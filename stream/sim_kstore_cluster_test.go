package stream_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/kafka/kstore"
	"github.com/nereusstream/nereus-go/stream"
)

// The simulated cluster membership of the kstore simulation
// (sim_kstore_test.go): kstore.Cluster and kstore.Runtime on the simulated
// world, in place of *cluster.Node (whose registry needs metadata sessions
// and ephemeral records, and which runs goroutines and timers of its own).
//
// Placement: each partition has an owner and a placement epoch, bumped at
// every move. Each broker has a view of the placement; the new owner's
// view changes at once, every other broker's after a lag of 0–30 ms (a
// replaced owner keeps appending under its old session until its view
// catches up, as a broker with a stale view does). A broker's view that
// stops naming it the owner drops its session (the real node's reconcile
// loop releases it; here the next owner fences it instead — ReleaseSession
// drains in-flight appends, a blocking wait the event loop cannot make).
//
// Writer is cluster.Node.Writer without the waits: while the previous
// holder of the stream's session is up and its view still names it the
// owner (it has not handed over), ErrHandoffPending; otherwise it acquires
// the session with AuthorityEpoch = the placement epoch its view holds,
// so the new owner takes over the previous one's live session and a
// stale view's acquisition is refused (stream.ErrFenced, which kstore
// answers as ErrNotLeader). A restarted broker that still owns its
// partitions acquires under the same epoch with the same WriterID (the
// core renews its earlier incarnation's session, as for a real node).

type ksPlacement struct {
	owner int
	epoch int64
}

// ksCluster is one broker incarnation's membership: kstore.Cluster.
type ksCluster struct {
	s       *ksSim
	b       int
	storage stream.Storage
	writers map[stream.ID]stream.Session
}

var _ kstore.Cluster = (*ksCluster)(nil)

func ksNode(b int) string { return fmt.Sprintf("b%d", b) }

func (k *ksCluster) view(name string) (ksPlacement, bool) {
	p, ok := k.s.partOf[name]
	if !ok {
		return ksPlacement{}, false
	}
	return k.s.views[k.b][p], true
}

func (k *ksCluster) OwnsStream(name string) bool {
	v, ok := k.view(name)
	return ok && v.owner == k.b
}

func (k *ksCluster) OwnerOf(name string) (cluster.Broker, bool) {
	v, ok := k.view(name)
	if !ok {
		return cluster.Broker{}, false
	}
	return cluster.Broker{NodeID: ksNode(v.owner), KafkaID: int32(v.owner)}, true
}

func (k *ksCluster) Writer(ctx context.Context, id stream.ID, name string) (stream.Session, error) {
	v, ok := k.view(name)
	if !ok || v.owner != k.b {
		b, has := k.OwnerOf(name)
		return stream.Session{}, &cluster.NotOwnerError{Key: name, Owner: b, HasOwner: has}
	}
	if sess, ok := k.writers[id]; ok {
		return sess, nil
	}
	// The previous owner is alive and has not handed over (its view still
	// names it): cluster.Node.Writer waits for its release, up to
	// HandoffWait, and then answers ErrHandoffPending; here at once.
	if info, err := k.storage.Describe(ctx, id); err == nil && info.Session.WriterID != "" && info.Session.WriterID != ksNode(k.b) {
		var prev int
		if _, err := fmt.Sscanf(info.Session.WriterID, "b%d", &prev); err == nil && k.s.c.Up(prev) &&
			k.s.views[prev][k.s.partOf[name]].owner == prev {
			return stream.Session{}, fmt.Errorf("%w (%s is held by %s)", cluster.ErrHandoffPending, name, info.Session.WriterID)
		}
	}
	sess, err := k.storage.AcquireSession(ctx, id, stream.SessionOptions{WriterID: ksNode(k.b), TTL: time.Minute,
		AuthorityEpoch: v.epoch, StealExpired: true})
	if err != nil {
		k.s.c.Tracef("ks b%d acquire %s at placement epoch %d: %v", k.b, name, v.epoch, err)
		return stream.Session{}, err
	}
	k.s.stats.acquired++
	k.s.c.Tracef("ks b%d acquired %s: session epoch %d (placement epoch %d)", k.b, name, sess.Epoch, v.epoch)
	k.writers[id] = sess
	return sess, nil
}

func (k *ksCluster) Lost(sess stream.Session) {
	if cur, ok := k.writers[sess.Stream]; ok && cur.Token == sess.Token && cur.Epoch == sess.Epoch {
		delete(k.writers, sess.Stream)
		k.s.stats.lost++
	}
}

func (k *ksCluster) Release(ctx context.Context, id stream.ID) error {
	delete(k.writers, id)
	return nil
}

// Changes never fires: with a supplied runtime kstore runs no marker
// service, the only reader.
func (k *ksCluster) Changes() <-chan struct{} { return nil }

// ksRuntime is kstore.Runtime on broker b's current incarnation: its timers
// die with it.
type ksRuntime struct {
	c *stream.SimCluster
	b int
}

func (r ksRuntime) AfterFunc(d time.Duration, f func()) func() bool { return r.c.AfterFunc(d, r.b, f) }

// Go runs f as an event of the broker. kstore starts only the topic watch
// this way, whose loop ends at once: the simulated metadata store's Watch
// returns a closed channel.
func (r ksRuntime) Go(f func()) { r.c.After(0, r.b, f) }

// move makes broker to the owner of partition p at a new placement epoch:
// its view at once, the others' after a lag.
func (s *ksSim) move(p, to int) {
	s.place[p] = ksPlacement{owner: to, epoch: s.place[p].epoch + 1}
	np := s.place[p]
	s.setView(to, p, np)
	for b := range s.views {
		if b == to {
			continue
		}
		lag := time.Duration(s.c.Rand().Intn(30)) * time.Millisecond
		if s.quiet {
			lag = 0
		}
		b := b
		s.c.After(lag, -1, func() { s.setView(b, p, np) })
	}
	// The clients learn it later still (or at their next NOT_LEADER).
	lag := time.Duration(s.c.Rand().Intn(40)) * time.Millisecond
	s.c.After(lag, -1, func() {
		if s.client[p].epoch < np.epoch {
			s.client[p] = np
		}
	})
}

// setView updates broker b's view of partition p unless it already holds a
// newer placement; a view that stops naming b the owner (or names it at a
// later placement epoch) drops b's session (the reconcile loop's release).
func (s *ksSim) setView(b, p int, np ksPlacement) {
	old := s.views[b][p]
	if np.epoch <= old.epoch {
		return
	}
	s.views[b][p] = np
	// (Also when the view jumps from b to b across another owner's epoch:
	// that session was fenced meanwhile. A real node would keep it until
	// an append or a renewal finds the fence; the audit reads through the
	// leader's core, which must not serve a fenced session's stale head.)
	if old.owner == b {
		if br := s.brokers[b]; br != nil && s.c.Up(b) && s.c.Incarnation(b) == br.inc && br.parts[p] != nil {
			delete(br.cl.writers, br.parts[p].StreamID)
		}
	}
}
