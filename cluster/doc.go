// Package cluster turns Nereus nodes sharing one metadata store and one
// object store into a cluster of stateless brokers: who is in the cluster,
// who owns which stream (and which Kafka group or transaction coordinator),
// and the taking and handing over of ownership.
//
// It owns:
//   - the broker registry: each node's record (node id, stable Kafka broker
//     id, advertised endpoints per protocol and listener, rack, weight,
//     state) as an ephemeral metadata record bound to the node's metadata
//     session, so it disappears when the node dies (session TTL, default
//     4 s) or leaves;
//   - each node's view of the registry (a watch, re-read on every change)
//     and its own liveness: a node that cannot prove its registration for a
//     whole TTL is isolated and owns nothing until it can;
//   - the peer watch (peers.go): an idle TCP connection to every peer; a
//     peer whose connection closes and whose address then refuses a new one
//     is dropped from the view at once and its record deleted
//     (conditionally), so a crashed process is replaced without waiting for
//     its TTL; Settle lets front ends answer after that verdict;
//   - the assignment policy: weighted rendezvous hashing of a key (a stream
//     name, GroupKey, TxnKey) over the active brokers (rendezvous.go);
//   - the append sessions of owned streams: Writer takes a stream's session
//     through stream.Storage.AcquireSession when this node owns it — waiting
//     for a live previous owner to release it, pre-empting a dead one with a
//     higher authority epoch — and the node releases sessions of streams it
//     stops owning (scale-out, Leave).
//
// Ownership is never assumed: the assignment only says who should write;
// the core's head CAS on the session is what lets one writer commit and
// fences every other. Two nodes whose views disagree for a moment can both
// believe they own a stream, but only the session holder commits, and the
// loser's appends fail as fenced. So the registry TTL and the views decide
// liveness (how fast a dead owner is replaced), never safety.
//
// It must never decide protocol semantics (the Kafka and Pulsar front ends
// map NotOwnerError to their own redirects), never take a session for a
// read, and never touch stream records except through stream.Storage.
package cluster
