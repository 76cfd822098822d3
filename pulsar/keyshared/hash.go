package keyshared

import "encoding/binary"

// Range is an inclusive range of sticky-key hashes.
type Range struct{ Start, End int }

// Size is the number of hashes in r.
func (r Range) Size() int { return r.End - r.Start + 1 }

// Contains reports whether h lies in r.
func (r Range) Contains(h int) bool { return h >= r.Start && h <= r.End }

// Pulsar's hash spaces. DefaultRangeSize is StickyKeyConsumerSelector's
// DEFAULT_RANGE_SIZE (2<<15). Hash 0 is STICKY_KEY_HASH_NOT_SET and is never
// produced: a key hashing to it is moved to 1, as in
// StickyKeyConsumerSelectorUtils.makeStickyKeyHash.
const DefaultRangeSize = 2 << 15

var (
	// ConsistentRange is the hash space of the consistent-hashing selector
	// (Range.of(STICKY_KEY_HASH_NOT_SET+1, DEFAULT_RANGE_SIZE-1)).
	ConsistentRange = Range{Start: 1, End: DefaultRangeSize - 1}
	// StickyRange is the hash space of STICKY subscriptions, whose
	// consumers declare ranges inside [0, 65535].
	StickyRange = Range{Start: 0, End: DefaultRangeSize - 1}
)

// Murmur3 is Murmur3 x86 32-bit with seed 0 (Pulsar's Murmur3_32Hash
// before its sign bit is cleared).
func Murmur3(data []byte) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	var h uint32
	n := len(data) / 4
	for i := 0; i < n; i++ {
		k := binary.LittleEndian.Uint32(data[4*i:])
		k *= c1
		k = k<<15 | k>>17
		k *= c2
		h ^= k
		h = h<<13 | h>>19
		h = h*5 + 0xe6546b64
	}
	tail := data[4*n:]
	var k uint32
	switch len(tail) {
	case 3:
		k ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(tail[0])
		k *= c1
		k = k<<15 | k>>17
		k *= c2
		h ^= k
	}
	h ^= uint32(len(data))
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// StickyKeyHash maps a sticky key into r the way Pulsar does:
// (Murmur3(key) & 0x7fffffff) % r.Size() + r.Start, with 0 moved to 1.
func StickyKeyHash(key []byte, r Range) int {
	h := int(Murmur3(key)&0x7fffffff)%r.Size() + r.Start
	if h == 0 {
		h = 1
	}
	return h
}
