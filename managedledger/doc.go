// Package managedledger is the storage boundary of the Pulsar path: the
// ManagedLedger facade between the Pulsar wire layer and the stream core. It
// translates Pulsar coordinates (topics, positions, subscriptions) into
// stream names, stream IDs and offsets, and keeps Pulsar's protocol state
// (tenants, namespaces, partitioned topics, cursors, per-topic state such as
// schemas) in the metadata store under the "pulsar/" key namespace.
//
// It must never expose a stream ID, a WAL location or any other storage
// identity as a Pulsar coordinate, never parse message bytes (that is the
// wire layer's business), and never write the same key without a version
// expectation where a concurrent writer could exist.
//
// # Topics and streams
//
// A topic persistent://tenant/namespace/local is one stream named
// "pulsar/persistent/tenant/namespace/local". A partitioned topic with N
// partitions is a catalog record plus N independent topics
// ".../local-partition-<i>", each its own stream. One complete Pulsar entry
// (a single message, or a whole batch) is one stream entry.
//
// # Offset models
//
// Topics created by this version count one offset per message: an entry of
// n messages has RecordCount n and covers offsets [o, o+n) (the topic
// record's "offsets": "message", the stream attribute
// "pulsar.entry-format": "pulsar-entry-v2"). Kafka offsets of the same
// stream (package kop) are these offsets. Topics created before count one
// offset per entry (RecordCount 1) and keep doing so: a stream's model is
// fixed at creation, as its payload format is. Entry.Count says how many
// offsets an entry covers in either model, and every cursor operation on an
// entry takes its offset and count.
//
// # Positions
//
// A Pulsar position (ledgerId, entryId) maps to a stream offset as follows.
// When a topic is created the facade allocates a virtual ledger ID from the
// counter "pulsar/ledger-id-seq" and records it in the topic's record; it
// never changes for that topic incarnation. Then
//
//	position(offset) = (ledgerId, offset)
//	offset(ledgerId', entryId) = entryId               if ledgerId' == ledgerId
//	                           = before the first entry if ledgerId' <  ledgerId (incl. the earliest sentinel -1)
//	                           = after the last entry   if ledgerId' >  ledgerId (incl. the latest sentinel INT64_MAX)
//
// Because a deleted and re-created topic gets a fresh, larger ledger ID,
// positions handed out by an older incarnation compare below every position
// of the new one, and the ledger ID says nothing about where bytes live.
//
// # Cursors
//
// A durable cursor (a subscription) is the state "every offset below
// AckedBelow is acknowledged, plus these individually acknowledged ranges
// above it, plus these batch-index ack sets", persisted in one metadata
// record per subscription with version CAS. Every write has a closed
// outcome: applied (version advances), conflict or unknown (reload, merge
// the acknowledgements, which only ever grow between resets, and retry),
// not applied (returned). Flush returns only after the state current at the
// call has been applied, which is what an ACK_RESPONSE waits for.
// Non-durable cursors (readers) have the same state in memory only.
//
// On a message-counted topic a batch-index acknowledgement is simply the
// acknowledgement of that message's offset, so a cursor is offset ranges
// only; on an entry-counted topic partial batches keep Pulsar's ack sets.
//
// # Append sessions
//
// A factory holds at most one append session per stream, shared by every
// Ledger of that stream it opened (the Pulsar broker's topic and the KoP
// projection): the first AcquireWriter takes it, the last Close releases
// it, and a fenced session dropped by one holder is dropped for all.
package managedledger
