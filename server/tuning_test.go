package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/proto"
	"github.com/nereusstream/nereus-go/stream"
	"github.com/nereusstream/nereus-go/stream/bkwal"
	"github.com/nereusstream/nereus-go/stream/objectwal"
)

// The server's tuning defaults are the packages' own: a server on its
// defaults configures nothing the libraries would not choose themselves.
func TestTuningDefaultsMatchPackages(t *testing.T) {
	d := DefaultTuning()
	c := d.coreConfig(stream.Config{})
	if c.SessionTTL != 30*time.Second || c.RetentionInterval != time.Second || c.TailCacheBytes != 64<<20 || c.MaxPendingRuns != 256 {
		t.Errorf("core tuning %+v differs from stream.Config defaults", c)
	}
	w := d.objectWALConfig(objectwal.Config{}, ObjectStoreFile)
	if w.UploadConcurrency != 4 || w.MaxInFlightBytes != 256<<20 || w.CacheBytes != 64<<20 || w.TruncateInterval != 100*time.Millisecond ||
		w.FlushMode != objectwal.FlushGroupCommit || w.FlushInterval != 5*time.Millisecond || w.FlushBytes != 8<<20 {
		t.Errorf("object WAL tuning %+v differs from objectwal.Config defaults", w)
	}
	if w.GroupCommitMinWait != objectwal.DefaultGroupCommitMinWait || w.GroupCommitMinBytes != objectwal.DefaultGroupCommitMinBytes {
		t.Errorf("group-commit minimums %v / %d differ from objectwal's defaults", w.GroupCommitMinWait, w.GroupCommitMinBytes)
	}
	// Zero turns them off: objectwal reads a negative value as off (zero
	// would be its default).
	off := d
	off.ObjectWALGroupMinWait, off.ObjectWALGroupMinBytes = 0, 0
	if w := off.objectWALConfig(objectwal.Config{}, ObjectStoreFile); w.GroupCommitMinWait >= 0 || w.GroupCommitMinBytes >= 0 {
		t.Errorf("group-commit minimums set to 0 reach objectwal as %v / %d, want negative (off)", w.GroupCommitMinWait, w.GroupCommitMinBytes)
	}
	// On S3 the default is cost-first: a flush every 200ms.
	if w := d.objectWALConfig(objectwal.Config{}, objectStoreS3); w.FlushMode != objectwal.FlushOnInterval || w.FlushInterval != 200*time.Millisecond {
		t.Errorf("object WAL flush on S3: mode %v every %v, want interval every 200ms", w.FlushMode, w.FlushInterval)
	}
	// Explicit settings win over the store's defaults.
	d.ObjectWALFlushMode, d.ObjectWALFlushInterval, d.ObjectWALFlushBytes = flushModeGroup, 20*time.Millisecond, 1<<20
	if w := d.objectWALConfig(objectwal.Config{}, objectStoreS3); w.FlushMode != objectwal.FlushGroupCommit || w.FlushInterval != 20*time.Millisecond || w.FlushBytes != 1<<20 {
		t.Errorf("explicit flush settings not applied: %+v", w)
	}
	b := d.bookKeeperConfig(bkwal.Config{})
	if b.EnsembleSize != 3 || b.WriteQuorum != 2 || b.AckQuorum != 2 || b.MaxLedgerEntries != 100000 ||
		b.MaxLedgerBytes != 512<<20 || b.MaxLedgerAge != time.Hour || b.OpTimeout != 60*time.Second || b.ReaderCache != 256 ||
		b.MinRollAge != time.Second || b.MaxRetentionRolls != 100 {
		t.Errorf("BookKeeper tuning %+v differs from bkwal.Config defaults", b)
	}
	bc := d.bookKeeperClientConfig(bookkeeper.Config{})
	if bc.AddTimeout != 5*time.Second || bc.RequestTimeout != 5*time.Second || bc.MaxFrameSize != proto.DefaultMaxFrameSize {
		t.Errorf("BookKeeper client tuning %+v differs from bookkeeper.Config defaults", bc)
	}
}

// Each tuning key is a flag, an env var and a file key, with the usual
// precedence, and byte sizes take binary suffixes.
func TestTuningSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nereus.yaml")
	if err := os.WriteFile(file, []byte("session-ttl: 12s\ntail-cache-bytes: 8MiB\nbookkeeper-ensemble-size: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := parseFlags(t, "--config", file, "--object-wal-cache-bytes", "1GiB", "--bookkeeper-write-quorum", "3", "--bookkeeper-min-roll-age", "250ms")
	cfg, err := LoadConfig(fs, envOf(map[string]string{"NEREUS_RETENTION_INTERVAL": "2m", "NEREUS_SESSION_TTL": "20s"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SessionTTL != 20*time.Second || cfg.RetentionInterval != 2*time.Minute || cfg.TailCacheBytes != 8<<20 ||
		cfg.ObjectWALCacheBytes != 1<<30 || cfg.BookKeeperEnsembleSize != 5 || cfg.BookKeeperWriteQuorum != 3 {
		t.Fatalf("tuning not applied: %+v", cfg.Tuning)
	}
	if b := cfg.bookKeeperConfig(bkwal.Config{}); b.MinRollAge != 250*time.Millisecond {
		t.Fatalf("--bookkeeper-min-roll-age 250ms reaches bkwal as %v", b.MinRollAge)
	}
}

func TestTuningValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bookkeeper-ack-quorum", "3"}, "bookkeeper-write-quorum 2 must be >= bookkeeper-ack-quorum 3"},
		{[]string{"--bookkeeper-write-quorum", "4"}, "bookkeeper-ensemble-size 3 must be >= bookkeeper-write-quorum 4"},
		{[]string{"--session-ttl", "0s"}, "session-ttl 0s must be positive"},
		{[]string{"--tail-cache-bytes", "lots"}, "want a byte count"},
		{[]string{"--metrics-stream-limit", "-1"}, "metrics-stream-limit -1 must be >= 0"},
		{[]string{"--kafka-max-request-bytes", "4GiB"}, "kafka-max-request-bytes 4294967296 must be at most 2147483647"},
		{[]string{"--recovery-timeout", "0s"}, "recovery-timeout 0s must be positive"},
		{[]string{"--object-wal-group-min-wait", "-1ms"}, "object-wal-group-min-wait -1ms must not be negative"},
	} {
		_, err := LoadConfig(parseFlags(t, tc.args...), envOf(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"123": 123, "4KiB": 4 << 10, "64MiB": 64 << 20, "2GiB": 2 << 30, "3M": 3 << 20, "10B": 10} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
		if got, _ := parseBytes(formatBytes(want)); got != want {
			t.Errorf("formatBytes(%d) does not round-trip", want)
		}
	}
}

// The lifecycle defaults are the core's own.
func TestLifecycleDefaultsMatchCore(t *testing.T) {
	got := DefaultLifecycleSettings().coreLifecycle()
	want := stream.LifecycleConfig{GenerationBytes: 16 << 20, GenerationMaxAge: 60 * time.Second, MaterializeConcurrency: stream.DefaultMaterializeConcurrency(),
		GCInterval: time.Second, GCGrace: 2 * time.Second, LeaseTTL: 30 * time.Second, MaxMaterializeLag: 1 << 30,
		AdoptScanInterval: time.Minute}
	if got != want {
		t.Fatalf("lifecycle settings %+v differ from the core's defaults %+v", got, want)
	}
	fs := parseFlags(t, "--gc-dry-run", "--generation-bytes", "32MiB", "--gc-grace", "1m")
	cfg, err := LoadConfig(fs, envOf(map[string]string{"NEREUS_GC_INTERVAL": "2s"}))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Lifecycle; !l.GCDryRun || l.GenerationBytes != 32<<20 || l.GCGrace != time.Minute || l.GCInterval != 2*time.Second {
		t.Fatalf("lifecycle settings not applied: %+v", l)
	}
}

// --generation-read-ahead reaches the core's config; a negative one is refused.
func TestGenerationReadAheadSetting(t *testing.T) {
	cfg, err := LoadConfig(parseFlags(t, "--generation-read-ahead", "128MiB"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Lifecycle.coreLifecycle().GenerationReadAheadBytes; got != 128<<20 {
		t.Fatalf("GenerationReadAheadBytes = %d, want %d", got, 128<<20)
	}
	l := DefaultLifecycleSettings()
	l.GenerationReadAhead = -1
	if errs := l.validate(); len(errs) != 1 {
		t.Fatalf("validate of a negative read-ahead: %v, want one error", errs)
	}
}
