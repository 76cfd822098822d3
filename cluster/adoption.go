package cluster

import "time"

// DefaultAdoptAfter is how long a writer's node must have been gone from
// the registry before its physical sources are adopted.
const DefaultAdoptAfter = 10 * time.Minute

// AdoptKey is the rendezvous key of the adoption of writer's physical
// sources (its Object WAL log, its BookKeeper ledgers).
func AdoptKey(writer string) string { return "adopt/" + writer }

// ShouldAdopt implements stream.AdoptionPolicy: this node adopts the
// physical sources of writer once writer's node has been absent from this
// node's view of the registry for at least AdoptAfter — counted from when
// this node first saw it absent, so a restart of this node starts the
// count again — while this node is neither isolated nor leaving and is the
// rendezvous owner of AdoptKey(writer) among the active brokers. So one
// live node adopts a dead writer; during a view change two may briefly
// both do, which adoption tolerates (every step is a fenced claim, a
// conditional write or a proven delete). A node that comes back simply
// takes its sources back (its own restart claims them again).
func (n *Node) ShouldAdopt(writer string) bool {
	if writer == "" || writer == n.cfg.NodeID || n.excludedSelf() {
		return false
	}
	_, present := n.View().Broker(writer)
	now := time.Now()
	n.adoptMu.Lock()
	if n.absentSince == nil {
		n.absentSince = map[string]time.Time{}
	}
	first, seen := n.absentSince[writer]
	switch {
	case present:
		delete(n.absentSince, writer)
	case !seen:
		n.absentSince[writer] = now
	}
	n.adoptMu.Unlock()
	if present || !seen || now.Sub(first) < n.cfg.AdoptAfter {
		return false
	}
	return n.Owns(AdoptKey(writer))
}
