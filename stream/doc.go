// Package stream is the Nereus stream core: the one logical truth beneath
// every protocol path. It owns stream identity (name -> ID), the committed
// head of each stream and its version-CAS in the metadata store (the only
// commit point), append sessions and fencing, the commit pipeline (WAL write
// -> commit intent -> head CAS -> index publication), the offset and time
// indexes, reads, trim, seal and delete.
//
// It speaks stream IDs and offsets only. It must never know about Kafka
// partitions, Pulsar ledgers or BookKeeper ledger IDs as coordinates, never
// import a protocol adapter, and never treat a WAL write, PUT or delete that
// returned OK as a commit: nothing is visible until its head CAS applied.
package stream
