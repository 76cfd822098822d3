package stream

import (
	goruntime "runtime"
	"time"
)

// LifecycleConfig configures the physical lifecycle of streams:
// materialization into generations, retention, reader protection and
// physical GC. Zero values mean the documented defaults.
type LifecycleConfig struct {
	// Interval is how often the streams this process owns are checked for
	// materialization and retention work (default 1s).
	Interval time.Duration
	// GenerationBytes is the target size of a generation object: a range
	// is materialized once this much committed payload is unmaterialized
	// (default 16 MiB).
	GenerationBytes int64
	// GenerationMaxAge materializes a smaller range once its oldest commit
	// is this old (default 60s). It bounds how long the multi-stream WAL
	// segments a stream wrote into must be kept.
	GenerationMaxAge time.Duration
	// MaterializeConcurrency bounds parallel materialization tasks, and so
	// the memory they use (about GenerationBytes each; default
	// DefaultMaterializeConcurrency: half the CPUs, at least one).
	MaterializeConcurrency int
	// DisableMaterialization turns background materialization off (tests,
	// troubleshooting). *_SYNC_OBJECT BookKeeper appends still materialize.
	DisableMaterialization bool
	// MaxMaterializeLag bounds a stream's committed payload not yet in a
	// generation for the profiles that materialize in the background (all
	// but BOOKKEEPER_WAL_ONLY and BOOKKEEPER_WAL_SYNC_OBJECT): beyond it,
	// appends to the stream are refused with ErrStorageUnavailable
	// (retriable) until materialization catches up, so a stuck or slow
	// materializer cannot grow the WAL without bound. Streams that are not
	// materialized on purpose (short time retention, materialization
	// disabled) are not limited. Default 1 GiB; negative: no bound.
	MaxMaterializeLag int64
	// DisableMerge turns off merging adjacent small generations into larger
	// ones (merge.go). Merges never run in a GC dry run.
	DisableMerge bool
	// GCInterval is how often logical and physical GC run (default 1s).
	GCInterval time.Duration
	// GCGrace is how long a source stays after it was unpublished and no
	// protection needs it before its bytes are deleted (default 2s). Reads
	// do not depend on it for safety (a read takes its protection before it
	// reads the head, and one that finds its source gone resolves again);
	// it covers clock skew and lease-write visibility, and it delays space
	// reclaim by its length.
	GCGrace time.Duration
	// OrphanGrace is how old an unreferenced generation object must be
	// before the orphan sweep journals it (a task's PUT whose publication
	// never happened). A materialization or merge task is bounded by two
	// thirds of it, so it must exceed how long a task takes (default 30s,
	// at least GCGrace).
	OrphanGrace time.Duration
	// GCDryRun makes GC report what it would delete and delete nothing.
	GCDryRun bool
	// GCDisabled turns physical and logical GC off entirely.
	GCDisabled bool
	// LeaseTTL is the lifetime of a durable reader protection without
	// renewal (default 30s); LeaseSkew the clock skew GC tolerates when
	// judging expiry (default 5s).
	LeaseTTL  time.Duration
	LeaseSkew time.Duration
	// GenerationCacheBytes bounds the parsed generation footers kept for
	// reads (default 16 MiB).
	GenerationCacheBytes int64
	// GenerationReadAheadBytes, when > 0, turns on read-ahead for
	// sequential (catch-up) readers of generations and bounds the bytes
	// fetched ahead and not yet read: a read that stops inside the
	// generations starts the GET of what the same reader's next read will
	// want (also in the next object), so a consumer that alternates
	// between fetching and processing finds its next bytes fetched. The
	// next span is started once a read's bytes are in hand, before they
	// are verified, into a recycled buffer, and only when the object
	// store does not report it in memory (objectstore.CacheProber:
	// fsstore asks the page cache), so a warm reader runs as without it.
	// Off by default: unconditional read-ahead made warm catch-up slower
	// on the loaded 2-core machine (sessions 9 and 13); the gated one won
	// cold there without a warm loss, but under loads of 10-17 only
	// (docs/notes/issue-9.md, session 14: figures to confirm on a quiet
	// machine before it is made the default; session 16: with spans read
	// and checked piece by piece on fsstore, objectstore.PieceReader, it
	// gave no cold gain and cost up to 0.3 CPU-s per GB, so it stays off).
	// Stores that cannot tell (S3) get every span read ahead, as before.
	GenerationReadAheadBytes int64
	// AdoptScanInterval is how often GC lists the WAL providers' writer
	// identities to find a dead writer's sources to adopt (Config.Adoption;
	// default 1m). The Object WAL lists its whole log prefix for it.
	AdoptScanInterval time.Duration
	// OrphanSweepInterval is how often each owned stream's generation
	// objects are listed again for orphans (objects no record names: a
	// materialization lost between its PUT and its publication; default
	// 10m). Every stream is also listed once after the process starts, and
	// at most 16 streams are listed per GC pass.
	OrphanSweepInterval time.Duration
}

// DefaultMaterializeConcurrency is MaterializeConcurrency's default: half
// the CPUs the Go runtime schedules on, at least one. Materialization is
// background CPU work (reading the source, checksumming, copying, the
// digest); with as many tasks as cores, a burst of streams coming due
// together — GenerationMaxAge after a produce spread over 16 partitions —
// took both cores of a 2-core machine from the acknowledgement path:
// Kafka's EndToEndLatency p99 16–26 ms in the rounds that met such a burst,
// 8–9 ms with one task, which kept up with a 50 MB/s produce all the same
// (docs/notes/issue-15-ops.md, session 19).
func DefaultMaterializeConcurrency() int { return max(1, goruntime.GOMAXPROCS(0)/2) }

func (l *LifecycleConfig) withDefaults() {
	if l.Interval <= 0 {
		l.Interval = time.Second
	}
	if l.GenerationBytes <= 0 {
		l.GenerationBytes = 16 << 20
	}
	if l.GenerationMaxAge <= 0 {
		l.GenerationMaxAge = 60 * time.Second
	}
	if l.MaterializeConcurrency <= 0 {
		l.MaterializeConcurrency = DefaultMaterializeConcurrency()
	}
	if l.GCInterval <= 0 {
		l.GCInterval = time.Second
	}
	if l.GCGrace <= 0 {
		l.GCGrace = 2 * time.Second
	}
	if l.MaxMaterializeLag == 0 {
		l.MaxMaterializeLag = 1 << 30
	}
	if l.OrphanGrace <= 0 {
		l.OrphanGrace = max(30*time.Second, l.GCGrace)
	}
	if l.LeaseTTL <= 0 {
		l.LeaseTTL = 30 * time.Second
	}
	if l.LeaseSkew <= 0 {
		l.LeaseSkew = 5 * time.Second
	}
	if l.OrphanSweepInterval <= 0 {
		l.OrphanSweepInterval = 10 * time.Minute
	}
	if l.AdoptScanInterval <= 0 {
		l.AdoptScanInterval = time.Minute
	}
	if l.GenerationCacheBytes <= 0 {
		l.GenerationCacheBytes = 16 << 20
	}
}

// Ownership tells the core which streams' background lifecycle work
// (retention, materialization, logical GC) runs in this process. In a
// cluster exactly one live broker should own each stream; during a view
// change two may briefly both claim one, which every lifecycle step
// tolerates (each is a CAS or an idempotent delete). Nil means this process
// owns every stream (a single node).
type Ownership interface {
	OwnsStream(name string) bool
	// Changes is closed (and replaced) whenever the answer may have
	// changed.
	Changes() <-chan struct{}
}
