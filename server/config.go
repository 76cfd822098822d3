package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/nereusstream/nereus-go/listener"
)

// Config is everything `nereus serve` is configured with. Zero values are
// not defaults: start from DefaultConfig (LoadConfig does).
type Config struct {
	// DataDir holds everything durable (default "./nereus-data").
	DataDir string
	// HTTPAddr is the admin HTTP listen address: /healthz, /metrics, the
	// REST API and front-end HTTP mounts (default "127.0.0.1:8080").
	HTTPAddr string
	// KafkaAddr is the Kafka listener address (default "127.0.0.1:9092");
	// empty disables the Kafka front end.
	KafkaAddr string
	// KafkaAdvertisedAddr is the host:port Kafka clients are told to dial
	// (Metadata, FindCoordinator). Default: the bound Kafka listener
	// address.
	KafkaAdvertisedAddr string
	// PulsarAdvertisedAddr is the host:port Pulsar lookups hand to clients
	// (default: the bound Pulsar listener address).
	PulsarAdvertisedAddr string
	// HTTPAdvertisedAddr is the host:port of the admin HTTP API that HTTP
	// lookups hand to clients (default: the bound HTTP address).
	HTTPAdvertisedAddr string
	// PulsarAddr is the Pulsar binary-protocol listener address (default
	// "127.0.0.1:6650"); empty disables the Pulsar front end.
	PulsarAddr string

	// KafkaListeners, when set, replaces KafkaAddr with several listeners:
	// "NAME://HOST:PORT[,...]" as Kafka's `listeners` (NAME a security
	// protocol PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, or a name mapped
	// by KafkaListenerSecurityProtocolMap). KafkaAdvertisedListeners is
	// Kafka's `advertised.listeners` for them (default: each listener's
	// bound address, or for a wildcard bind the address the client
	// reached).
	KafkaListeners                   string
	KafkaAdvertisedListeners         string
	KafkaListenerSecurityProtocolMap string
	// PulsarListeners, when set, replaces PulsarAddr:
	// "[NAME:]pulsar://HOST:PORT" and "[NAME:]pulsar+ssl://HOST:PORT"
	// entries (NAME default "internal"; a name groups one plaintext and one
	// TLS listener, as Pulsar's advertisedListeners). Lookups answer with
	// the URLs of the group the client connected to, or the one it names.
	PulsarListeners           string
	PulsarAdvertisedListeners string
	// HTTPListeners, when set, replaces HTTPAddr: "[NAME:]http://HOST:PORT"
	// and "[NAME:]https://HOST:PORT" entries, each serving the admin API,
	// /healthz, /metrics and Pulsar's HTTP lookup and admin paths.
	HTTPListeners           string
	HTTPAdvertisedListeners string

	// TLSCertFile and TLSKeyFile are the PEM certificate (with any
	// intermediates) and private key of every TLS listener; TLSCAFile the
	// CA bundle client certificates are verified against. They are
	// re-read on SIGHUP and when they change (checked every
	// TLSReloadInterval, default 30s; 0 disables the check).
	TLSCertFile, TLSKeyFile, TLSCAFile string
	// TLSClientAuth is none (default), requested or required (Kafka's
	// ssl.client.auth): whether TLS clients must present a certificate the
	// CA verifies.
	TLSClientAuth     string
	TLSReloadInterval time.Duration
	// BookKeeperZK is the ZooKeeper connect string of the BookKeeper cluster
	// that backs the BOOKKEEPER_* profiles; empty disables them.
	BookKeeperZK string
	// BookKeeperRoot is the ledger root path in ZooKeeper (default
	// "/ledgers").
	BookKeeperRoot string
	// LogFormat is "text" (default) or "json".
	LogFormat string
	// LogLevel is "debug", "info" (default), "warn" or "error".
	LogLevel string
	// ShutdownTimeout bounds the graceful drain after SIGTERM/SIGINT
	// (default 30s). When it expires, remaining connections are closed and
	// storage is closed anyway.
	ShutdownTimeout time.Duration
	// ObjectStore selects the object store holding the Object WAL:
	// "file" (default) is the filesystem store in <data-dir>/objects;
	// "s3://BUCKET[/PREFIX]" is S3 or an S3-compatible server (see the S3*
	// fields). The bucket must exist.
	ObjectStore string
	// WALObjectStore says where the filesystem object store keeps the
	// Object WAL's segments and manifests (the keys under "wal/"):
	// WALObjectStoreLog (default) appends them to the log-structured
	// store in <data-dir>/walstore (one fdatasync per WAL commit);
	// WALObjectStoreFiles keeps them as files in <data-dir>/objects like
	// every other object. Each start moves what the other one holds, so
	// switching (and running an older release after "files") keeps every
	// object. Ignored on S3.
	WALObjectStore string
	// S3Endpoint is the S3 endpoint URL (e.g. "http://127.0.0.1:7070" for
	// an S3-compatible server); empty means AWS.
	S3Endpoint string
	// S3Region is the signing region (default "us-east-1").
	S3Region string
	// S3PathStyle addresses buckets as ENDPOINT/BUCKET/KEY rather than
	// BUCKET.ENDPOINT/KEY; most S3-compatible servers need it.
	S3PathStyle bool
	// S3AccessKey and S3SecretKey are static credentials; both empty (the
	// default) means the AWS default credential chain (AWS_* environment
	// variables, shared config files, instance roles).
	S3AccessKey string
	S3SecretKey Secret
	// Metadata selects the metadata store (the commit authority): "auto"
	// (default) is an embedded store — the one the data dir already runs
	// on, bolt for a data dir with metadata.db from before, log for a new
	// data dir; "bolt" is the embedded bbolt store in <data-dir>/metadata.db;
	// "log" is the embedded log-structured store (metadata/logstore) in
	// <data-dir>/metadata.log/;
	// "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]" is an etcd v3 cluster, all
	// keys under PREFIX (default "/nereus/").
	Metadata string
	// BackendTimeout bounds how long start-up waits for each external
	// store to answer (the S3 bucket check, the first etcd read) before
	// failing (default 15s).
	BackendTimeout time.Duration
	// AddrFile, when set, is written (atomically, JSON) with the bound
	// listener addresses once the server serves. Tests use it with ":0"
	// addresses.
	AddrFile string

	// Rack is this node's rack or availability zone (Kafka's broker.rack):
	// Kafka consumers that send the same client.rack fetch from a broker of
	// their own rack (KIP-392). Empty: none.
	Rack string
	// KafkaBrokerID is this node's Kafka broker id. 0 (the default) lets
	// the cluster allocate the next free one on first start; either way it
	// is then kept in <data-dir>/kafka-broker-id and never changes.
	KafkaBrokerID int32
	// ClusterSessionTTL is how long a node that stops answering (crash,
	// partition from the metadata store) stays in the cluster before its
	// streams are taken over (default 4s; etcd's minimum lease is ~2s).
	ClusterSessionTTL time.Duration
	// ClusterWeight scales this node's share of stream ownership (default
	// 1; a node with weight 2 owns about twice as many streams).
	ClusterWeight uint32
	// Tuning holds the operational constants (tuning.go).
	Tuning
	// Security is authentication and authorization (security.go).
	Security
	// Lifecycle holds the materialization, retention-protection and GC
	// settings (lifecycle_settings.go).
	Lifecycle LifecycleSettings
	// Pulsar holds the Pulsar broker's policies (pulsar_settings.go).
	Pulsar PulsarSettings
}

// DefaultConfig returns the embedded defaults: no external service, data in
// ./nereus-data, loopback listeners.
func DefaultConfig() Config {
	return Config{
		DataDir:         "./nereus-data",
		HTTPAddr:        "127.0.0.1:8080",
		KafkaAddr:       "127.0.0.1:9092",
		PulsarAddr:      "127.0.0.1:6650",
		BookKeeperRoot:  "/ledgers",
		LogFormat:       "text",
		LogLevel:        "info",
		ShutdownTimeout: 30 * time.Second,
		ObjectStore:     ObjectStoreFile,
		WALObjectStore:  WALObjectStoreLog,
		S3Region:        "us-east-1",
		Metadata:        MetadataAuto,
		BackendTimeout:  15 * time.Second,

		ClusterSessionTTL: 4 * time.Second,
		ClusterWeight:     1,
		Tuning:            DefaultTuning(),
		Security:          defaultSecurity(),
		Lifecycle:         DefaultLifecycleSettings(),
		Pulsar:            DefaultPulsarSettings(),

		TLSClientAuth:     string(listener.ClientAuthNone),
		TLSReloadInterval: defaultTLSReloadInterval,
	}
}

// Secret is a credential. It formats and encodes as "[redacted]" (fmt,
// %#v, slog, JSON and text encoders alike), so printing or logging a Config
// never leaks it; string(s) is the value.
type Secret string

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText keeps encoders (JSON logs, YAML dumps) from writing the
// value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Validate checks every field and names the offending setting.
func (c Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir must not be empty"))
	}
	for _, a := range []struct{ key, val string }{{"http-addr", c.HTTPAddr}, {"kafka-addr", c.KafkaAddr}, {"pulsar-addr", c.PulsarAddr}} {
		if a.val == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.val); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want host:port: %v", a.key, a.val, err))
		}
	}
	if c.BookKeeperZK != "" && !strings.HasPrefix(c.BookKeeperRoot, "/") {
		errs = append(errs, fmt.Errorf("bookkeeper-root %q must be an absolute ZooKeeper path", c.BookKeeperRoot))
	}
	if _, err := parseLogLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log-format %q: want text or json", c.LogFormat))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown-timeout %v must be positive", c.ShutdownTimeout))
	}
	if c.BackendTimeout <= 0 {
		errs = append(errs, fmt.Errorf("backend-timeout %v must be positive", c.BackendTimeout))
	}
	if c.ClusterSessionTTL < time.Second {
		errs = append(errs, fmt.Errorf("cluster-session-ttl %v must be at least 1s", c.ClusterSessionTTL))
	}
	if c.ClusterWeight < 1 || c.ClusterWeight > 1000 {
		errs = append(errs, fmt.Errorf("cluster-weight %d: want 1..1000", c.ClusterWeight))
	}
	if c.KafkaBrokerID < 0 {
		errs = append(errs, fmt.Errorf("kafka-broker-id %d must not be negative", c.KafkaBrokerID))
	}
	errs = append(errs, c.validateListeners()...)
	errs = append(errs, c.validateBackends()...)
	errs = append(errs, c.Tuning.validate()...)
	errs = append(errs, c.Pulsar.validate()...)
	errs = append(errs, c.Security.validate()...)
	errs = append(errs, c.Lifecycle.validate()...)
	return errors.Join(errs...)
}

// setting is one configurable key. Its flag name is its config-file key,
// and its environment variable is NEREUS_ + the key upper-cased with '-'
// as '_'. Adding a setting here adds the flag, the env var and the file key.
type setting struct {
	key    string
	usage  string
	hidden bool
	// boolean settings are flags that need no value (--s3-path-style);
	// their env and file values parse with strconv.ParseBool.
	boolean bool
	get     func(*Config) string
	set     func(*Config, string) error
}

func str(p func(*Config) *string) (func(*Config) string, func(*Config, string) error) {
	return func(c *Config) string { return *p(c) }, func(c *Config, v string) error { *p(c) = v; return nil }
}

func mk(key, usage string, p func(*Config) *string) setting {
	g, s := str(p)
	return setting{key: key, usage: usage, get: g, set: s}
}

var settings = []setting{
	mk("data-dir", "directory for durable data", func(c *Config) *string { return &c.DataDir }),
	mk("http-addr", "admin HTTP address (/healthz, /metrics, REST API)", func(c *Config) *string { return &c.HTTPAddr }),
	mk("kafka-addr", "Kafka listener address (empty disables)", func(c *Config) *string { return &c.KafkaAddr }),
	mk("kafka-advertised-addr", "host:port Kafka clients are told to connect to (default: the Kafka listener address)", func(c *Config) *string { return &c.KafkaAdvertisedAddr }),
	mk("pulsar-addr", "Pulsar listener address (empty disables)", func(c *Config) *string { return &c.PulsarAddr }),
	mk("pulsar-advertised-addr", "host:port Pulsar lookups tell clients to connect to (default: the Pulsar listener address)", func(c *Config) *string { return &c.PulsarAdvertisedAddr }),
	mk("http-advertised-addr", "host:port of the admin HTTP API handed out by HTTP lookups (default: the bound HTTP address)", func(c *Config) *string { return &c.HTTPAdvertisedAddr }),
	mk("kafka-listeners", "Kafka listeners NAME://HOST:PORT[,...] (NAME: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL or a mapped name); replaces kafka-addr", func(c *Config) *string { return &c.KafkaListeners }),
	mk("kafka-advertised-listeners", "Kafka advertised.listeners NAME://HOST:PORT[,...] (default: each listener's address)", func(c *Config) *string { return &c.KafkaAdvertisedListeners }),
	mk("kafka-listener-security-protocol-map", "Kafka listener.security.protocol.map NAME:PROTOCOL[,...] for custom listener names", func(c *Config) *string { return &c.KafkaListenerSecurityProtocolMap }),
	mk("pulsar-listeners", "Pulsar listeners [NAME:]pulsar://HOST:PORT,[NAME:]pulsar+ssl://HOST:PORT (NAME default internal); replaces pulsar-addr", func(c *Config) *string { return &c.PulsarListeners }),
	mk("pulsar-advertised-listeners", "Pulsar advertised listeners, same syntax, matched by name and scheme", func(c *Config) *string { return &c.PulsarAdvertisedListeners }),
	mk("http-listeners", "admin HTTP listeners [NAME:]http://HOST:PORT,[NAME:]https://HOST:PORT; replaces http-addr", func(c *Config) *string { return &c.HTTPListeners }),
	mk("http-advertised-listeners", "admin HTTP advertised listeners, same syntax (handed out by Pulsar HTTP lookups)", func(c *Config) *string { return &c.HTTPAdvertisedListeners }),
	mk("tls-cert-file", "PEM certificate (and intermediates) of every TLS listener; reloaded on SIGHUP and on change", func(c *Config) *string { return &c.TLSCertFile }),
	mk("tls-key-file", "PEM private key of tls-cert-file", func(c *Config) *string { return &c.TLSKeyFile }),
	mk("tls-ca-file", "PEM CA bundle client certificates are verified against", func(c *Config) *string { return &c.TLSCAFile }),
	mk("tls-client-auth", "TLS client certificates: none, requested or required (verified against tls-ca-file)", func(c *Config) *string { return &c.TLSClientAuth }),
	durationSetting("tls-reload-interval", "how often the TLS files and the token key file are checked for changes (0: only on SIGHUP)", func(c *Config) *time.Duration { return &c.TLSReloadInterval }),
	mk("bookkeeper-zk", "ZooKeeper connect string of the BookKeeper cluster (empty disables BookKeeper profiles)", func(c *Config) *string { return &c.BookKeeperZK }),
	mk("bookkeeper-root", "BookKeeper ledger root path in ZooKeeper", func(c *Config) *string { return &c.BookKeeperRoot }),
	mk("log-format", "log format: text or json", func(c *Config) *string { return &c.LogFormat }),
	mk("log-level", "log level: debug, info, warn or error", func(c *Config) *string { return &c.LogLevel }),
	{
		key:   "shutdown-timeout",
		usage: "bound on the graceful drain after SIGTERM/SIGINT",
		get:   func(c *Config) string { return c.ShutdownTimeout.String() },
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return err
			}
			c.ShutdownTimeout = d
			return nil
		},
	},
	mk("object-store", "object store: file (<data-dir>/objects) or s3://BUCKET[/PREFIX]", func(c *Config) *string { return &c.ObjectStore }),
	mk("wal-object-store", "where the filesystem object store keeps the Object WAL's objects: log (<data-dir>/walstore, one fdatasync per commit) or files (<data-dir>/objects); each start moves what the other holds; ignored on S3", func(c *Config) *string { return &c.WALObjectStore }),
	mk("s3-endpoint", "S3 endpoint URL, e.g. http://127.0.0.1:7070 (empty: AWS)", func(c *Config) *string { return &c.S3Endpoint }),
	mk("s3-region", "S3 signing region", func(c *Config) *string { return &c.S3Region }),
	{
		key:     "s3-path-style",
		usage:   "address S3 buckets path-style (ENDPOINT/BUCKET/KEY; most S3-compatible servers need it)",
		boolean: true,
		get:     func(c *Config) string { return strconv.FormatBool(c.S3PathStyle) },
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false")
			}
			c.S3PathStyle = b
			return nil
		},
	},
	mk("s3-access-key", "S3 access key ID (empty: the AWS default credential chain)", func(c *Config) *string { return &c.S3AccessKey }),
	{
		key:   "s3-secret-key",
		usage: "S3 secret access key (prefer the env var or the AWS credential chain: flags show in ps)",
		get:   func(c *Config) string { return string(c.S3SecretKey) },
		set:   func(c *Config, v string) error { c.S3SecretKey = Secret(v); return nil },
	},
	mk("metadata", "metadata store: auto (the embedded store the data dir already runs on; log for a new data dir), bolt (<data-dir>/metadata.db), log (<data-dir>/metadata.log/) or etcd://HOST:PORT[,HOST:PORT...][/PREFIX] (default prefix /nereus/)", func(c *Config) *string { return &c.Metadata }),
	{
		key:   "backend-timeout",
		usage: "how long start-up waits for the S3 bucket check and for etcd to answer",
		get:   func(c *Config) string { return c.BackendTimeout.String() },
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return err
			}
			c.BackendTimeout = d
			return nil
		},
	},
	mk("rack", "this node's rack / availability zone (Kafka broker.rack; consumers with the same client.rack read from it)", func(c *Config) *string { return &c.Rack }),
	{
		key:   "kafka-broker-id",
		usage: "Kafka broker id of this node (0: allocate one on first start; kept in <data-dir>/kafka-broker-id)",
		get:   func(c *Config) string { return strconv.Itoa(int(c.KafkaBrokerID)) },
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return fmt.Errorf("want an integer")
			}
			c.KafkaBrokerID = int32(n)
			return nil
		},
	},
	{
		key:   "cluster-session-ttl",
		usage: "how long a node that stops answering stays in the cluster before its streams are taken over",
		get:   func(c *Config) string { return c.ClusterSessionTTL.String() },
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return err
			}
			c.ClusterSessionTTL = d
			return nil
		},
	},
	{
		key:   "cluster-weight",
		usage: "this node's share of stream ownership relative to the others (1..1000)",
		get:   func(c *Config) string { return strconv.Itoa(int(c.ClusterWeight)) },
		set: func(c *Config, v string) error {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return fmt.Errorf("want a positive integer")
			}
			c.ClusterWeight = uint32(n)
			return nil
		},
	},
	func() setting {
		s := mk("addr-file", "write the bound listener addresses to this file as JSON (for tests)", func(c *Config) *string { return &c.AddrFile })
		s.hidden = true
		return s
	}(),
}

func durationSetting(key, usage string, p func(*Config) *time.Duration) setting {
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

// EnvName returns the environment variable for a setting key.
func EnvName(key string) string {
	return "NEREUS_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// ConfigFlag is the flag (and NEREUS_CONFIG env var) naming the config file.
const ConfigFlag = "config"

// RegisterFlags adds every setting as a flag (plus --config) to fs, with
// DefaultConfig's values as the shown defaults.
func RegisterFlags(fs *pflag.FlagSet) {
	def := DefaultConfig()
	fs.String(ConfigFlag, "", "YAML config file (env "+EnvName(ConfigFlag)+"); precedence: flag > env > file > default")
	for _, s := range settings {
		if s.boolean {
			fs.Bool(s.key, s.get(&def) == "true", s.usage+" (env "+EnvName(s.key)+")")
		} else {
			fs.String(s.key, s.get(&def), s.usage+" (env "+EnvName(s.key)+")")
		}
		if s.hidden {
			_ = fs.MarkHidden(s.key)
		}
	}
}

// LoadConfig resolves the configuration with precedence flag > environment
// (NEREUS_*) > config file > default. fs must have been set up with
// RegisterFlags and parsed; lookupEnv is usually os.LookupEnv. The result is
// validated.
func LoadConfig(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) (Config, error) {
	cfg := DefaultConfig()
	path := ""
	if v, ok := lookupEnv(EnvName(ConfigFlag)); ok {
		path = v
	}
	if f := fs.Lookup(ConfigFlag); f != nil && f.Changed {
		path = f.Value.String()
	}
	if path != "" {
		if err := applyFile(&cfg, path); err != nil {
			return Config{}, err
		}
	}
	for _, s := range settings {
		if v, ok := lookupEnv(EnvName(s.key)); ok {
			if err := s.set(&cfg, v); err != nil {
				return Config{}, fmt.Errorf("environment %s=%q: %w", EnvName(s.key), v, err)
			}
		}
	}
	for _, se := range secretEnv {
		if v, ok := lookupEnv(se.name); ok && v != "" {
			se.set(&cfg, v)
		}
	}
	for _, s := range settings {
		if f := fs.Lookup(s.key); f != nil && f.Changed {
			if err := s.set(&cfg, f.Value.String()); err != nil {
				return Config{}, fmt.Errorf("flag --%s=%q: %w", s.key, f.Value.String(), err)
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid configuration: %w", err)
	}
	return cfg, nil
}

// applyFile applies a YAML mapping of setting keys to scalar values. Unknown
// keys are an error (a typo must not silently fall back to a default).
func applyFile(cfg *Config, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	byKey := map[string]setting{}
	for _, s := range settings {
		byKey[s.key] = s
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, ok := byKey[k]
		if !ok {
			return fmt.Errorf("config file %s: unknown key %q (known: %s)", path, k, knownKeys())
		}
		var v string
		switch x := m[k].(type) {
		case nil:
			v = ""
		case string:
			v = x
		case bool, int, int64, uint64, float64:
			v = fmt.Sprint(x)
		default:
			return fmt.Errorf("config file %s: key %q: want a scalar value, got %T", path, k, x)
		}
		if err := s.set(cfg, v); err != nil {
			return fmt.Errorf("config file %s: key %q=%q: %w", path, k, v, err)
		}
	}
	return nil
}

func knownKeys() string {
	var ks []string
	for _, s := range settings {
		if !s.hidden {
			ks = append(ks, s.key)
		}
	}
	return strings.Join(ks, ", ")
}
