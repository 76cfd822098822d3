package server

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/proto"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/bkwal"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// Tuning holds the operational constants an operator may need to change:
// session lifetime, retention cadence, caches, Object WAL upload and
// truncation, BookKeeper ledger shape and rollover, metrics cardinality.
// Every field has a documented default (DefaultTuning) that is the same as
// the library default it feeds, so a server on its defaults behaves exactly
// like the packages on theirs. Each is a flag, a NEREUS_* variable and a
// config-file key (tuningSettings, README "Configuration").
type Tuning struct {
	// SessionTTL is how long an append session lives without renewal: the
	// time a crashed node's streams wait before another writer may take
	// them over (default 30s). The core renews at a fraction of it.
	SessionTTL time.Duration
	// RetentionInterval is how often the core enforces stream retention
	// on the streams this node owns (default 1s; more often, down to a
	// quarter of it, for a time retention under twenty intervals).
	RetentionInterval time.Duration
	// TailCacheBytes bounds the core's cache of recently committed entries
	// that tailing readers are served from (default 64 MiB).
	TailCacheBytes int64
	// MaxPendingRuns bounds runs written to a WAL but not yet committed,
	// per stream, before appends wait (default 256).
	MaxPendingRuns int64

	// ObjectWALUploadConcurrency bounds parallel segment uploads (default 4).
	ObjectWALUploadConcurrency int64
	// ObjectWALMaxInFlightBytes caps bytes written to the Object WAL but not
	// yet durable; appends wait beyond it (default 256 MiB).
	ObjectWALMaxInFlightBytes int64
	// ObjectWALCacheBytes bounds the decoded-run read cache (default 64 MiB).
	ObjectWALCacheBytes int64
	// ObjectWALFlushMode, ObjectWALFlushInterval and ObjectWALFlushBytes say
	// when the Object WAL seals a segment. "auto" (and a zero interval)
	// choose by object store: on the filesystem latency-first — "group"
	// (group commit: seal as soon as the previous upload finished, batching
	// what arrived meanwhile) with 5ms as the longest wait behind a slow
	// upload; on S3 cost-first — "interval" every 200ms, i.e. at most
	// about 5 segment + 5 manifest PUTs per second per node while busy
	// (≈ 26 M PUTs a month, ≈ $130 at $0.005 per 1,000) and none while
	// idle. Bytes seal early at 8 MiB on both.
	ObjectWALFlushMode     string
	ObjectWALFlushInterval time.Duration
	ObjectWALFlushBytes    int64
	// ObjectWALGroupMinWait and ObjectWALGroupMinBytes (flush mode group):
	// runs written while earlier ones are still on their way are sealed
	// once the oldest waited this long or they add up to this many bytes
	// (defaults 2ms, 512 KiB; 0 turns each off), so a busy node writes
	// fewer, larger segments; a run written to an idle log is sealed at once.
	ObjectWALGroupMinWait  time.Duration
	ObjectWALGroupMinBytes int64
	// ObjectWALTruncateInterval is how often settled manifest entries are
	// dropped (default 100ms; the manifest is rewritten on every flush, so
	// its size is each flush's cost).
	ObjectWALTruncateInterval time.Duration

	// BookKeeperEnsembleSize, BookKeeperWriteQuorum, BookKeeperAckQuorum
	// shape new ledgers (defaults 3, 2, 2: with E = WQ > AQ one bookie
	// failure does not taint a ledger). Need E >= WQ >= AQ >= 1.
	BookKeeperEnsembleSize, BookKeeperWriteQuorum, BookKeeperAckQuorum int64
	// BookKeeperMaxLedgerEntries, BookKeeperMaxLedgerBytes and
	// BookKeeperMaxLedgerAge roll a stream over to a new ledger before a run
	// would pass them (defaults 100000 entries, 512 MiB, 1h).
	BookKeeperMaxLedgerEntries int64
	BookKeeperMaxLedgerBytes   int64
	BookKeeperMaxLedgerAge     time.Duration
	// BookKeeperLedgerIdleSeal: a GC pass seals a stream's current ledger
	// that has taken no run for this long once everything committed in it
	// is trimmed or materialized, so an idle stream's last ledger can be
	// reclaimed (default 30s).
	BookKeeperLedgerIdleSeal time.Duration
	// BookKeeperRetentionRollRate bounds the ledger rollovers done for
	// retention's sake (a busy stream's ledger past half its retention, or
	// whose first run is retired) to this many per second across the
	// node's streams, so many streams with short retention cannot flood
	// ZooKeeper with ledger creates (default 100; such a roll also waits
	// until the ledger is BookKeeperMinRollAge old).
	BookKeeperRetentionRollRate int64
	// BookKeeperMinRollAge: a rollover done for retention's sake (and the
	// early idle seal of a stream with short retention) waits until the
	// current ledger is this old, so one busy stream with a retention of
	// a second or less still creates at most one ledger per this long
	// (default 1s).
	BookKeeperMinRollAge time.Duration
	// BookKeeperAddTimeout bounds an add reaching its ack quorum, resends
	// included (BookKeeper's addEntryTimeoutSec; default 5s);
	// BookKeeperRequestTimeout bounds one request to one bookie (default
	// 5s); BookKeeperOpTimeout bounds one ledger lifecycle step: allocate,
	// create, seal, recover (default 60s).
	BookKeeperAddTimeout, BookKeeperRequestTimeout, BookKeeperOpTimeout time.Duration
	// BookKeeperMaxFrameSize is the largest frame sent to or accepted from a
	// bookie; it must not exceed the bookies' nettyMaxFrameSizeBytes
	// (default 5 MiB, BookKeeper's).
	BookKeeperMaxFrameSize int64
	// BookKeeperReaderCache bounds the ledgers kept open for reads (default
	// 256).
	BookKeeperReaderCache int64

	// RecoveryTimeout bounds opening the storage at start-up: the metadata
	// and object stores, the WAL's recovery of unsettled runs and the core
	// (default 2m). A node with a long unsettled WAL tail may need more.
	RecoveryTimeout time.Duration
	// KafkaMaxRequestBytes is the largest Kafka request a connection may
	// send (Kafka's socket.request.max.bytes; default 100 MiB).
	KafkaMaxRequestBytes int64
	// KafkaAutoCreateTopics creates unknown topics a client's Metadata
	// request asks for (Kafka's auto.create.topics.enable; default true);
	// KafkaNumPartitions is their partition count and that of CreateTopics
	// with -1 (num.partitions; default 1).
	KafkaAutoCreateTopics bool
	KafkaNumPartitions    int64
	// KafkaGroupMinSessionTimeout and KafkaGroupMaxSessionTimeout bound a
	// consumer's session.timeout.ms (group.min/max.session.timeout.ms;
	// defaults 6s, 30m).
	KafkaGroupMinSessionTimeout, KafkaGroupMaxSessionTimeout time.Duration
	// KafkaTransactionMaxTimeout bounds a transactional producer's
	// transaction.timeout.ms (transaction.max.timeout.ms; default 15m).
	KafkaTransactionMaxTimeout time.Duration
	// KafkaConsumerSessionTimeout and KafkaConsumerHeartbeatInterval apply
	// to KIP-848 consumer groups (group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms; defaults 45s, 5s).
	KafkaConsumerSessionTimeout, KafkaConsumerHeartbeatInterval time.Duration

	// MetricsStreamLimit is how many streams /metrics exports per-stream
	// gauges for, in name order (default 1000; 0 disables them).
	MetricsStreamLimit int64
}

// DefaultTuning returns the defaults, equal to the packages' own.
func DefaultTuning() Tuning {
	return Tuning{
		SessionTTL:                     30 * time.Second,
		RetentionInterval:              time.Second,
		TailCacheBytes:                 64 << 20,
		MaxPendingRuns:                 256,
		ObjectWALUploadConcurrency:     4,
		ObjectWALMaxInFlightBytes:      256 << 20,
		ObjectWALCacheBytes:            64 << 20,
		ObjectWALFlushMode:             flushModeAuto,
		ObjectWALFlushBytes:            8 << 20,
		ObjectWALGroupMinWait:          objectwal.DefaultGroupCommitMinWait,
		ObjectWALGroupMinBytes:         objectwal.DefaultGroupCommitMinBytes,
		ObjectWALTruncateInterval:      100 * time.Millisecond,
		BookKeeperEnsembleSize:         3,
		BookKeeperWriteQuorum:          2,
		BookKeeperAckQuorum:            2,
		BookKeeperMaxLedgerEntries:     100000,
		BookKeeperMaxLedgerBytes:       512 << 20,
		BookKeeperMaxLedgerAge:         time.Hour,
		BookKeeperLedgerIdleSeal:       30 * time.Second,
		BookKeeperRetentionRollRate:    100,
		BookKeeperMinRollAge:           time.Second,
		BookKeeperAddTimeout:           5 * time.Second,
		BookKeeperRequestTimeout:       5 * time.Second,
		BookKeeperOpTimeout:            60 * time.Second,
		BookKeeperMaxFrameSize:         proto.DefaultMaxFrameSize,
		BookKeeperReaderCache:          256,
		RecoveryTimeout:                2 * time.Minute,
		KafkaMaxRequestBytes:           100 << 20,
		KafkaAutoCreateTopics:          true,
		KafkaNumPartitions:             1,
		KafkaGroupMinSessionTimeout:    6 * time.Second,
		KafkaGroupMaxSessionTimeout:    30 * time.Minute,
		KafkaTransactionMaxTimeout:     15 * time.Minute,
		KafkaConsumerSessionTimeout:    45 * time.Second,
		KafkaConsumerHeartbeatInterval: 5 * time.Second,
		MetricsStreamLimit:             1000,
	}
}

// validate checks ranges and relations, naming both values.
func (t Tuning) validate() []error {
	var errs []error
	pos := func(name string, v int64) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s %d must be positive", name, v))
		}
	}
	posd := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", name, d))
		}
	}
	posd("session-ttl", t.SessionTTL)
	posd("retention-interval", t.RetentionInterval)
	pos("tail-cache-bytes", t.TailCacheBytes)
	pos("max-pending-runs", t.MaxPendingRuns)
	pos("object-wal-upload-concurrency", t.ObjectWALUploadConcurrency)
	pos("object-wal-max-inflight-bytes", t.ObjectWALMaxInFlightBytes)
	pos("object-wal-cache-bytes", t.ObjectWALCacheBytes)
	posd("object-wal-truncate-interval", t.ObjectWALTruncateInterval)
	switch t.ObjectWALFlushMode {
	case flushModeAuto, flushModeGroup, flushModeInterval:
	default:
		errs = append(errs, fmt.Errorf("object-wal-flush-mode %q: want %s, %s or %s", t.ObjectWALFlushMode, flushModeAuto, flushModeGroup, flushModeInterval))
	}
	if t.ObjectWALFlushInterval < 0 {
		errs = append(errs, fmt.Errorf("object-wal-flush-interval %v must not be negative", t.ObjectWALFlushInterval))
	}
	pos("object-wal-flush-bytes", t.ObjectWALFlushBytes)
	if t.ObjectWALGroupMinWait < 0 {
		errs = append(errs, fmt.Errorf("object-wal-group-min-wait %v must not be negative", t.ObjectWALGroupMinWait))
	}
	if t.ObjectWALGroupMinBytes < 0 || t.ObjectWALGroupMinBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("object-wal-group-min-bytes %d: want 0 to %d", t.ObjectWALGroupMinBytes, math.MaxInt32))
	}
	if t.ObjectWALFlushBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("object-wal-flush-bytes %d is too large", t.ObjectWALFlushBytes))
	}
	pos("bookkeeper-ack-quorum", t.BookKeeperAckQuorum)
	if t.BookKeeperWriteQuorum < t.BookKeeperAckQuorum {
		errs = append(errs, fmt.Errorf("bookkeeper-write-quorum %d must be >= bookkeeper-ack-quorum %d",
			t.BookKeeperWriteQuorum, t.BookKeeperAckQuorum))
	}
	if t.BookKeeperEnsembleSize < t.BookKeeperWriteQuorum {
		errs = append(errs, fmt.Errorf("bookkeeper-ensemble-size %d must be >= bookkeeper-write-quorum %d",
			t.BookKeeperEnsembleSize, t.BookKeeperWriteQuorum))
	}
	pos("bookkeeper-max-ledger-entries", t.BookKeeperMaxLedgerEntries)
	pos("bookkeeper-max-ledger-bytes", t.BookKeeperMaxLedgerBytes)
	posd("bookkeeper-max-ledger-age", t.BookKeeperMaxLedgerAge)
	posd("bookkeeper-ledger-idle-seal", t.BookKeeperLedgerIdleSeal)
	pos("bookkeeper-retention-roll-rate", t.BookKeeperRetentionRollRate)
	posd("bookkeeper-min-roll-age", t.BookKeeperMinRollAge)
	posd("bookkeeper-add-timeout", t.BookKeeperAddTimeout)
	posd("bookkeeper-request-timeout", t.BookKeeperRequestTimeout)
	posd("bookkeeper-op-timeout", t.BookKeeperOpTimeout)
	pos("bookkeeper-max-frame-size", t.BookKeeperMaxFrameSize)
	if t.BookKeeperMaxFrameSize > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("bookkeeper-max-frame-size %d is too large", t.BookKeeperMaxFrameSize))
	}
	pos("bookkeeper-reader-cache", t.BookKeeperReaderCache)
	posd("recovery-timeout", t.RecoveryTimeout)
	pos("kafka-max-request-bytes", t.KafkaMaxRequestBytes)
	if t.KafkaMaxRequestBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("kafka-max-request-bytes %d must be at most %d (a Kafka request size is an int32)", t.KafkaMaxRequestBytes, math.MaxInt32))
	}
	pos("kafka-num-partitions", t.KafkaNumPartitions)
	if t.KafkaNumPartitions > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("kafka-num-partitions %d is too large", t.KafkaNumPartitions))
	}
	posd("kafka-group-min-session-timeout", t.KafkaGroupMinSessionTimeout)
	if t.KafkaGroupMaxSessionTimeout < t.KafkaGroupMinSessionTimeout {
		errs = append(errs, fmt.Errorf("kafka-group-max-session-timeout %v must be >= kafka-group-min-session-timeout %v",
			t.KafkaGroupMaxSessionTimeout, t.KafkaGroupMinSessionTimeout))
	}
	posd("kafka-transaction-max-timeout", t.KafkaTransactionMaxTimeout)
	posd("kafka-consumer-session-timeout", t.KafkaConsumerSessionTimeout)
	posd("kafka-consumer-heartbeat-interval", t.KafkaConsumerHeartbeatInterval)
	if t.KafkaConsumerHeartbeatInterval >= t.KafkaConsumerSessionTimeout {
		errs = append(errs, fmt.Errorf("kafka-consumer-heartbeat-interval %v must be below kafka-consumer-session-timeout %v",
			t.KafkaConsumerHeartbeatInterval, t.KafkaConsumerSessionTimeout))
	}
	if t.MetricsStreamLimit < 0 {
		errs = append(errs, fmt.Errorf("metrics-stream-limit %d must be >= 0", t.MetricsStreamLimit))
	}
	return errs
}

// coreConfig, objectWALConfig and bookKeeperConfig carry the tuning into
// the packages' configs (the caller fills in the rest).
func (t Tuning) coreConfig(c stream.Config) stream.Config {
	c.SessionTTL, c.RetentionInterval = t.SessionTTL, t.RetentionInterval
	c.TailCacheBytes, c.MaxPendingRuns = t.TailCacheBytes, int(t.MaxPendingRuns)
	return c
}

// Object WAL flush modes (--object-wal-flush-mode).
const (
	flushModeAuto     = "auto"
	flushModeGroup    = "group"
	flushModeInterval = "interval"
)

// Flush defaults by object store kind (Tuning.ObjectWALFlushMode "auto").
const (
	fileFlushInterval = 5 * time.Millisecond   // the longest wait behind a slow upload
	s3FlushInterval   = 200 * time.Millisecond // ≈ 5 segment + 5 manifest PUTs/s while busy
)

// objectWALConfig carries the tuning into c for an object store of kind
// objectStoreKind (ObjectStoreFile or objectStoreS3), which chooses the
// flush policy when it is "auto".
func (t Tuning) objectWALConfig(c objectwal.Config, objectStoreKind string) objectwal.Config {
	s3 := objectStoreKind == objectStoreS3
	mode := t.ObjectWALFlushMode
	if mode == flushModeAuto || mode == "" {
		mode = flushModeGroup
		if s3 {
			mode = flushModeInterval
		}
	}
	c.FlushMode = objectwal.FlushGroupCommit
	if mode == flushModeInterval {
		c.FlushMode = objectwal.FlushOnInterval
	}
	c.FlushInterval = t.ObjectWALFlushInterval
	if c.FlushInterval == 0 {
		c.FlushInterval = fileFlushInterval
		if s3 {
			c.FlushInterval = s3FlushInterval
		}
	}
	c.FlushBytes = int(t.ObjectWALFlushBytes)
	// objectwal reads zero as "its default" and a negative value as "off".
	c.GroupCommitMinWait, c.GroupCommitMinBytes = t.ObjectWALGroupMinWait, int(t.ObjectWALGroupMinBytes)
	if c.GroupCommitMinWait == 0 {
		c.GroupCommitMinWait = -1
	}
	if c.GroupCommitMinBytes == 0 {
		c.GroupCommitMinBytes = -1
	}
	c.UploadConcurrency = int(t.ObjectWALUploadConcurrency)
	c.MaxInFlightBytes = int(t.ObjectWALMaxInFlightBytes)
	c.CacheBytes = t.ObjectWALCacheBytes
	c.TruncateInterval = t.ObjectWALTruncateInterval
	return c
}

func (t Tuning) bookKeeperConfig(c bkwal.Config) bkwal.Config {
	c.EnsembleSize, c.WriteQuorum, c.AckQuorum = int(t.BookKeeperEnsembleSize), int(t.BookKeeperWriteQuorum), int(t.BookKeeperAckQuorum)
	c.MaxLedgerEntries, c.MaxLedgerBytes, c.MaxLedgerAge = t.BookKeeperMaxLedgerEntries, t.BookKeeperMaxLedgerBytes, t.BookKeeperMaxLedgerAge
	c.IdleSeal = t.BookKeeperLedgerIdleSeal
	c.MaxRetentionRolls = float64(t.BookKeeperRetentionRollRate)
	c.MinRollAge = t.BookKeeperMinRollAge
	c.OpTimeout, c.ReaderCache = t.BookKeeperOpTimeout, int(t.BookKeeperReaderCache)
	return c
}

func (t Tuning) bookKeeperClientConfig(c bookkeeper.Config) bookkeeper.Config {
	c.AddTimeout, c.RequestTimeout, c.MaxFrameSize = t.BookKeeperAddTimeout, t.BookKeeperRequestTimeout, int(t.BookKeeperMaxFrameSize)
	return c
}

// parseBytes accepts a plain integer or one with a binary suffix
// (KiB, MiB, GiB; also K, M, G meaning the same).
func parseBytes(v string) (int64, error) {
	s := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("want a byte count such as 67108864, 64MiB or 1GiB")
	}
	return n * mult, nil
}

// formatBytes is parseBytes' inverse for the shown defaults.
func formatBytes(n int64) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n != 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n != 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10)
}

func durSetting(key, usage string, p func(*Config) *time.Duration) setting {
	return setting{key: key, usage: usage,
		get: func(c *Config) string { return p(c).String() },
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return err
			}
			*p(c) = d
			return nil
		}}
}

func intSetting(key, usage string, p func(*Config) *int64) setting {
	return setting{key: key, usage: usage,
		get: func(c *Config) string { return strconv.FormatInt(*p(c), 10) },
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return errors.New("want an integer")
			}
			*p(c) = n
			return nil
		}}
}

func strSetting(key, usage string, p func(*Config) *string) setting {
	return setting{key: key, usage: usage,
		get: func(c *Config) string { return *p(c) },
		set: func(c *Config, v string) error { *p(c) = strings.TrimSpace(v); return nil }}
}

func boolSetting(key, usage string, p func(*Config) *bool) setting {
	return setting{key: key, usage: usage, boolean: true,
		get: func(c *Config) string { return strconv.FormatBool(*p(c)) },
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("want true or false")
			}
			*p(c) = b
			return nil
		}}
}

func bytesSetting(key, usage string, p func(*Config) *int64) setting {
	return setting{key: key, usage: usage,
		get: func(c *Config) string { return formatBytes(*p(c)) },
		set: func(c *Config, v string) error {
			n, err := parseBytes(v)
			if err != nil {
				return err
			}
			*p(c) = n
			return nil
		}}
}

var tuningSettings = []setting{
	durSetting("session-ttl", "append session lifetime without renewal (how long a crashed node's streams wait before takeover)", func(c *Config) *time.Duration { return &c.SessionTTL }),
	durSetting("retention-interval", "how often stream retention is enforced", func(c *Config) *time.Duration { return &c.RetentionInterval }),
	bytesSetting("tail-cache-bytes", "cache of recently committed entries for tailing readers", func(c *Config) *int64 { return &c.TailCacheBytes }),
	intSetting("max-pending-runs", "runs per stream written to a WAL but not yet committed before appends wait", func(c *Config) *int64 { return &c.MaxPendingRuns }),
	intSetting("object-wal-upload-concurrency", "parallel Object WAL segment uploads", func(c *Config) *int64 { return &c.ObjectWALUploadConcurrency }),
	bytesSetting("object-wal-max-inflight-bytes", "Object WAL bytes written but not yet durable before appends wait", func(c *Config) *int64 { return &c.ObjectWALMaxInFlightBytes }),
	bytesSetting("object-wal-cache-bytes", "Object WAL decoded-run read cache", func(c *Config) *int64 { return &c.ObjectWALCacheBytes }),
	strSetting("object-wal-flush-mode", "when an Object WAL segment is sealed: group (group commit: as soon as the previous upload finished), interval (every object-wal-flush-interval), auto (group on the filesystem, interval on S3)", func(c *Config) *string { return &c.ObjectWALFlushMode }),
	{key: "object-wal-flush-interval", usage: "longest an Object WAL run waits before its segment is sealed (auto: 5ms on the filesystem, only behind a slow upload; 200ms on S3, about 5 segment + 5 manifest PUTs/s while busy)",
		get: func(c *Config) string {
			if c.ObjectWALFlushInterval == 0 {
				return flushModeAuto
			}
			return c.ObjectWALFlushInterval.String()
		},
		set: func(c *Config, v string) error {
			if strings.TrimSpace(v) == flushModeAuto {
				c.ObjectWALFlushInterval = 0
				return nil
			}
			d, err := time.ParseDuration(v)
			if err != nil {
				return err
			}
			if d <= 0 {
				return errors.New("want a positive duration or auto")
			}
			c.ObjectWALFlushInterval = d
			return nil
		}},
	bytesSetting("object-wal-flush-bytes", "buffered Object WAL bytes that seal a segment early", func(c *Config) *int64 { return &c.ObjectWALFlushBytes }),
	durSetting("object-wal-group-min-wait", "flush mode group: runs written while earlier ones are on their way are sealed no sooner than this after the previous seal (0: seal at every upload's end; a run written to an idle log is sealed at once)", func(c *Config) *time.Duration { return &c.ObjectWALGroupMinWait }),
	bytesSetting("object-wal-group-min-bytes", "flush mode group: such runs are sealed early once they add up to this many bytes (0: no size trigger)", func(c *Config) *int64 { return &c.ObjectWALGroupMinBytes }),
	durSetting("object-wal-truncate-interval", "how often settled Object WAL manifest entries are dropped", func(c *Config) *time.Duration { return &c.ObjectWALTruncateInterval }),
	intSetting("bookkeeper-ensemble-size", "bookies per new ledger (E)", func(c *Config) *int64 { return &c.BookKeeperEnsembleSize }),
	intSetting("bookkeeper-write-quorum", "copies of each entry (WQ <= E)", func(c *Config) *int64 { return &c.BookKeeperWriteQuorum }),
	intSetting("bookkeeper-ack-quorum", "bookie acks before an entry is durable (AQ <= WQ)", func(c *Config) *int64 { return &c.BookKeeperAckQuorum }),
	intSetting("bookkeeper-max-ledger-entries", "entries before a stream rolls over to a new ledger", func(c *Config) *int64 { return &c.BookKeeperMaxLedgerEntries }),
	bytesSetting("bookkeeper-max-ledger-bytes", "bytes before a stream rolls over to a new ledger", func(c *Config) *int64 { return &c.BookKeeperMaxLedgerBytes }),
	durSetting("bookkeeper-max-ledger-age", "age before a stream rolls over to a new ledger", func(c *Config) *time.Duration { return &c.BookKeeperMaxLedgerAge }),
	durSetting("bookkeeper-ledger-idle-seal", "idle time after which GC seals a stream's ledger whose contents are all trimmed or materialized (so it can be reclaimed)", func(c *Config) *time.Duration { return &c.BookKeeperLedgerIdleSeal }),
	intSetting("bookkeeper-retention-roll-rate", "ledger rollovers per second, across the node's streams, done for retention's sake (a busy stream's ledger older than half its retention, or whose first run is retired); more wait for a later run", func(c *Config) *int64 { return &c.BookKeeperRetentionRollRate }),
	durSetting("bookkeeper-min-roll-age", "age a stream's current ledger must reach before it rolls over, or is sealed idle, for retention's sake (bounds one busy stream's ledger creates)", func(c *Config) *time.Duration { return &c.BookKeeperMinRollAge }),
	durSetting("bookkeeper-add-timeout", "bound on an add reaching its ack quorum, resends included (BookKeeper's addEntryTimeoutSec)", func(c *Config) *time.Duration { return &c.BookKeeperAddTimeout }),
	durSetting("bookkeeper-request-timeout", "bound on one request to one bookie", func(c *Config) *time.Duration { return &c.BookKeeperRequestTimeout }),
	durSetting("bookkeeper-op-timeout", "bound on one ledger lifecycle step (allocate, create, seal, recover)", func(c *Config) *time.Duration { return &c.BookKeeperOpTimeout }),
	bytesSetting("bookkeeper-max-frame-size", "largest frame to or from a bookie (must not exceed the bookies' nettyMaxFrameSizeBytes)", func(c *Config) *int64 { return &c.BookKeeperMaxFrameSize }),
	intSetting("bookkeeper-reader-cache", "ledgers kept open for reads", func(c *Config) *int64 { return &c.BookKeeperReaderCache }),
	durSetting("recovery-timeout", "bound on opening the storage at start-up (stores, WAL recovery, core)", func(c *Config) *time.Duration { return &c.RecoveryTimeout }),
	bytesSetting("kafka-max-request-bytes", "largest Kafka request a connection may send (Kafka's socket.request.max.bytes)", func(c *Config) *int64 { return &c.KafkaMaxRequestBytes }),
	boolSetting("kafka-auto-create-topics", "create unknown topics clients ask for in Metadata (Kafka's auto.create.topics.enable)", func(c *Config) *bool { return &c.KafkaAutoCreateTopics }),
	intSetting("kafka-num-partitions", "partitions of auto-created topics and of CreateTopics with -1 (Kafka's num.partitions)", func(c *Config) *int64 { return &c.KafkaNumPartitions }),
	durSetting("kafka-group-min-session-timeout", "smallest consumer session.timeout.ms accepted (Kafka's group.min.session.timeout.ms)", func(c *Config) *time.Duration { return &c.KafkaGroupMinSessionTimeout }),
	durSetting("kafka-group-max-session-timeout", "largest consumer session.timeout.ms accepted (Kafka's group.max.session.timeout.ms)", func(c *Config) *time.Duration { return &c.KafkaGroupMaxSessionTimeout }),
	durSetting("kafka-transaction-max-timeout", "largest transaction.timeout.ms a transactional producer may ask for (Kafka's transaction.max.timeout.ms)", func(c *Config) *time.Duration { return &c.KafkaTransactionMaxTimeout }),
	durSetting("kafka-consumer-session-timeout", "session timeout of KIP-848 consumer group members (Kafka's group.consumer.session.timeout.ms)", func(c *Config) *time.Duration { return &c.KafkaConsumerSessionTimeout }),
	durSetting("kafka-consumer-heartbeat-interval", "heartbeat interval told to KIP-848 consumer group members (Kafka's group.consumer.heartbeat.interval.ms)", func(c *Config) *time.Duration { return &c.KafkaConsumerHeartbeatInterval }),
	intSetting("metrics-stream-limit", "streams /metrics exports per-stream gauges for (0 disables)", func(c *Config) *int64 { return &c.MetricsStreamLimit }),
}

func init() { settings = append(settings, tuningSettings...) }
