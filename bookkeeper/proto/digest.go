package proto

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// DigestType is a ledger's entry digest. The values are the ledger metadata
// protobuf enum values (LedgerMetadataFormat.DigestType).
type DigestType int32

const (
	DigestCRC32  DigestType = 1
	DigestHMAC   DigestType = 2 // "MAC" in the Java API
	DigestCRC32C DigestType = 3
	DigestDummy  DigestType = 4
)

func (d DigestType) String() string {
	switch d {
	case DigestCRC32:
		return "CRC32"
	case DigestHMAC:
		return "MAC"
	case DigestCRC32C:
		return "CRC32C"
	case DigestDummy:
		return "DUMMY"
	}
	return fmt.Sprintf("DigestType(%d)", int32(d))
}

// Size is the digest's length in the stored entry.
func (d DigestType) Size() int {
	switch d {
	case DigestCRC32:
		return 8
	case DigestHMAC:
		return 20
	case DigestCRC32C:
		return 4
	case DigestDummy:
		return 0
	}
	return -1
}

// Valid reports whether d is one of the four known digest types.
func (d DigestType) Valid() bool { return d.Size() >= 0 }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MasterKey is SHA1("ledger"‖password): what adds and fencing reads carry.
// A bookie binds the first key it sees for a ledger and answers EUA to any
// other.
func MasterKey(password []byte) [MasterKeyLen]byte {
	h := sha1.New()
	h.Write([]byte("ledger"))
	h.Write(password)
	var k [MasterKeyLen]byte
	h.Sum(k[:0])
	return k
}

// MACKey is SHA1("mac"‖password), the HMAC-SHA1 key of DigestHMAC.
func MACKey(password []byte) []byte {
	h := sha1.New()
	h.Write([]byte("mac"))
	h.Write(password)
	return h.Sum(nil)
}

// Digester computes and verifies entry digests of one ledger. It is
// immutable and safe for concurrent use.
type Digester struct {
	typ    DigestType
	macKey []byte
}

// NewDigester returns the digester for a ledger's digest type and password
// (the password matters only for DigestHMAC).
func NewDigester(typ DigestType, password []byte) (*Digester, error) {
	if !typ.Valid() {
		return nil, fmt.Errorf("bookkeeper/proto: unknown digest type %d", int32(typ))
	}
	d := &Digester{typ: typ}
	if typ == DigestHMAC {
		d.macKey = MACKey(password)
	}
	return d, nil
}

// Type returns the digest type.
func (d *Digester) Type() DigestType { return d.typ }

// Size returns the digest length.
func (d *Digester) Size() int { return d.typ.Size() }

// sum writes the digest of header‖payload into dst (len(dst) == Size()).
func (d *Digester) sum(dst, header, payload []byte) {
	switch d.typ {
	case DigestCRC32:
		c := crc32.Update(0, crc32.IEEETable, header)
		c = crc32.Update(c, crc32.IEEETable, payload)
		// Java writes the CRC32 value as a long.
		binary.BigEndian.PutUint64(dst, uint64(c))
	case DigestCRC32C:
		c := crc32.Update(0, castagnoli, header)
		c = crc32.Update(c, castagnoli, payload)
		binary.BigEndian.PutUint32(dst, c)
	case DigestHMAC:
		m := hmac.New(sha1.New, d.macKey)
		m.Write(header)
		m.Write(payload)
		m.Sum(dst[:0])
	case DigestDummy:
	}
}
