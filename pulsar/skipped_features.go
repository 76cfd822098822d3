package pulsar

// Deliberate gaps, with reasons. Each is a known difference from Apache
// Pulsar's broker; none is silently emulated.
//
//   - Authentication providers other than "token" (JWT HS256/RS256) and
//     "tls" (client certificate CN): no basic, OAuth2 server-side
//     introspection, Athenz or SASL/Kerberos. Proxy roles (original
//     principal) are not honoured.
//   - Authorization: subscription auth modes (prefix), wildcard role
//     matching and the functions/sources/sinks/packages actions are stored
//     but only produce, consume and lookup are checked.
//   - Transactions (TC_CLIENT_CONNECT_REQUEST, NEW_TXN, ADD_PARTITION_TO_TXN,
//     ADD_SUBSCRIPTION_TO_TXN, END_TXN): answered with ERROR NotAllowedError
//     carrying the request id; txnid fields on SEND and ACK are ignored (the
//     message is stored, the ack applied). Needs a transaction coordinator.
//   - WATCH_TOPIC_LIST: not served and not advertised (Java clients fall back
//     to polling GET_TOPICS_OF_NAMESPACE).
//   - Message chunking: chunks are stored and dispatched as ordinary entries
//     (clients reassemble); no broker-side chunk validation.
//   - Compaction (compaction.go) runs only when triggered (PUT .../compaction):
//     no automatic compaction threshold policy; compressed batches are not
//     compacted (kept whole); compacted reads are served to Exclusive and
//     Failover subscriptions as Pulsar does.
//   - Publish/dispatch rate limits, namespace bundles and load balancing.
//   - Acknowledgement-driven trimming by default: Apache Pulsar's default
//     retention (0, 0) deletes what every subscription acknowledged; the
//     Nereus default (--pulsar-default-retention-minutes/-size-mb -1) keeps
//     everything, so Kafka clients (KoP) and readers find history. A
//     namespace or topic retention policy, (0, 0) included, is applied as
//     Pulsar applies it (retention.go). Backlog quotas are applied
//     (backlogquota.go), their size measured from the stream's retained
//     bytes per offset.
//   - Idle topic unloading: a topic stays loaded (ledger handle, dispatcher
//     goroutines of its subscriptions) until it is deleted or the broker
//     shuts down.
//   - Geo-replication and replicated subscriptions.
//   - Non-persistent topics: accepted, but stored like persistent ones.
//   - maxUnackedMessagesPerConsumer blocking; consumer epochs (the client
//     filters stale messages).
//   - Schema compatibility strategies: schemas are versioned, never checked
//     unless Config.EnforceSchema (then only the type is compared).
//   - REACHED_END_OF_TOPIC: topics can be terminated (admin POST
//     .../terminate seals the stream; producers get TopicTerminatedError),
//     but consumers at the end are not told: pulsar-client-go v0.19 does not
//     handle the command (it would close the connection), so it is never sent.
