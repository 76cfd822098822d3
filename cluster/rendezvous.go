package cluster

import (
	"hash/fnv"
	"math"
)

// Assignment (a pure function of the key and the active brokers):
//
// Each key (a stream name, or "kafka-group/<id>" and the like for
// coordinators) is owned by the active broker with the highest weighted
// rendezvous score. Rendezvous (highest-random-weight) hashing is
// deterministic — every node with the same view computes the same owner,
// with no coordination — balanced (each broker gets about weight/total of
// the keys), and minimal: when a broker joins, only the keys it now wins
// move, all to it; when one leaves, only its keys move, spread over the
// rest.
//
// The score function is part of the cluster protocol: nodes of one
// cluster must compute it identically, so it must never change without a
// format bump. score = -weight / ln(u), u = hash(key, node) mapped into
// (0, 1) (Schindelhauer & Schomaker's weighted rendezvous).

// score is broker b's weighted rendezvous score for key.
func score(key string, b *Broker) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(b.NodeID))
	x := mix64(h.Sum64())
	u := (float64(x>>11) + 0.5) / (1 << 53) // in (0, 1)
	w := float64(b.Weight)
	if w <= 0 {
		w = 1
	}
	return -w / math.Log(u)
}

// mix64 is the splitmix64 finaliser: FNV alone mixes the last bytes
// poorly, and node IDs often differ only there.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// pick returns the index in brokers of key's owner among the active ones
// (-1: none active). exclude, if non-empty, names a node that must not be
// chosen (an isolated node computing where its keys went). Ties (which
// need equal 53-bit hashes) go to the lower node ID.
func pick(key string, brokers []Broker, exclude string) int {
	best, bestScore := -1, 0.0
	for i := range brokers {
		b := &brokers[i]
		if !b.Active() || b.NodeID == exclude {
			continue
		}
		s := score(key, b)
		if best < 0 || s > bestScore || (s == bestScore && b.NodeID < brokers[best].NodeID) {
			best, bestScore = i, s
		}
	}
	return best
}

// Pick returns key's rendezvous choice among the active brokers of bs (ok
// false: none active). Front ends use it to spread work over a subset
// deterministically, e.g. the brokers of one rack.
func Pick(key string, bs []Broker) (Broker, bool) {
	i := pick(key, bs, "")
	if i < 0 {
		return Broker{}, false
	}
	return bs[i], true
}
