// Package pulsar is the Pulsar front end of Nereus: a broker that speaks the
// Pulsar binary protocol (and the HTTP lookup/admin subset) so that
// unmodified Pulsar clients publish and subscribe on Nereus streams.
//
// It owns protocol semantics: connections, producers and their receipts,
// subscriptions and their dispatch (Exclusive, Failover, Shared, Key_Shared),
// flow-control permits, acknowledgements, redelivery, seek, schemas and
// topic auto-creation. It reaches storage only through the ManagedLedger
// facade (package managedledger); it must never call the stream core for
// data, never expose a stream ID as a Pulsar coordinate, and never let one
// client's bad input take the broker down: malformed frames get an error
// response or a closed connection, and other connections keep being served.
//
// One file per command family (cmd_*.go), each opening with the behaviour
// and the differences from the real broker; deliberate gaps are listed in
// skipped_features.go.
//
// Threading: each connection has a reader goroutine (which handles fast
// commands inline, in arrival order, and hands slow ones — those that touch
// metadata — to goroutines) and a writer goroutine that batches frames.
// Each subscription has one dispatcher goroutine that owns its dispatch
// state; other goroutines talk to it with closures. Each producer has a
// receipt goroutine that waits for its appends in send order.
//
// Lock order: Server.mu → topic.mu → conn.mu. The append lock
// (topic.appendMu) is taken alone.
package pulsar
