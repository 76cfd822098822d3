// Package kop is the KoP projection: Kafka clients producing to and
// consuming from Pulsar topics, over the same stream truth the Pulsar
// broker serves. It is a projection through the Pulsar storage boundary
// (package managedledger), not the native Kafka runtime: the Kafka front end
// keeps its wire protocol, group coordinator and handlers, and its storage
// boundary (kafka/kstore) routes every topic this package claims to it
// (kstore.Projection).
//
// Names. A Kafka client names a Pulsar topic by its full name,
// "persistent://tenant/namespace/topic". A partitioned Pulsar topic of N
// partitions is a Kafka topic of N partitions (Kafka partition i is the
// Pulsar topic "<topic>-partition-i"); a non-partitioned topic is a Kafka
// topic of one partition. Native Kafka topic names cannot contain ':' or
// '/', so the two name spaces never meet. Kafka auto-creation and
// CreateTopics make Pulsar topics (one partition: non-partitioned; more: a
// partitioned topic); Kafka cannot delete Pulsar topics or change their
// configs (Pulsar policies apply).
//
// Offsets. Pulsar topics of entry format managedledger.EntryFormatV2 count
// one stream offset per message, so a Kafka offset is the stream offset of
// one message: a Pulsar batch entry of n messages at offset o is one Kafka
// RecordBatch with records o..o+n-1, as KoP's AppendIndexMetadataInterceptor
// numbering does. Offsets are dense and never change (they are the core's
// committed offsets).
//
// Payloads. mapping.go is the explicit, versioned mapping between a Pulsar
// entry (metadata, batched messages with key, properties and event time)
// and a Kafka RecordBatch (records with key, headers and timestamp). A
// stream whose entry format has no mapping — Pulsar topics created before
// the message-counted format, whose offsets count entries — is refused with
// UNSUPPORTED_FOR_MESSAGE_FORMAT and a message saying why; nothing is ever
// converted by guessing.
//
// Groups. A Kafka consumer group's committed offset on a partition is the
// position of the Pulsar subscription named like the group on that Pulsar
// topic (created at the first commit), so Pulsar's stats and tools show the
// group's backlog, and a Pulsar consumer of that subscription resumes where
// the group left off. Group membership stays in the Kafka front end.
//
// The package must never write a stream entry that is not a checksummed
// Pulsar entry of the stream's format, never serve a Kafka record from bytes
// that failed their checksum, never append without the shared append
// session of the factory (one per stream per process), and never delete
// Pulsar topics (that is the Pulsar admin API's job, which closes the
// broker's producers and consumers first). Transactions, idempotent
// producer state beyond the core's dedup window, DeleteRecords and topic
// configs are refused on projected topics.
package kop
