package server

import (
	"fmt"
	"time"

	"github.com/nereusstream/nereus-go/cluster"
	"github.com/nereusstream/nereus-go/stream"
)

// LifecycleSettings configure the physical lifecycle of streams:
// materialization into generations, reader protection and physical GC
// (which is on by default). Each is a flag, a NEREUS_* variable and a
// config-file key; the defaults equal the core's (stream.LifecycleConfig).
type LifecycleSettings struct {
	// GenerationBytes is the target size of a generation object (default
	// 16 MiB).
	GenerationBytes int64
	// GenerationMaxAge materializes a smaller range once its oldest commit
	// is this old (default 60s): it bounds how long shared Object WAL
	// segments are kept for a slow stream.
	GenerationMaxAge time.Duration
	// MaterializeConcurrency bounds parallel materialization tasks (and so
	// their memory, about GenerationBytes each; default half the CPUs, at
	// least one: stream.DefaultMaterializeConcurrency).
	MaterializeConcurrency int64
	// GCInterval is how often GC runs (default 1s); GCGrace how long an
	// unpublished, unprotected source stays before its bytes are deleted
	// (default 2s).
	GCInterval time.Duration
	GCGrace    time.Duration
	// GCDryRun logs and reports what GC would delete, and deletes nothing.
	GCDryRun bool
	// GCDisabled turns GC off entirely (space is then never reclaimed).
	GCDisabled bool
	// LeaseTTL is the lifetime of a durable reader protection without
	// renewal (default 30s).
	LeaseTTL time.Duration
	// MaterializeMaxLag bounds a stream's payload not yet in a generation
	// (background-materialized profiles): beyond it appends are refused
	// with a retriable error until materialization catches up (default
	// 1 GiB; 0: no bound).
	MaterializeMaxLag int64
	// GCAdoptAfter is how long another node must have been gone from the
	// cluster registry before its Object WAL log and BookKeeper ledgers are
	// adopted and reclaimed by one live node (default 10m);
	// GCAdoptScanInterval how often GC looks for such writers (default 1m).
	GCAdoptAfter        time.Duration
	GCAdoptScanInterval time.Duration
	// GenerationReadAhead, when > 0, bounds the generation bytes a
	// catch-up reader may have fetched ahead and not yet read; 0 (the
	// default) turns read-ahead off (stream.LifecycleConfig.
	// GenerationReadAheadBytes says when it is used and why it is off).
	GenerationReadAhead int64
}

// DefaultLifecycleSettings returns the core's defaults.
func DefaultLifecycleSettings() LifecycleSettings {
	return LifecycleSettings{GenerationBytes: 16 << 20, GenerationMaxAge: 60 * time.Second, MaterializeConcurrency: int64(stream.DefaultMaterializeConcurrency()),
		GCInterval: time.Second, GCGrace: 2 * time.Second, LeaseTTL: 30 * time.Second, MaterializeMaxLag: 1 << 30,
		GCAdoptAfter: cluster.DefaultAdoptAfter, GCAdoptScanInterval: time.Minute}
}

func (l LifecycleSettings) validate() []error {
	var errs []error
	if l.GenerationBytes < 4<<10 {
		errs = append(errs, fmt.Errorf("generation-bytes %d must be at least 4KiB", l.GenerationBytes))
	}
	for name, d := range map[string]time.Duration{"generation-max-age": l.GenerationMaxAge, "gc-interval": l.GCInterval,
		"gc-grace": l.GCGrace, "lease-ttl": l.LeaseTTL, "gc-adopt-after": l.GCAdoptAfter, "gc-adopt-scan-interval": l.GCAdoptScanInterval} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", name, d))
		}
	}
	if l.MaterializeMaxLag < 0 {
		errs = append(errs, fmt.Errorf("materialize-max-lag %d must not be negative", l.MaterializeMaxLag))
	}
	if l.GenerationReadAhead < 0 {
		errs = append(errs, fmt.Errorf("generation-read-ahead %d must not be negative", l.GenerationReadAhead))
	}
	if l.MaterializeConcurrency <= 0 {
		errs = append(errs, fmt.Errorf("materialize-concurrency %d must be positive", l.MaterializeConcurrency))
	}
	return errs
}

// coreLifecycle carries the settings into the core's config.
func (l LifecycleSettings) coreLifecycle() stream.LifecycleConfig {
	maxLag := l.MaterializeMaxLag
	if maxLag == 0 {
		maxLag = -1 // the flag's 0 is "no bound"; the core's 0 is its default
	}
	return stream.LifecycleConfig{GenerationBytes: l.GenerationBytes, GenerationMaxAge: l.GenerationMaxAge,
		MaterializeConcurrency: int(l.MaterializeConcurrency), GCInterval: l.GCInterval, GCGrace: l.GCGrace,
		GCDryRun: l.GCDryRun, GCDisabled: l.GCDisabled, LeaseTTL: l.LeaseTTL, MaxMaterializeLag: maxLag,
		AdoptScanInterval: l.GCAdoptScanInterval, GenerationReadAheadBytes: l.GenerationReadAhead}
}

var lifecycleSettings = []setting{
	bytesSetting("generation-bytes", "target size of a generation object (read-optimized copy of a committed range)", func(c *Config) *int64 { return &c.Lifecycle.GenerationBytes }),
	durSetting("generation-max-age", "materialize a smaller range once its oldest commit is this old", func(c *Config) *time.Duration { return &c.Lifecycle.GenerationMaxAge }),
	bytesSetting("generation-read-ahead", "bytes of generation objects a catch-up reader may fetch ahead, only where the page cache does not hold them; 0: off", func(c *Config) *int64 { return &c.Lifecycle.GenerationReadAhead }),
	bytesSetting("materialize-max-lag", "refuse appends (retriable) to a stream with more than this much payload not yet materialized; 0: no bound", func(c *Config) *int64 { return &c.Lifecycle.MaterializeMaxLag }),
	intSetting("materialize-concurrency", "parallel materialization tasks", func(c *Config) *int64 { return &c.Lifecycle.MaterializeConcurrency }),
	durSetting("gc-interval", "how often physical GC runs", func(c *Config) *time.Duration { return &c.Lifecycle.GCInterval }),
	durSetting("gc-grace", "how long an unpublished, unprotected source stays before its bytes are deleted", func(c *Config) *time.Duration { return &c.Lifecycle.GCGrace }),
	boolSetting("gc-dry-run", "report what GC would delete and delete nothing", func(c *Config) *bool { return &c.Lifecycle.GCDryRun }),
	boolSetting("gc-disabled", "turn GC off entirely (space is never reclaimed)", func(c *Config) *bool { return &c.Lifecycle.GCDisabled }),
	durSetting("lease-ttl", "lifetime of a durable reader protection without renewal", func(c *Config) *time.Duration { return &c.Lifecycle.LeaseTTL }),
	durSetting("gc-adopt-after", "how long another node must be gone from the cluster registry before one live node adopts and reclaims its WAL log and ledgers", func(c *Config) *time.Duration { return &c.Lifecycle.GCAdoptAfter }),
	durSetting("gc-adopt-scan-interval", "how often GC looks for dead nodes' WAL logs and ledgers to adopt", func(c *Config) *time.Duration { return &c.Lifecycle.GCAdoptScanInterval }),
}

func init() { settings = append(settings, lifecycleSettings...) }
