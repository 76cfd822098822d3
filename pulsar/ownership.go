package pulsar

// Topic ownership in a cluster of brokers.
//
// A topic (each partition is a topic) is served by exactly one broker: the
// owner of its stream in the cluster's view (cluster.Node, rendezvous
// hashing over the active brokers). LOOKUP and the HTTP lookup send
// clients there (Redirect to the owner, authoritative); PRODUCER and
// SUBSCRIBE on another broker are refused with ServiceNotReady so the
// client looks the topic up again. When ownership moves (a broker joins,
// drains or dies), the broker that lost a topic unloads it: producers and
// consumers are closed (clients reconnect through lookup), cursors are
// persisted and the append session is released, so the new owner takes it
// at once. Reads of the stream itself need no ownership, but a topic's
// subscriptions (dispatch, acks) live on its owner only.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
)

// topicOwner returns the broker that serves topic; self reports whether
// that is this broker. ok is false when no broker is active.
func (s *Server) topicOwner(name managedledger.TopicName) (b cluster.Broker, self, ok bool) {
	b, ok = s.cluster.OwnerOf(name.StreamName())
	return b, ok && b.NodeID == s.cluster.NodeID(), ok
}

// errNotOwner is the answer to a topic operation on a broker that does not
// serve the topic: ServiceNotReady makes Pulsar clients look it up again.
func (s *Server) errNotOwner(name managedledger.TopicName) error {
	b, _, ok := s.topicOwner(name)
	if !ok {
		return newError(pb.ServerError_ServiceNotReady, fmt.Sprintf("topic %s has no owner: no active broker", name))
	}
	return newError(pb.ServerError_ServiceNotReady, fmt.Sprintf("topic %s is served by broker %s; look it up again", name, b.NodeID))
}

// ownerURLs are broker b's pulsar:// and pulsar+ssl:// URLs for listener
// group name (else its first Pulsar endpoints).
func ownerURLs(b cluster.Broker, name string) (plain, tls string) {
	pick := func(match func(cluster.Endpoint) bool) {
		for _, e := range b.Endpoints {
			if e.Protocol != cluster.ProtocolPulsar || !match(e) {
				continue
			}
			if e.TLS && tls == "" {
				tls = "pulsar+ssl://" + e.Addr()
			} else if !e.TLS && plain == "" {
				plain = "pulsar://" + e.Addr()
			}
		}
	}
	pick(func(e cluster.Endpoint) bool { return e.Listener == name })
	if plain == "" && tls == "" {
		pick(func(cluster.Endpoint) bool { return true })
	}
	return plain, tls
}

// ownerHTTPURLs are broker b's http:// and https:// admin URLs.
func ownerHTTPURLs(b cluster.Broker, name string) (plain, tls string) {
	pick := func(match func(cluster.Endpoint) bool) {
		for _, e := range b.Endpoints {
			if e.Protocol != cluster.ProtocolHTTP || !match(e) {
				continue
			}
			if e.TLS && tls == "" {
				tls = "https://" + e.Addr()
			} else if !e.TLS && plain == "" {
				plain = "http://" + e.Addr()
			}
		}
	}
	pick(func(e cluster.Endpoint) bool { return e.Listener == name })
	pick(func(cluster.Endpoint) bool { return true })
	return plain, tls
}

// awaitOwnerChange waits (bounded) for the view to change: an
// authoritative lookup that lands on a broker whose view disagrees gives
// the views a moment to converge before redirecting again.
func (s *Server) awaitOwnerChange(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.cluster.Changes():
	case <-t.C:
	case <-ctx.Done():
	}
}

// followCluster unloads, at every ownership change, the loaded topics this
// broker no longer serves.
func (s *Server) followCluster() {
	defer s.wg.Done()
	for {
		ch := s.cluster.Changes()
		s.unloadMoved()
		select {
		case <-ch:
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *Server) unloadMoved() {
	s.mu.Lock()
	var moved []*topic
	for _, tl := range s.topics {
		select {
		case <-tl.done:
			if tl.t != nil {
				moved = append(moved, tl.t)
			}
		default:
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, t := range moved {
		if _, self, _ := s.topicOwner(t.name); self {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s.log.Info("topic ownership moved; unloading", "topic", t.name.String())
			ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
			defer cancel()
			if err := t.close(ctx, true); err != nil {
				s.log.Warn("unloading a moved topic", "topic", t.name.String(), "err", err)
			}
		}()
	}
	wg.Wait()
}
