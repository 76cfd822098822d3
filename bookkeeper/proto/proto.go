package proto

import (
	"errors"
	"fmt"
)

// ErrMalformed marks bytes that do not decode: a short frame, a bad header,
// an unknown opcode, a length field that disagrees with the frame.
var ErrMalformed = errors.New("bookkeeper/proto: malformed frame")

// ErrDigestMismatch marks an entry whose digest does not match its bytes, or
// whose header names a different ledger or entry than the one requested.
// Corrupt bytes are an error, never served.
var ErrDigestMismatch = errors.New("bookkeeper/proto: entry digest mismatch")

// Protocol constants (BookieProtocol.java).
const (
	// CurrentVersion is the v2 protocol version the client always sends.
	CurrentVersion = 2

	OpAdd       = 1
	OpRead      = 2
	OpAuth      = 3
	OpBatchRead = 7

	FlagNone         uint16 = 0x0
	FlagDoFencing    uint16 = 0x1
	FlagRecoveryAdd  uint16 = 0x2
	FlagHighPriority uint16 = 0x4

	// MasterKeyLen is the fixed length of the master key on the wire.
	MasterKeyLen = 20
	// EntryHeaderLen is the stored entry's fixed header (METADATA_LENGTH).
	EntryHeaderLen = 32
	// ResponseHeaderLen is header+rc+ledgerId+entryId of every response.
	ResponseHeaderLen = 24
	// ReadRequestLen and FencingReadRequestLen are READ frame lengths
	// (excluding the 4-byte length prefix).
	ReadRequestLen        = 20
	FencingReadRequestLen = 40

	// LastEntry as a READ entryId asks for the last entry the bookie holds
	// for the ledger (the piggybacked-LAC read).
	LastEntry int64 = -1
	// InvalidEntryID is BookKeeper's "no entry" (-1), e.g. the LAC of an
	// empty ledger.
	InvalidEntryID int64 = -1

	// DefaultMaxFrameSize is the bookie's default nettyMaxFrameSizeBytes
	// (5 MiB). A larger add frame is dropped by the bookie's frame decoder.
	DefaultMaxFrameSize = 5 << 20
)

// RC is a v2 response return code.
type RC int32

// Return codes (BookieProtocol.java).
const (
	EOK                 RC = 0
	ENOLEDGER           RC = 1
	ENOENTRY            RC = 2
	EBADREQ             RC = 100
	EIO                 RC = 101
	EUA                 RC = 102
	EBADVERSION         RC = 103
	EFENCED             RC = 104
	EREADONLY           RC = 105
	ETOOMANYREQUESTS    RC = 106
	EUNKNOWNLEDGERSTATE RC = 107
)

func (rc RC) String() string {
	switch rc {
	case EOK:
		return "EOK"
	case ENOLEDGER:
		return "ENOLEDGER"
	case ENOENTRY:
		return "ENOENTRY"
	case EBADREQ:
		return "EBADREQ"
	case EIO:
		return "EIO"
	case EUA:
		return "EUA"
	case EBADVERSION:
		return "EBADVERSION"
	case EFENCED:
		return "EFENCED"
	case EREADONLY:
		return "EREADONLY"
	case ETOOMANYREQUESTS:
		return "ETOOMANYREQUESTS"
	case EUNKNOWNLEDGERSTATE:
		return "EUNKNOWNLEDGERSTATE"
	}
	return fmt.Sprintf("RC(%d)", int32(rc))
}

// PacketHeader packs a v2 packet header.
func PacketHeader(version, op uint8, flags uint16) uint32 {
	return uint32(version)<<24 | uint32(op)<<16 | uint32(flags)
}

// SplitHeader unpacks a v2 packet header.
func SplitHeader(h uint32) (version, op uint8, flags uint16) {
	return uint8(h >> 24), uint8(h >> 16), uint16(h)
}
