package stream

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// Config configures a Core. Zero values mean the documented defaults.
type Config struct {
	// Metadata is the commit authority. Required.
	Metadata metadata.Store
	// ObjectWAL is the provider for the OBJECT_WAL_* profiles. Streams with
	// those profiles cannot be created without it.
	ObjectWAL provider.Provider
	// BookKeeperWAL is the provider for the BOOKKEEPER_* profiles. Without
	// it, creating such a stream fails with ErrUnsupportedProfile.
	BookKeeperWAL provider.Provider
	// WriterID names this process as a writer (a broker ID). Default: the
	// host name. Sessions acquired by an earlier process with the same
	// WriterID are taken over (and fenced) immediately.
	WriterID string
	// SessionTTL is the default append-session lifetime without renewal
	// (default 30s). The core renews the sessions it holds.
	SessionTTL time.Duration
	// TailCacheBytes bounds the in-memory cache of recently committed
	// entries that serves tailing readers without I/O (default 64 MiB).
	TailCacheBytes int64
	// MaxPendingRuns bounds the committed runs a head may carry before their
	// index entries are confirmed; beyond it the stream's appends wait for
	// index publication (default 256).
	MaxPendingRuns int
	// CommitShards is how many independent commit pipelines the owned
	// streams are spread over (committer.go; a stream always uses the same
	// one). Each sends one metadata Batch per round; more shards overlap
	// one shard's per-stream round work with another's store round trip and
	// spread it over cores, which matters with thousands of active streams.
	// Default: GOMAXPROCS, at most 8.
	CommitShards int
	// RetentionInterval is how often retention is enforced on the streams
	// this process owns (default 1s); more often — a twentieth of the
	// shortest time retention of an owned stream, at most four times per
	// interval — when that retention is under twenty intervals.
	RetentionInterval time.Duration
	// ObjectStore holds generation objects. Without it streams are never
	// materialized and BOOKKEEPER_WAL_*_OBJECT streams cannot be created.
	ObjectStore objectstore.ObjectStore
	// Lifecycle configures materialization, reader protection and GC.
	Lifecycle LifecycleConfig
	// Ownership says which streams' lifecycle work runs here (nil: all).
	Ownership Ownership
	// Adoption says when another writer's physical sources are adopted by
	// this process's GC (adopt.go; nil: never, as a single node).
	Adoption AdoptionPolicy
	// Logger receives lifecycle events. Default: warnings to stderr.
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests inject their own.
	Now func() time.Time

	// runtime replaces the goroutines, timers and clock of the driver (the
	// simulator's seam; nil: the real runtime over Now).
	runtime runtime
}

func (c *Config) withDefaults() error {
	if c.Metadata == nil {
		return fmt.Errorf("%w: Config.Metadata is required", ErrInvalidArgument)
	}
	if c.WriterID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "nereus"
		}
		c.WriterID = h
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 30 * time.Second
	}
	if c.TailCacheBytes <= 0 {
		c.TailCacheBytes = 64 << 20
	}
	if c.MaxPendingRuns <= 0 {
		c.MaxPendingRuns = 256
	}
	if c.RetentionInterval <= 0 {
		c.RetentionInterval = time.Second
	}
	if c.CommitShards <= 0 {
		c.CommitShards = min(goruntime.GOMAXPROCS(0), 8)
	}
	c.Lifecycle.withDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.runtime == nil {
		c.runtime = realRuntime{clock: c.Now}
	}
	return nil
}

// Core is the stream core: the Storage implementation over a metadata store
// and WAL providers. See the package doc and docs/ARCHITECTURE.md for the
// commit protocol.
type Core struct {
	cfg         Config
	meta        metadata.Store
	rt          runtime
	incarnation string
	log         *slog.Logger

	mu     sync.Mutex
	owners map[ID]*owner
	// replaced holds owners a newer session of this process replaced
	// while they still had appends to settle (they finish on their own;
	// Close must drain and fail them too). Guarded by mu.
	replaced map[*owner]struct{}
	closed   bool

	// shards are the commit pipelines (committerFor).
	shards  []*committer
	slots   slotTable
	leases  *leaseTable
	gens    *genReader // nil without Config.ObjectStore
	mat     *materializer
	gc      gcState
	adopt   adoptionState
	gcs     gcSched
	guards  retentionGuards
	views   viewState
	lc      lcMetrics
	tail    *tailCache
	watch   *headWatch
	metrics Metrics
	// metaHealth: whether commit rounds reach the metadata store.
	metaHealth healthTracker
	walFailLog logLimiter

	// lastRetention and retentionRunning belong to the maintenance tick;
	// background counts its asynchronous work (retention and lifecycle
	// passes, materialization tasks; started
	// only through goBackground). stopTick cancels the armed tick
	// (guarded by mu).
	lastRetention    time.Time
	retentionRunning atomic.Bool
	shortRetention   shortRetention // the extra passes short time retention gets (background.go)
	background       sync.WaitGroup
	backgroundClosed bool         // guarded by mu: Close waits for background; see goBackground
	backgroundN      atomic.Int64 // mirrors background, for a simulated runtime's Close
	stopTick         func() bool
	periodicStops    []func() bool // the lifecycle's armed timers (periodic), guarded by mu

	ctx    context.Context
	cancel context.CancelFunc
}

var _ Storage = (*Core)(nil)

// Open starts a Core. It settles the intents earlier incarnations of this
// writer left in the providers before it returns, so every stream it then
// serves has a settled history.
func Open(ctx context.Context, cfg Config) (*Core, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	var inc [8]byte
	binary.LittleEndian.PutUint64(inc[:], cfg.runtime.random())
	c := &Core{
		cfg:         cfg,
		meta:        cfg.Metadata,
		rt:          cfg.runtime,
		incarnation: hex.EncodeToString(inc[:]),
		log:         cfg.Logger,
		owners:      map[ID]*owner{},
		replaced:    map[*owner]struct{}{},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.tail = newTailCache(cfg.TailCacheBytes)
	c.watch = newHeadWatch(c)
	c.shards = newCommitters(c, cfg.CommitShards)
	c.leases = newLeaseTable(c)
	if cfg.ObjectStore != nil {
		c.gens = newGenReader(cfg.ObjectStore, cfg.Lifecycle.GenerationCacheBytes)
		// Read-ahead runs GETs in goroutines of its own: only on the real
		// runtime, never under the deterministic simulator.
		if _, real := cfg.runtime.(realRuntime); real && cfg.Lifecycle.GenerationReadAheadBytes > 0 {
			c.gens.r.SetReadAhead(cfg.Lifecycle.GenerationReadAheadBytes)
		}
	}
	c.mat = newMaterializer(c)
	for _, p := range c.providers() {
		if err := p.Recover(ctx, c.settleIntent); err != nil {
			c.cancel()
			return nil, fmt.Errorf("nereus/stream: recovering %s intents: %w", p.Name(), err)
		}
	}
	c.startMaintenance()
	c.startLifecycle()
	return c, nil
}

func (c *Core) providers() []provider.Provider {
	var out []provider.Provider
	if c.cfg.ObjectWAL != nil {
		out = append(out, c.cfg.ObjectWAL)
	}
	if c.cfg.BookKeeperWAL != nil {
		out = append(out, c.cfg.BookKeeperWAL)
	}
	return out
}

func (c *Core) providerFor(p Profile) (provider.Provider, error) {
	var pv provider.Provider
	if p.UsesBookKeeper() {
		pv = c.cfg.BookKeeperWAL
	} else {
		pv = c.cfg.ObjectWAL
	}
	if pv == nil {
		which := "the Object WAL"
		if p.UsesBookKeeper() {
			which = "the BookKeeper WAL (start the server with --bookkeeper-zk)"
		}
		return nil, fmt.Errorf("%w: %s needs %s, which is not configured", ErrUnsupportedProfile, p, which)
	}
	if (p == BookKeeperWALSyncObject || p == BookKeeperWALAsyncObject) && c.cfg.ObjectStore == nil {
		return nil, fmt.Errorf("%w: %s materializes into the object store, which is not configured", ErrUnsupportedProfile, p)
	}
	return pv, nil
}

func (c *Core) providerByName(name string) (provider.Provider, error) {
	for _, p := range c.providers() {
		if p.Name() == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("nereus/stream: no provider %q configured for a committed run", name)
}

// partReader reads the entries of one part of a descriptor (a WAL run, a
// generation object) back.
type partReader interface {
	Read(ctx context.Context, target provider.Target, runStart, from int64, maxBytes int) ([]provider.ReadEntry, error)
}

// readerByName returns the reader of descriptors recorded with provider
// name `name`.
func (c *Core) readerByName(name string) (partReader, error) {
	if name == generationProvider {
		if c.gens == nil {
			return nil, fmt.Errorf("nereus/stream: a generation is committed but no object store is configured")
		}
		return c.gens, nil
	}
	return c.providerByName(name)
}

func (c *Core) writerTag(writerID string) string { return writerID + "\x00" + c.incarnation }

// Close drains in-flight appends (bounded by ctx), releases nothing
// durable, and stops background work. Sessions are left to expire or to be
// taken over by this writer's next incarnation.
func (c *Core) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	owners := c.allOwners()
	ctx, cancel := c.rt.withTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, o := range owners {
		o.drain(ctx)
	}
	c.cancel()
	c.mu.Lock()
	if c.stopTick != nil {
		c.stopTick() // a tick already running sees c.ctx cancelled and arms no other
	}
	for _, stop := range c.periodicStops {
		if stop != nil {
			stop()
		}
	}
	c.mu.Unlock()
	c.stopCommitters()
	c.failAll()
	c.mu.Lock()
	c.backgroundClosed = true // no c.background.Add from here on (goBackground)
	c.mu.Unlock()
	c.rt.block(func() bool { return c.backgroundN.Load() == 0 })
	c.background.Wait()
	c.watch.stop()
	c.watch.wait(ctx)
	c.closeAdoptions()
	var errs []error
	for _, p := range c.providers() {
		if err := p.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Core) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func randomUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func (c *Core) random() uint64 { return c.rt.random() }

func (c *Core) nowMs() int64 { return c.rt.now().UnixMilli() }
