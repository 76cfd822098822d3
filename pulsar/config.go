package pulsar

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/listener"
	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/wire"
	"github.com/nereusstream/nereus-go/stream"
)

// Config configures a Server. Zero values mean the documented default.
type Config struct {
	// AdvertisedAddr is the host:port clients are told to connect to in
	// LOOKUP answers (default: the listener's address).
	AdvertisedAddr string
	// HTTPAdvertisedURL is the admin/HTTP URL returned by HTTP lookups
	// (e.g. "http://127.0.0.1:8080"). Default: empty.
	HTTPAdvertisedURL string
	// Endpoints, when set, replace AdvertisedAddr and HTTPAdvertisedURL:
	// the advertised Pulsar and HTTP endpoints of this broker, grouped by
	// listener name. LOOKUP answers the pulsar:// and pulsar+ssl:// URLs of
	// the group the client asks for (advertised_listener_name), else of the
	// listener it is connected through; HTTP lookups answer the group named
	// by ?listenerName= or the X-Pulsar-ListenerName header, else
	// "internal" (else the first). An endpoint without a host is completed
	// with the host the client reached.
	Endpoints []listener.Endpoint
	// Cluster is this broker's cluster membership: which broker owns
	// (serves) each topic, and the append sessions of owned topics. Nil:
	// the server joins a cluster of its own on the given metadata store,
	// owning every topic.
	Cluster *cluster.Node
	// Auth is authentication and authorization (auth.go); the zero value
	// authenticates nobody and allows everything.
	Auth AuthConfig
	// ClusterName names the cluster in generated producer names and admin
	// answers (default "standalone").
	ClusterName string
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// MaxMessageSize is the largest entry (metadata + payload) accepted and
	// announced to clients in CONNECTED (default 5 MiB). Frames above it
	// plus 10 KiB close the connection.
	MaxMessageSize int
	// DisableAutoTopicCreation makes unknown topics an error for producers
	// and consumers instead of creating a non-partitioned topic.
	DisableAutoTopicCreation bool
	// DisableDeduplication turns off producer deduplication by sequence id
	// (on by default: a producer's retransmissions after a reconnect or a
	// broker restart are answered with the original message ids and not
	// stored twice). A namespace policy can override it.
	DisableDeduplication bool
	// EnforceSchema rejects producers and consumers whose schema type
	// differs from the topic's latest schema (IncompatibleSchema). Without
	// it schemas are stored and versioned but never checked.
	EnforceSchema bool
	// StorageProfile is the profile of new topic streams (default: the
	// core's default).
	StorageProfile stream.Profile
	// KeepAliveInterval is how often idle clients are pinged; a client
	// silent for twice this long is disconnected (default 30s).
	KeepAliveInterval time.Duration
	// CursorFlushInterval bounds how long acknowledgements without a
	// request id stay unpersisted (default 100ms). Acks that carry a
	// request id are persisted before their ACK_RESPONSE.
	CursorFlushInterval time.Duration
	// DispatchBatch is the most entries a subscription reads per storage
	// call (default 100).
	DispatchBatch int
	// MaxReplayEntries bounds entries a subscription holds back for
	// redelivery or per-key ordering before it stops reading ahead
	// (default 5000).
	MaxReplayEntries int
	// DefaultRetention is the retention of topics whose topic and
	// namespace set none (Pulsar's defaultRetentionTimeInMinutes /
	// defaultRetentionSizeInMB). Nil keeps everything (-1, -1): unlike
	// Apache Pulsar's (0, 0), which deletes what every subscription
	// acknowledged, and a topic's whole content when it has no
	// subscription — Kafka clients reading Pulsar topics (KoP) expect
	// history to stay.
	DefaultRetention *managedledger.RetentionPolicies
	// DisableDelayedDelivery delivers messages with deliver_at_time at once
	// (Pulsar's delayedDeliveryEnabled=false).
	DisableDelayedDelivery bool
	// DelayedDeliveryTick is the delayed-delivery resolution: a message due
	// within it of now is delivered at once (Pulsar's
	// delayedDeliveryTickTimeMillis, non-strict; default 1s).
	DelayedDeliveryTick time.Duration
	// MaxDelayedEntries bounds the delayed entries a subscription indexes
	// before it stops reading ahead (default 100000).
	MaxDelayedEntries int
	// BacklogQuotaCheckInterval is how often loaded topics are checked
	// against their backlog quotas (Pulsar's
	// backlogQuotaCheckIntervalInSeconds; default 60s).
	BacklogQuotaCheckInterval time.Duration
	// Ledgers, if set, is the managed-ledger factory to serve topics from
	// (made by NewLedgers). The server shares it with the KoP projection
	// so that both hold one append session per stream. Nil: NewServer
	// makes its own.
	Ledgers *managedledger.Factory
}

func (c Config) withDefaults() Config {
	if c.ClusterName == "" {
		c.ClusterName = "standalone"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = wire.DefaultMaxMessageSize
	}
	if c.KeepAliveInterval <= 0 {
		c.KeepAliveInterval = 30 * time.Second
	}
	if c.CursorFlushInterval <= 0 {
		c.CursorFlushInterval = 100 * time.Millisecond
	}
	if c.DispatchBatch <= 0 {
		c.DispatchBatch = 100
	}
	if c.MaxReplayEntries <= 0 {
		c.MaxReplayEntries = 5000
	}
	if c.DelayedDeliveryTick <= 0 {
		c.DelayedDeliveryTick = time.Second
	}
	if c.MaxDelayedEntries <= 0 {
		c.MaxDelayedEntries = 100000
	}
	if c.BacklogQuotaCheckInterval <= 0 {
		c.BacklogQuotaCheckInterval = time.Minute
	}
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.AdvertisedAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertisedAddr); err != nil {
			return fmt.Errorf("nereus/pulsar: AdvertisedAddr %q: %w", c.AdvertisedAddr, err)
		}
	}
	if c.MaxMessageSize > 64<<20 {
		return fmt.Errorf("nereus/pulsar: MaxMessageSize %d above 64 MiB", c.MaxMessageSize)
	}
	return nil
}
