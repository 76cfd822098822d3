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
//   - Delayed delivery (deliver_at_time): messages are delivered at once.
//     Needs a per-subscription delay index.
//   - Message chunking: chunks are stored and dispatched as ordinary entries
//     (clients reassemble); no broker-side chunk validation.
//   - Compaction and read_compacted: no compacted view exists.
//   - Retention policies are stored and reported (namespace retention REST
//     paths) but not applied: applying them needs the core's protection
//     floor from the lifecycle issue, so that time/size retention never
//     trims entries a subscription has not acknowledged (Pulsar's rule).
//   - Backlog quotas, publish/dispatch rate limits, topic
//     policies, namespace bundles, load balancing and topic ownership
//     transfer between brokers: every broker serves every topic; ownership is
//     the stream core's append session, and a broker started later fences
//     the earlier one's appends.
//   - Acknowledgement-driven trimming: Pulsar (without retention) deletes
//     ledgers once every subscription has consumed them; here data stays
//     until the stream's own retention trims it. Cursors and readers cope
//     with a trimmed start (they skip to the first readable entry).
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
