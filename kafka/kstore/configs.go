package kstore

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/stream"
)

// Names of the topic configs Nereus enforces.
const (
	ConfigCleanupPolicy   = "cleanup.policy"
	ConfigRetentionMs     = "retention.ms"
	ConfigRetentionBytes  = "retention.bytes"
	ConfigMaxMessageBytes = "max.message.bytes"
	ConfigTimestampType   = "message.timestamp.type"
	ConfigCompressionType = "compression.type"
	// ConfigStorageProfile selects the partition streams' storage profile.
	// It is fixed at creation: a profile is never an online migration.
	ConfigStorageProfile = "nereus.storage.profile"
)

// ConfigType is a Kafka config value type (DescribeConfigs v3+).
type ConfigType int8

// Kafka's ConfigType enum values.
const (
	TypeBoolean ConfigType = 1
	TypeString  ConfigType = 2
	TypeInt     ConfigType = 3
	TypeShort   ConfigType = 4
	TypeLong    ConfigType = 5
	TypeDouble  ConfigType = 6
	TypeList    ConfigType = 7
)

// ConfigDef describes one topic config the broker accepts.
type ConfigDef struct {
	Name    string
	Default string
	Type    ConfigType
	// Enforced is false for configs that are accepted and reported for
	// compatibility but have no effect on Nereus (segment sizes, replica
	// counts: Nereus has no segments or replicas; durability comes from the
	// storage profile).
	Enforced bool
	// ReadOnly configs cannot be altered after creation.
	ReadOnly bool
	Doc      string
	validate func(string) error
}

func longAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not a number: %q", v)
		}
		if n < min {
			return fmt.Errorf("must be >= %d", min)
		}
		return nil
	}
}

func intAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("not a 32-bit number: %q", v)
		}
		if n < min {
			return fmt.Errorf("must be >= %d", min)
		}
		return nil
	}
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, ok := range vals {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("must be one of %v", vals)
	}
}

func cleanupPolicy(v string) error {
	seen := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p != "delete" && p != "compact" {
			return fmt.Errorf("must be a list of delete and compact, got %q", v)
		}
		seen[p] = true
	}
	if len(seen) == 0 {
		return fmt.Errorf("must not be empty")
	}
	return nil
}

// Compacted reports whether cleanup.policy includes compact.
func (c TopicConfigs) Compacted() bool {
	_, compact := c.cleanupPolicies()
	return compact
}

func (c TopicConfigs) cleanupPolicies() (del, compact bool) {
	v, _ := c.Get(ConfigCleanupPolicy)
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "delete":
			del = true
		case "compact":
			compact = true
		}
	}
	return del, compact
}

func boolean(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("must be true or false")
	}
	return nil
}

func anyString(string) error { return nil }

func profileName(v string) error {
	_, err := stream.ParseProfile(v)
	return err
}

var configDefs = []ConfigDef{
	{Name: ConfigCleanupPolicy, Default: "delete", Type: TypeList, Enforced: true, validate: cleanupPolicy,
		Doc: "delete, compact or compact,delete. A compact-only topic has no time or size retention. Compacted partitions are served from a compacted view below its cleaned point (the last record per key; see min.compaction.lag.ms, segment.ms, delete.retention.ms, min.cleanable.dirty.ratio)."},
	{Name: ConfigRetentionMs, Default: "604800000", Type: TypeLong, Enforced: true, validate: longAtLeast(-1),
		Doc: "Maps onto the partition streams' time retention (-1: unlimited)."},
	{Name: ConfigRetentionBytes, Default: "-1", Type: TypeLong, Enforced: true, validate: longAtLeast(-1),
		Doc: "Maps onto the partition streams' size retention (-1: unlimited)."},
	{Name: ConfigMaxMessageBytes, Default: "1048588", Type: TypeInt, Enforced: true, validate: intAtLeast(0),
		Doc: "Largest record batch a produce may append."},
	{Name: ConfigTimestampType, Default: "CreateTime", Type: TypeString, Enforced: true, validate: oneOf("CreateTime", "LogAppendTime"),
		Doc: "LogAppendTime makes the broker stamp each batch with its append time."},
	{Name: ConfigCompressionType, Default: "producer", Type: TypeString, Enforced: true, validate: oneOf("producer"),
		Doc: "Batches are stored as the producer compressed them; broker-side recompression is not supported."},
	{Name: ConfigStorageProfile, Default: stream.DefaultProfile.String(), Type: TypeString, Enforced: true, ReadOnly: true, validate: profileName,
		Doc: "Nereus storage profile of the partition streams, chosen at creation."},
	// Accepted for client compatibility, stored and reported, no effect.
	{Name: "segment.bytes", Default: "1073741824", Type: TypeInt, validate: intAtLeast(14)},
	{Name: "segment.ms", Enforced: true, Default: "604800000", Type: TypeLong, validate: longAtLeast(1), Doc: "The newest segment.ms of a compacted partition is its active head, never compacted."},
	{Name: "segment.index.bytes", Default: "10485760", Type: TypeInt, validate: intAtLeast(4)},
	{Name: "segment.jitter.ms", Default: "0", Type: TypeLong, validate: longAtLeast(0)},
	{Name: "min.insync.replicas", Default: "1", Type: TypeInt, validate: intAtLeast(1)},
	{Name: "unclean.leader.election.enable", Default: "false", Type: TypeBoolean, validate: boolean},
	{Name: "flush.messages", Default: "9223372036854775807", Type: TypeLong, validate: longAtLeast(1)},
	{Name: "flush.ms", Default: "9223372036854775807", Type: TypeLong, validate: longAtLeast(0)},
	{Name: "index.interval.bytes", Default: "4096", Type: TypeInt, validate: intAtLeast(0)},
	{Name: "delete.retention.ms", Enforced: true, Default: "86400000", Type: TypeLong, validate: longAtLeast(0), Doc: "How long a compacted topic keeps a tombstone, and the marker of a transaction whose records are all gone, after the compaction pass that first cleaned it (KIP-534 delete horizon)."},
	{Name: "file.delete.delay.ms", Default: "60000", Type: TypeLong, validate: longAtLeast(0)},
	{Name: "min.compaction.lag.ms", Enforced: true, Default: "0", Type: TypeLong, validate: longAtLeast(0), Doc: "Records younger than this are never compacted."},
	{Name: "max.compaction.lag.ms", Enforced: true, Default: "9223372036854775807", Type: TypeLong, validate: longAtLeast(1), Doc: "A compacted partition is compacted at least this often, whatever its dirty ratio."},
	{Name: "min.cleanable.dirty.ratio", Enforced: true, Default: "0.5", Type: TypeDouble, validate: anyString, Doc: "A compaction pass starts when the uncompacted share of a partition reaches this."},
	{Name: "preallocate", Default: "false", Type: TypeBoolean, validate: boolean},
	{Name: "message.timestamp.before.max.ms", Default: "9223372036854775807", Type: TypeLong, validate: longAtLeast(0)},
	{Name: "message.timestamp.after.max.ms", Default: "9223372036854775807", Type: TypeLong, validate: longAtLeast(0)},
	{Name: "follower.replication.throttled.replicas", Default: "", Type: TypeList, validate: anyString},
	{Name: "leader.replication.throttled.replicas", Default: "", Type: TypeList, validate: anyString},
}

var configByName = func() map[string]*ConfigDef {
	m := make(map[string]*ConfigDef, len(configDefs))
	for i := range configDefs {
		m[configDefs[i].Name] = &configDefs[i]
	}
	return m
}()

// ConfigDefs returns every topic config the broker knows, in name order.
func ConfigDefs() []ConfigDef {
	out := append([]ConfigDef(nil), configDefs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupConfig returns the definition of a topic config.
func LookupConfig(name string) (ConfigDef, bool) {
	d, ok := configByName[name]
	if !ok {
		return ConfigDef{}, false
	}
	return *d, true
}

// ValidateConfig checks one topic config value.
func ValidateConfig(name, value string) error {
	d, ok := configByName[name]
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, name)
	}
	if err := d.validate(value); err != nil {
		return fmt.Errorf("%w: %s=%q: %v (%s)", ErrInvalidConfig, name, value, err, d.Doc)
	}
	return nil
}

// TopicConfigs is a topic's explicitly set configs (the rest take defaults).
type TopicConfigs map[string]string

// Get returns the effective value and whether it was set explicitly.
func (c TopicConfigs) Get(name string) (string, bool) {
	if v, ok := c[name]; ok {
		return v, true
	}
	if d, ok := configByName[name]; ok {
		return d.Default, false
	}
	return "", false
}

func (c TopicConfigs) int64(name string) int64 {
	v, _ := c.Get(name)
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// MaxMessageBytes is the largest batch a produce may append.
func (c TopicConfigs) MaxMessageBytes() int { return int(c.int64(ConfigMaxMessageBytes)) }

// LogAppendTime reports whether the broker stamps batches with append time.
func (c TopicConfigs) LogAppendTime() bool {
	v, _ := c.Get(ConfigTimestampType)
	return v == "LogAppendTime"
}

// Profile is the topic's storage profile.
func (c TopicConfigs) Profile() stream.Profile {
	v, _ := c.Get(ConfigStorageProfile)
	p, err := stream.ParseProfile(v)
	if err != nil {
		return stream.DefaultProfile
	}
	return p
}

// Retention maps retention.ms / retention.bytes onto stream retention
// (Kafka's -1 "unlimited" is the stream's zero). A compact-only topic
// (cleanup.policy without delete) has none, as in Kafka.
func (c TopicConfigs) Retention() stream.Retention {
	var r stream.Retention
	if del, _ := c.cleanupPolicies(); !del {
		return r
	}
	if ms := c.int64(ConfigRetentionMs); ms > 0 {
		r.Time = time.Duration(ms) * time.Millisecond
	}
	if b := c.int64(ConfigRetentionBytes); b > 0 {
		r.Bytes = b
	}
	return r
}

func (c TopicConfigs) clone() TopicConfigs {
	out := make(TopicConfigs, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}
