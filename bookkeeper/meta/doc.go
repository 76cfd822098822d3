// Package meta is BookKeeper's ledger metadata as it lives in ZooKeeper:
// the binary format version 3 of LedgerMetadataFormat (DataFormats.proto),
// the hierarchical znode path layout, the LAYOUT record and the bookie
// registration record (BookieServiceInfoFormat). It is encoding only: no I/O.
//
// It owns those bytes. It must never write format versions 1 or 2 (text; it
// refuses to read them with a clear error), never accept metadata that
// BookKeeper itself would reject (no segment, E < WQ < AQ, a closed ledger
// without lastEntryId), and never pick a path other than the one
// BookKeeper's hierarchical ledger managers derive from the ledger ID: a
// ledger under the wrong path is garbage-collected by every bookie.
//
// Znode data, format v3 (LedgerMetadataSerDe.serializeVersion3):
//
//	"BookieMetadataFormatVersion\t3\n" varint32(len(msg)) msg
//
// where msg is LedgerMetadataFormat in protobuf binary encoding, fields in
// field-number order as protobuf-java writes them:
//
//	1 quorumSize (write quorum) int32   2 ensembleSize int32
//	3 length int64                      4 lastEntryId int64
//	5 state enum OPEN=1 IN_RECOVERY=2 CLOSED=3
//	6 repeated Segment{1 repeated string ensembleMember, 2 int64 firstEntryId}
//	7 digestType enum                   8 password bytes (raw, not the key)
//	9 ackQuorumSize int32               10 ctime int64 (ms, optional)
//	11 repeated cMetadataMapEntry{1 key string, 2 value bytes}
//	12 cToken int64 (random, tells "my retried create" from "someone else's")
package meta
