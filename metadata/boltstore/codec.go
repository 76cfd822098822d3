package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/nereusstream/nereus-go/metadata"
)

// ErrCorrupt means stored bytes failed their checksum or are not a known
// format. The bytes are not served. Nothing was written by the operation
// that hit it; the file needs repair from a backup or another replica.
var ErrCorrupt = errors.New("boltstore: corrupt record (checksum or format mismatch)")

const (
	fileFormat   uint32 = 1
	recordFormat byte   = 1
	recordHeader        = 1 + 8 + 8 + 4
)

var (
	bucketMeta      = []byte("meta")
	bucketKV        = []byte("kv")
	bucketEphemeral = []byte("ephemeral")

	metaFormat   = []byte("format")
	metaVersion  = []byte("version")
	metaSessions = []byte("sessions")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeRecord lays out one "kv" value (see the package doc).
func encodeRecord(version metadata.Version, session metadata.SessionID, value []byte) []byte {
	b := make([]byte, recordHeader+len(value))
	b[0] = recordFormat
	binary.BigEndian.PutUint64(b[1:9], uint64(version))
	binary.BigEndian.PutUint64(b[9:17], uint64(session))
	copy(b[recordHeader:], value)
	crc := crc32.Update(crc32.Checksum(b[:17], castagnoli), castagnoli, value)
	binary.BigEndian.PutUint32(b[17:21], crc)
	return b
}

// header is a decoded record header; value aliases bbolt's memory and is
// valid only inside the transaction.
type header struct {
	version metadata.Version
	session metadata.SessionID
	value   []byte
}

func decodeRecord(key, b []byte) (header, error) {
	if len(b) < recordHeader || b[0] != recordFormat {
		return header{}, fmt.Errorf("%w: key %q: bad header", ErrCorrupt, key)
	}
	value := b[recordHeader:]
	crc := crc32.Update(crc32.Checksum(b[:17], castagnoli), castagnoli, value)
	if crc != binary.BigEndian.Uint32(b[17:21]) {
		return header{}, fmt.Errorf("%w: key %q: crc mismatch", ErrCorrupt, key)
	}
	h := header{
		version: metadata.Version(binary.BigEndian.Uint64(b[1:9])),
		session: metadata.SessionID(binary.BigEndian.Uint64(b[9:17])),
		value:   value,
	}
	if h.version <= 0 {
		return header{}, fmt.Errorf("%w: key %q: version %d", ErrCorrupt, key, h.version)
	}
	return h, nil
}

func (h header) record(key string) metadata.Record {
	return metadata.Record{Key: key, Value: append([]byte{}, h.value...), Version: h.version, Session: h.session}
}

func encodeU64(v uint64) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint64(b, v)
	binary.BigEndian.PutUint32(b[8:], crc32.Checksum(b[:8], castagnoli))
	return b
}

func decodeU64(name, b []byte) (uint64, error) {
	if b == nil {
		return 0, nil
	}
	if len(b) != 12 || crc32.Checksum(b[:8], castagnoli) != binary.BigEndian.Uint32(b[8:]) {
		return 0, fmt.Errorf("%w: meta %q", ErrCorrupt, name)
	}
	return binary.BigEndian.Uint64(b), nil
}

func encodeU32(v uint32) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[:4], castagnoli))
	return b
}

func decodeU32(name, b []byte) (uint32, error) {
	if len(b) != 8 || crc32.Checksum(b[:4], castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return 0, fmt.Errorf("%w: meta %q", ErrCorrupt, name)
	}
	return binary.BigEndian.Uint32(b), nil
}

// ephemeralKey is the "ephemeral" index key of (session, key).
func ephemeralKey(session metadata.SessionID, key string) []byte {
	b := make([]byte, 8+len(key))
	binary.BigEndian.PutUint64(b, uint64(session))
	copy(b[8:], key)
	return b
}

func sessionPrefix(session metadata.SessionID) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(session))
	return b
}
