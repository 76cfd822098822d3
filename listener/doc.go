// Package listener describes, binds and secures the network listeners of a
// Nereus process: every Kafka, Pulsar and admin-HTTP socket is a named Spec
// (protocol, listener name, security, bind address, advertised address),
// parsed from one syntax per protocol that mirrors what its users already
// write — Kafka's `listeners` / `advertised.listeners` /
// `listener.security.protocol.map`, Pulsar's `advertisedListeners`
// (`name:pulsar+ssl://host:port`), plain URLs for HTTP.
//
// It owns:
//   - the listener vocabulary (Spec, Endpoint) that front ends answer
//     clients with (Kafka Metadata brokers, Pulsar LOOKUP URLs) and that a
//     broker registry stores, so every component names an address the same
//     way;
//   - TLS (crypto/tls, TLS 1.2 or newer, certificate and key from files,
//     optional client-certificate verification against a CA) with reload:
//     Source re-reads its files on Reload (SIGHUP) and when they change, and
//     keeps serving the previous certificate if the new files are bad;
//   - the accept path: a Bound listener hands out connections whose TLS
//     handshake runs on the connection's own goroutine under a deadline, so
//     a half-open or garbage handshake never blocks accepting and never pins
//     a goroutine forever;
//   - the exposure rule (Exposure): which listeners bind a non-loopback
//     address without TLS or without authentication, for the one loud
//     start-up warning.
//
// It must never decide who a client is beyond reporting the verified peer
// certificate (authentication and authorization belong to the front ends),
// never log key material, and never import a front end or the server.
package listener
