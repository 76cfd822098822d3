// Package keyshared holds the Key_Shared consumer selectors of Apache
// Pulsar 4.x as pure data structures: the sticky-key hash, the
// consistent-hashing ring used by AUTO_SPLIT subscriptions
// (ConsistentHashingStickyKeyConsumerSelector, the broker default since
// 2.x: subscriptionKeySharedUseConsistentHashing=true with 100 points per
// consumer), and the exclusive hash ranges of STICKY subscriptions
// (HashRangeExclusiveStickyKeyConsumerSelector).
//
// Key → consumer assignment must match Apache Pulsar's for the same keys and
// consumer names, so that capacity and ordering behave the same when a
// deployment moves between the two brokers; the golden vectors in the tests
// are computed from the published algorithm (Murmur3 x86 32-bit, seed 0,
// sign bit cleared).
//
// The package owns hashing and selection only. It must never do I/O, read
// clocks, or know about entries, permits or acknowledgements — the
// dispatcher (package pulsar) decides when a selected consumer may
// receive (per-key ordering across joins and leaves, PIP-379 draining).
package keyshared
