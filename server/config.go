package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
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
	// PulsarAddr is the Pulsar binary-protocol listener address (default
	// "127.0.0.1:6650"); empty disables the Pulsar front end.
	PulsarAddr string
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
	// AddrFile, when set, is written (atomically, JSON) with the bound
	// listener addresses once the server serves. Tests use it with ":0"
	// addresses.
	AddrFile string
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
	}
}

// Validate checks every field and names the offending setting.
func (c Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data-dir must not be empty"))
	}
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("http-addr must not be empty (the admin API and /healthz live there)"))
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
	return errors.Join(errs...)
}

// setting is one configurable key. Its flag name is its config-file key,
// and its environment variable is NEREUS_ + the key upper-cased with '-'
// as '_'. Adding a setting here adds the flag, the env var and the file key.
type setting struct {
	key    string
	usage  string
	hidden bool
	get    func(*Config) string
	set    func(*Config, string) error
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
	mk("pulsar-addr", "Pulsar listener address (empty disables)", func(c *Config) *string { return &c.PulsarAddr }),
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
	func() setting {
		s := mk("addr-file", "write the bound listener addresses to this file as JSON (for tests)", func(c *Config) *string { return &c.AddrFile })
		s.hidden = true
		return s
	}(),
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
		fs.String(s.key, s.get(&def), s.usage+" (env "+EnvName(s.key)+")")
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
