// Package proto is the BookKeeper v2 ("pre-v3", binary) wire codec, the
// stored entry format, the entry digests and the ledger master key, byte for
// byte as Apache BookKeeper 4.x computes them. It is dependency-free and does
// no I/O beyond reading one frame from a bufio.Reader.
//
// It owns the bytes. It must never decide protocol semantics (quorums,
// fencing, retries), never hold state across calls, and never return bytes it
// has not bounds-checked: every decoder rejects malformed input with an error
// wrapping ErrMalformed and never panics.
//
// All integers are big-endian. Every message in both directions is a frame:
//
//	[int32 frameLen][frameLen bytes]           frameLen excludes itself
//
// The first int of every v2 packet is the packet header
//
//	(version << 24) | (opCode << 16) | (flags & 0xFFFF)     version is always 2
//
// ADD request (op 1), flags 0, or RECOVERY_ADD|HIGH_PRIORITY for recovery:
//
//	header(4) masterKey(20) entry(32+D+P)
//
// READ request (op 2); the master key is present iff flags has DO_FENCING:
//
//	header(4) ledgerId(8) entryId(8) [masterKey(20)]       entryId -1 = last entry
//
// Responses (ADD and READ):
//
//	header(4) rc(4) ledgerId(8) entryId(8) [entry, READ with rc=EOK only]
//
// The stored entry, identical in v2 and v3 and returned verbatim on reads:
//
//	ledgerId(8) entryId(8) lastAddConfirmed(8) length(8) digest(D) payload(P)
//
// where length is the cumulative payload length of entries 0..entryId and the
// digest covers the 32-byte header followed by the payload. D is 8 (CRC32,
// written as a long: four zero bytes then the IEEE CRC), 20 (HMAC-SHA1 keyed
// with SHA1("mac"‖password)), 4 (CRC32C) or 0 (DUMMY). The master key sent
// with adds and fencing reads is SHA1("ledger"‖password).
//
// Sources: bookkeeper-server BookieProtocol, BookieProtoEncoding
// (RequestEnDeCoderPreV3, ResponseEnDeCoderPreV3) and checksum/DigestManager;
// see /work/shared/notes/bookkeeper.md §4 and §6 for the citations.
package proto
