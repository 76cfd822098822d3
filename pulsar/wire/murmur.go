package wire

import "encoding/binary"

// KeyHashRange is the size of the Key_Shared hash space (Pulsar's 65 536
// slots).
const KeyHashRange = 1 << 16

// StickyKeyHash maps a routing key to a Key_Shared slot the way Pulsar does:
// Murmur3 (32-bit, seed 0) of the key bytes, sign bit cleared, modulo the
// range. Clients that pin STICKY hash ranges depend on this function.
func StickyKeyHash(key []byte) int {
	return int(murmur3(key, 0)&0x7fffffff) % KeyHashRange
}

func murmur3(data []byte, seed uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	h := seed
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
