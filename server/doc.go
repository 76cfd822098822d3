// Package server is the Nereus process: it resolves configuration (flags >
// NEREUS_* environment > YAML file > defaults), opens the stream storage,
// serves the admin HTTP port (/healthz, Prometheus /metrics — its own
// collectors plus one OpenTelemetry exporter for the storage packages'
// meters —, the /v1 REST API for streams, and the read-only web console at
// /console/ from embedded assets) and hosts the protocol front ends (Kafka,
// Pulsar) through the small Frontend interface, and drains all of it on
// shutdown. Operational constants are settings too (Tuning).
//
// It is wiring only: it owns listeners, lifecycle and the REST mapping of
// stream.Storage, never stream semantics. It must never reach below the
// stream.Storage contract (no metadata keys, no WAL objects; the console's
// Kafka view reads topics and group offsets only through kafka/kstore's read
// API), the console must never write, and nothing else in the repository
// may import it except cmd/nereus.
//
// Shutdown order (the invariant that keeps acknowledged data safe):
// /healthz turns 503 and listeners stop accepting; long polls return;
// in-flight requests and front-end work finish until the drain deadline;
// append sessions are released; storage closes last, after every front end
// and the HTTP server have returned.
package server
