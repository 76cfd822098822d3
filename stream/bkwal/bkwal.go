package bkwal

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"golang.org/x/time/rate"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/namespace"
	"github.com/nereusstream/nereus-go/internal/simrt"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// Name is the provider name recorded in commit descriptors.
const Name = "bookkeeper"

// Custom-metadata keys on every ledger the provider creates (besides the
// namespace's owner tag).
const (
	StreamKey  = "nereus/stream"
	SessionKey = "nereus/session"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors.
var (
	// ErrClosed: the provider is closed; the run was not written (or its
	// outcome is left to the next incarnation's Recover).
	ErrClosed = errors.New("nereus/bkwal: provider closed")
	// ErrStaleSession: a run of an older append session than one already
	// seen for the stream; it is not written (its session is fenced).
	ErrStaleSession = errors.New("nereus/bkwal: run of a superseded append session")
	// ErrEntryTooLarge: an entry exceeds what one BookKeeper entry can carry
	// (the bookies' frame limit). Nothing was written.
	ErrEntryTooLarge = errors.New("nereus/bkwal: entry too large for one BookKeeper entry")
)

// Config configures the provider. Zero values mean the documented defaults.
type Config struct {
	// Client is the BookKeeper client. Required unless Ledgers is set.
	Client *bookkeeper.Client
	// Namespace allocates ledger IDs and guards creates and deletes.
	// Required unless Ledgers is set (Open it with namespace.Open after a
	// namespace.Reserve).
	Namespace *namespace.Namespace
	// Ledgers, when set, replaces Client and Namespace (seam.go): a
	// simulated BookKeeper for the deterministic simulator. Default: the
	// two above.
	Ledgers Ledgers
	// Runtime is the clock, timers, goroutines and randomness (seam.go);
	// nil = the real ones. A simulator supplies its own.
	Runtime Runtime
	// Meta holds the ledger registry and stream pointers. Required; the
	// core's metadata store.
	Meta metadata.Store
	// WriterID is this process's writer identity, the core's WriterID.
	// Required: Recover takes over the ledgers of earlier incarnations with
	// the same identity.
	WriterID string
	// Alias names the BookKeeper cluster in targets and keys (default
	// "default"); it must match the namespace's alias.
	Alias string
	// EnsembleSize, WriteQuorum, AckQuorum of new ledgers (default 3, 2, 2).
	// With E = WQ > AQ a single bookie failure does not taint a ledger.
	EnsembleSize, WriteQuorum, AckQuorum int
	// Password of every ledger (default "nereus"); readers need the same.
	Password []byte
	// MaxLedgerEntries, MaxLedgerBytes, MaxLedgerAge: a ledger is sealed
	// and a new one started before a run would pass them (defaults 100000
	// entries, 512 MiB, 1h). A run is never split: one run larger than the
	// limits goes alone into a fresh ledger.
	MaxLedgerEntries int64
	MaxLedgerBytes   int64
	MaxLedgerAge     time.Duration
	// IdleSeal: a stream's current ledger that has taken no run for this
	// long is sealed by a physical-GC pass (Reclaim) once every committed
	// run in it is retired (trimmed, materialized, or of a deleted stream),
	// holds nothing committed, or is past MaxLedgerAge — so an idle
	// stream's last ledger can be reclaimed (default 30s). Sealing deletes
	// nothing: the sealed ledger is reclaimed later with the usual proof.
	// For a stream whose retention the core hinted, twice that retention if
	// shorter (idle.go), under the churn floor below.
	IdleSeal time.Duration
	// MinRollAge and MaxRetentionRolls are the churn floor of rollovers
	// done for retention's sake (a retired first run, or a ledger older
	// than half the stream's hinted retention; rollage.go): such a roll
	// waits until the ledger is MinRollAge old (default 1s) and takes one
	// of MaxRetentionRolls tokens per second shared by every stream of the
	// provider (default 100; each roll is a ledger create, seal and, later,
	// delete on ZooKeeper). Without a token the run goes into the current
	// ledger and the roll is retried at the next run.
	MinRollAge        time.Duration
	MaxRetentionRolls float64
	// OpTimeout bounds one ledger lifecycle step (allocate, create, seal,
	// recover) (default 60s).
	OpTimeout time.Duration
	// ReaderCache bounds the ledgers kept open for reads (default 256).
	ReaderCache int
	// Logger receives lifecycle events (default: warnings to stderr).
	Logger *slog.Logger
	// Meter records adds, run latency, ledgers, rollovers and taints
	// (metrics.go); default the global OpenTelemetry meter, a no-op unless
	// the process installed a provider.
	Meter metric.Meter
	// Now is the clock (default time.Now, or Runtime.Now).
	Now func() time.Time
}

func (c *Config) withDefaults() error {
	if c.Ledgers == nil && (c.Client == nil || c.Namespace == nil) || c.Meta == nil || c.WriterID == "" {
		return errors.New("nereus/bkwal: Config.Client, Namespace (or Ledgers), Meta and WriterID are required")
	}
	if c.Ledgers == nil {
		c.Ledgers = realLedgers{c: c.Client, ns: c.Namespace}
	}
	if c.Alias == "" {
		c.Alias = "default"
	}
	if c.EnsembleSize == 0 && c.WriteQuorum == 0 && c.AckQuorum == 0 {
		c.EnsembleSize, c.WriteQuorum, c.AckQuorum = 3, 2, 2
	}
	if c.Password == nil {
		c.Password = []byte("nereus")
	}
	if c.MaxLedgerEntries <= 0 {
		c.MaxLedgerEntries = 100000
	}
	if c.MaxLedgerBytes <= 0 {
		c.MaxLedgerBytes = 512 << 20
	}
	if c.MaxLedgerAge <= 0 {
		c.MaxLedgerAge = time.Hour
	}
	if c.IdleSeal <= 0 {
		c.IdleSeal = 30 * time.Second
	}
	if c.MinRollAge <= 0 {
		c.MinRollAge = time.Second
	}
	if c.MaxRetentionRolls <= 0 {
		c.MaxRetentionRolls = 100
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = 60 * time.Second
	}
	if c.ReaderCache <= 0 {
		c.ReaderCache = 256
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if c.Now == nil {
		c.Now = time.Now
		if c.Runtime != nil {
			c.Now = c.Runtime.Now
		}
	}
	return nil
}

// Provider is the BookKeeper WAL. Safe for concurrent use.
//
// Goroutines: per stream, a lane goroutine submits runs in order (creating
// ledgers as needed; the only place a stream's ledger changes) and a
// completer goroutine waits for them in the same order and calls done, so a
// stream's writes complete in submission order. Seals run on their own
// goroutines. Lock order: Provider.mu, then lane.mu, then ledger.mu.
type Provider struct {
	cfg         Config
	log         *slog.Logger
	incarnation string
	rt          rt
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	running     atomic.Int64 // mirrors wg, for a cooperative runtime's Close

	mu      sync.Mutex
	closed  bool
	lanes   map[uint64]*lane
	ledgers map[int64]*ledger   // ledgers this incarnation created, until finalized
	hints   map[uint64]laneHint // retention hints of streams without a lane yet (rollage.go)
	// hintsPruned: when stale hints were last dropped (pruneHints).
	hintsPruned time.Time

	readers *readerCache
	met     *providerMetrics
	reclaim reclaimState

	rolls     *rate.Limiter // retention rolls' budget (rollage.go)
	unobserve func()

	// Health: degraded from a failed run until the next run succeeds.
	healthMu      sync.Mutex
	degradedSince time.Time
	degradedWhy   string
	recoveries    int64
}

var (
	_ provider.Provider        = (*Provider)(nil)
	_ provider.HealthReporter  = (*Provider)(nil)
	_ provider.RetentionHinter = (*Provider)(nil)
)

// Health implements provider.HealthReporter. A failed run taints its ledger
// and the stream continues in a new one, so there is no halted state to
// recover from: the provider is degraded from a failed run (bookies or
// ZooKeeper unreachable, ack quorum lost) until a run succeeds again.
func (p *Provider) Health() provider.Health {
	p.healthMu.Lock()
	defer p.healthMu.Unlock()
	return provider.Health{Degraded: !p.degradedSince.IsZero(), Reason: p.degradedWhy, Since: p.degradedSince, Recoveries: p.recoveries}
}

func (p *Provider) runOutcome(err error) {
	p.healthMu.Lock()
	defer p.healthMu.Unlock()
	switch {
	case err != nil:
		if p.degradedSince.IsZero() {
			p.degradedSince = p.cfg.Now()
		}
		p.degradedWhy = "BookKeeper writes failing: " + err.Error()
	case !p.degradedSince.IsZero():
		p.degradedSince, p.degradedWhy = time.Time{}, ""
		p.recoveries++
	}
}

// Open starts the provider. It does no I/O; Recover (called by the core)
// takes over earlier incarnations' ledgers.
func Open(cfg Config) (*Provider, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	if a := cfg.Ledgers.Reservation().Alias; a != cfg.Alias {
		return nil, fmt.Errorf("nereus/bkwal: namespace is for cluster alias %q, provider for %q", a, cfg.Alias)
	}
	r := simrt.New(cfg.Runtime)
	inc := incarnationID(r)
	p := &Provider{cfg: cfg, log: cfg.Logger, incarnation: hex.EncodeToString(inc[:]), rt: r,
		lanes: map[uint64]*lane{}, ledgers: map[int64]*ledger{}, hints: map[uint64]laneHint{}}
	// Burst: one second's worth (at least one roll).
	p.rolls = rate.NewLimiter(rate.Limit(cfg.MaxRetentionRolls), int(max(cfg.MaxRetentionRolls, 1)))
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.readers = newReaderCache(cfg.ReaderCache)
	p.met = newProviderMetrics(cfg.Meter)
	p.unobserve = p.observeOpenLedgers(cfg.Meter)
	return p, nil
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

func (p *Provider) prefix() string { return "bkwal/" + p.cfg.Alias }
func (p *Provider) writerPrefix(writer string) string {
	return p.prefix() + "/w/" + writer + "/"
}
func (p *Provider) recordKey(id int64) string {
	return p.writerPrefix(p.cfg.WriterID) + fmt.Sprintf("%020d", id)
}
func (p *Provider) pointerKey(stream uint64) string {
	return p.prefix() + "/s/" + fmt.Sprintf("%016x", stream)
}

// Write implements provider.Provider. It never blocks: the run is queued on
// the stream's lane.
func (p *Provider) Write(run provider.Run, done func(provider.Target, error)) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		done(nil, ErrClosed)
		return
	}
	l := p.lanes[run.Stream]
	if l == nil {
		l = newLane(p, run.Stream)
		l.retention.Store(p.hints[run.Stream].retention)
		delete(p.hints, run.Stream)
		p.lanes[run.Stream] = l
		p.spawn(l.submitLoop)
		p.spawn(l.completeLoop)
	}
	p.mu.Unlock()
	l.enqueue(&pendingRun{run: run, done: done})
}

// pendingRun is one run on its way through a lane.
type pendingRun struct {
	run  provider.Run
	done func(provider.Target, error)
	led  *ledger
	futs []AddFuture
	crc  uint32
	err  error
	// bytes and sent (when the first entry went out) feed the metrics.
	bytes int64
	sent  time.Time
}

// lane serialises one stream's runs.
type lane struct {
	p      *Provider
	stream uint64

	mu        sync.Mutex
	queue     []*pendingRun // submitted, not yet sent
	completes []*pendingRun // sent (or failed), not yet completed
	stopped   bool
	roll      *rollRequest // an idle seal asked for by Reclaim
	retention atomic.Int64 // the stream's hinted time retention in ns (0: none; rollage.go)
	wakeSub   chan struct{}
	wakeComp  chan struct{}
	subDone   chan struct{}

	// Lane goroutine only.
	cur          *ledger
	epoch, token uint64
	haveSession  bool
}

func newLane(p *Provider, stream uint64) *lane {
	return &lane{p: p, stream: stream, wakeSub: make(chan struct{}, 1), wakeComp: make(chan struct{}, 1),
		subDone: make(chan struct{})}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (l *lane) enqueue(pr *pendingRun) {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		pr.done(nil, ErrClosed)
		return
	}
	l.queue = append(l.queue, pr)
	l.mu.Unlock()
	signal(l.wakeSub)
}

func (l *lane) complete(pr *pendingRun) {
	l.mu.Lock()
	l.completes = append(l.completes, pr)
	l.mu.Unlock()
	signal(l.wakeComp)
}

// stop refuses new runs and fails the queued ones.
func (l *lane) stop() {
	l.mu.Lock()
	l.stopped = true
	q := l.queue
	l.queue = nil
	l.mu.Unlock()
	for _, pr := range q {
		pr.err = ErrClosed
		l.complete(pr)
	}
	signal(l.wakeSub)
}

func (l *lane) submitLoop() {
	defer close(l.subDone)
	for {
		l.mu.Lock()
		for len(l.queue) == 0 && !l.stopped && l.roll == nil {
			l.mu.Unlock()
			if l.p.rt.Coop() {
				// A fixed choice of the select below: the provider's
				// end first, then the lane's wake-up.
				l.p.rt.Block(func() bool { return l.p.ctx.Err() != nil || l.hasWork() })
				if l.p.ctx.Err() != nil {
					l.stop()
					return
				}
				select {
				case <-l.wakeSub:
				default:
				}
			} else {
				select {
				case <-l.wakeSub:
				case <-l.p.ctx.Done():
					l.stop()
					return
				}
			}
			l.mu.Lock()
		}
		if roll := l.roll; roll != nil {
			l.roll = nil
			l.mu.Unlock()
			l.idleRoll(roll)
			continue
		}
		if len(l.queue) == 0 {
			l.mu.Unlock()
			return
		}
		pr := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		l.mu.Unlock()
		l.submit(pr)
		l.complete(pr)
	}
}

// submit writes one run (lane goroutine). On return pr is ready for the
// completer: pr.err is set, or pr.futs holds one future per entry.
func (l *lane) submit(pr *pendingRun) {
	p := l.p
	run := pr.run
	if len(run.Entries) == 0 {
		pr.err = fmt.Errorf("nereus/bkwal: empty run")
		return
	}
	// Sessions only move forward on a stream: a run of an older one is a
	// stale completion of a fenced writer and taints nothing new.
	if l.haveSession && (run.Epoch < l.epoch || (run.Epoch == l.epoch && run.Token != l.token)) {
		pr.err = fmt.Errorf("%w: stream %016x epoch %d, current %d", ErrStaleSession, l.stream, run.Epoch, l.epoch)
		return
	}
	frames := make([][]byte, len(run.Entries))
	var bytes int64
	off := run.Start
	for i, e := range run.Entries {
		frames[i] = appendEntryFrame(make([]byte, 0, len(e.Payload)+48), entryHeader{
			stream: run.Stream, epoch: run.Epoch, token: run.Token, commit: run.Commit,
			index: uint64(i), count: uint64(len(run.Entries)), offset: off, recordCount: e.RecordCount, timestamp: e.Timestamp,
		}, e.Payload)
		off += int64(e.RecordCount)
		bytes += int64(len(frames[i]))
	}
	if l.cur != nil {
		if limit := l.cur.w.MaxEntrySize(); anyLonger(frames, limit) {
			pr.err = fmt.Errorf("%w: limit %d bytes", ErrEntryTooLarge, limit)
			return
		}
	}
	if reason := l.needRollover(run, int64(len(frames)), bytes); reason != "" {
		if l.cur != nil {
			p.met.rollover(strings.ReplaceAll(reason, " ", "_"))
			p.log.Info("bkwal: rolling over", "stream", fmt.Sprintf("%016x", l.stream), "ledger", l.cur.id, "reason", reason)
			p.seal(l.cur)
			l.cur = nil
		}
		ctx, cancel := p.rt.WithTimeout(p.ctx, p.cfg.OpTimeout)
		led, err := p.openLedger(ctx, run.Stream, run.Epoch, run.Token)
		cancel()
		if err != nil {
			pr.err = err
			return
		}
		l.cur, l.epoch, l.token, l.haveSession = led, run.Epoch, run.Token, true
		if limit := led.w.MaxEntrySize(); anyLonger(frames, limit) {
			pr.err = fmt.Errorf("%w: limit %d bytes", ErrEntryTooLarge, limit)
			return
		}
	}
	led := l.cur
	pr.led = led
	led.runStarted(int64(len(frames)), bytes, p.cfg.Now())
	pr.bytes, pr.sent = bytes, p.cfg.Now()
	crc := uint32(0)
	for _, f := range frames {
		fut, err := led.w.AppendAsync(p.ctx, f)
		if err != nil {
			// Nothing of this entry was sent; earlier ones were: the run
			// fails and the ledger's tail is never reused.
			if led.taint("append refused: " + err.Error()) {
				p.met.tainted("append_refused")
			}
			pr.err = fmt.Errorf("nereus/bkwal: ledger %d: %w", led.id, err)
			return
		}
		pr.futs = append(pr.futs, fut)
		crc = crc32.Update(crc, castagnoli, f)
	}
	pr.crc = crc
}

func anyLonger(frames [][]byte, limit int) bool {
	for _, f := range frames {
		if len(f) > limit {
			return true
		}
	}
	return false
}

// needRollover says why the run cannot go into the current ledger ("" if
// it can).
func (l *lane) needRollover(run provider.Run, entries, bytes int64) string {
	c := l.cur
	switch {
	case c == nil:
		return "no ledger"
	case c.epoch != run.Epoch || c.token != run.Token:
		return "new append session"
	case c.isTainted():
		return "tainted"
	}
	ne, nb := c.size()
	if ne == 0 {
		return "" // an empty ledger takes any run: a run is never split
	}
	now := l.p.cfg.Now()
	switch {
	case ne+entries > l.p.cfg.MaxLedgerEntries:
		return "entry limit"
	case nb+bytes > l.p.cfg.MaxLedgerBytes:
		return "byte limit"
	case now.Sub(c.created) > l.p.cfg.MaxLedgerAge:
		return "age limit"
	}
	// For retention's sake, within the churn floor (rollage.go).
	if why := l.retentionRollDue(c, now); why != "" {
		if l.p.takeRetentionRoll(now) {
			return why
		}
		l.p.met.rollsDeferred.Add(bg, 1)
	}
	return ""
}

func (l *lane) completeLoop() {
	p := l.p
	for {
		l.mu.Lock()
		for len(l.completes) == 0 {
			l.mu.Unlock()
			p.rt.Wait(func() bool { return l.hasCompletes() || simrt.IsClosed(l.subDone) })
			// A fixed choice under a cooperative runtime: the wake-up
			// first (a completion queued), else the lane's end.
			select {
			case <-simrt.Only(p.rt, l.wakeComp, l.hasCompletes()):
			case <-simrt.Only(p.rt, l.subDone, !l.hasCompletes()):
				l.mu.Lock()
				if len(l.completes) == 0 {
					l.mu.Unlock()
					return
				}
				l.mu.Unlock()
			}
			l.mu.Lock()
		}
		pr := l.completes[0]
		l.completes[0] = nil
		l.completes = l.completes[1:]
		l.mu.Unlock()

		// (Planted bug BugAckBeforeQuorum: the run is reported durable once
		// every entry was sent, without waiting for the ack quorum.)
		if pr.err == nil && PlantedBug != BugAckBeforeQuorum {
			for _, f := range pr.futs {
				p.rt.Wait(func() bool { return simrt.IsClosed(f.Done()) })
				if err := f.Err(); err != nil {
					if pr.led.taint("add failed: " + err.Error()) {
						p.met.tainted("add_failed")
					}
					pr.err = fmt.Errorf("nereus/bkwal: ledger %d entry %d: %w", pr.led.id, f.EntryID(), err)
					break
				}
			}
		}
		if pr.err != nil {
			p.met.failedRuns.Add(bg, 1)
			if pr.led != nil {
				pr.led.runFinished(false, 0, 0)
				p.maybeFinalize(pr.led)
			}
			p.runOutcome(pr.err)
			pr.done(nil, pr.err)
			continue
		}
		t := target{alias: p.cfg.Alias, ledger: pr.led.id, first: pr.futs[0].EntryID(), count: int64(len(pr.futs)),
			stream: pr.run.Stream, epoch: pr.run.Epoch, token: pr.run.Token, commit: pr.run.Commit, rangeCRC: pr.crc}
		if unitRecords(pr.run) {
			t.flags |= flagUnitRecords
		}
		pr.led.runFinished(true, pr.run.Commit, pr.run.End())
		p.met.runDone(int64(len(pr.futs)), pr.bytes, pr.sent)
		p.runOutcome(nil)
		pr.done(t.encode(), nil)
	}
}

func unitRecords(run provider.Run) bool {
	for _, e := range run.Entries {
		if e.RecordCount != 1 {
			return false
		}
	}
	return true
}

// Read implements provider.Provider.
func (p *Provider) Read(ctx context.Context, tgt provider.Target, runStart, from int64, maxBytes int) ([]provider.ReadEntry, error) {
	t, err := decodeTarget(tgt)
	if err != nil {
		return nil, err
	}
	if t.alias != p.cfg.Alias {
		return nil, fmt.Errorf("nereus/bkwal: target of BookKeeper cluster %q, this provider serves %q", t.alias, p.cfg.Alias)
	}
	r, err := p.reader(ctx, t.ledger)
	if err != nil {
		return nil, err
	}
	skip := int64(0)
	if t.flags&flagUnitRecords != 0 && from > runStart {
		skip = min(from-runStart, t.count-1)
	}
	var out []provider.ReadEntry
	size := 0
	crc := uint32(0)
	i := skip
	full := true
	for i < t.count {
		n := min(int64(16), t.count-i)
		ents, err := r.ReadUnconfirmed(ctx, t.first+i, t.first+i+n-1)
		if err != nil {
			switch {
			case errors.Is(err, bookkeeper.ErrCorrupt):
				return nil, fmt.Errorf("%w: ledger %d: %w", provider.ErrCorrupt, t.ledger, err)
			case errors.Is(err, bookkeeper.ErrNoEntry), errors.Is(err, bookkeeper.ErrInvalidArgument):
				return nil, fmt.Errorf("%w: ledger %d entries %d..%d: %w", provider.ErrNotFound, t.ledger, t.first+i, t.first+i+n-1, err)
			}
			return nil, err
		}
		for k, e := range ents {
			h, payload, err := parseEntryFrame(e.Payload)
			if err != nil {
				return nil, fmt.Errorf("ledger %d entry %d: %w", t.ledger, e.EntryID, err)
			}
			if h.stream != t.stream || h.epoch != t.epoch || h.token != t.token || h.commit != t.commit ||
				h.index != uint64(i)+uint64(k) || h.count != uint64(t.count) || (h.index == 0 && h.offset != runStart) {
				return nil, fmt.Errorf("%w: ledger %d entry %d does not belong to the target's run", provider.ErrCorrupt, t.ledger, e.EntryID)
			}
			crc = crc32.Update(crc, castagnoli, e.Payload)
			if h.offset+int64(h.recordCount) <= from {
				continue
			}
			if len(out) > 0 && size+len(payload) > maxBytes {
				full = false
				break
			}
			out = append(out, provider.ReadEntry{Offset: h.offset, RecordCount: h.recordCount, Timestamp: h.timestamp, Payload: payload})
			size += len(payload)
		}
		if !full {
			break
		}
		i += n
	}
	if skip == 0 && full && crc != t.rangeCRC {
		return nil, fmt.Errorf("%w: ledger %d entries %d..%d fail the run's range checksum", provider.ErrCorrupt, t.ledger, t.first, t.first+t.count-1)
	}
	return out, nil
}

// Release implements provider.Provider.
func (p *Provider) Release(tgt provider.Target, committed bool) {
	t, err := decodeTarget(tgt)
	if err != nil {
		return
	}
	p.mu.Lock()
	led := p.ledgers[t.ledger]
	p.mu.Unlock()
	if led == nil {
		return
	}
	led.released(t.commit, committed)
	p.maybeFinalize(led)
}

// Close implements provider.Provider: queued runs fail, sent runs complete
// (or fail) as their ledgers are sealed, and every ledger this incarnation
// wrote is sealed. Ledgers whose runs the core has not all released stay
// in the registry for the next incarnation's Recover.
func (p *Provider) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	lanes := make([]*lane, 0, len(p.lanes))
	for _, l := range p.lanes {
		lanes = append(lanes, l)
	}
	p.mu.Unlock()
	// Map order is random; a fixed one lets a simulated Close replay.
	slices.SortFunc(lanes, func(a, b *lane) int { return cmp.Compare(a.stream, b.stream) })
	for _, l := range lanes {
		l.stop()
	}
	for _, l := range lanes {
		p.rt.Wait(func() bool { return simrt.IsClosed(l.subDone) || ctx.Err() != nil })
		select {
		case <-simrt.Only(p.rt, l.subDone, simrt.IsClosed(l.subDone)):
		case <-simrt.Only(p.rt, ctx.Done(), !simrt.IsClosed(l.subDone)):
		}
	}
	p.mu.Lock()
	leds := make([]*ledger, 0, len(p.ledgers))
	for _, led := range p.ledgers {
		leds = append(leds, led)
	}
	p.mu.Unlock()
	slices.SortFunc(leds, func(a, b *ledger) int { return cmp.Compare(a.id, b.id) })
	for _, led := range leds {
		p.seal(led)
	}
	var err error
	if p.rt.Coop() {
		// The wait group, mirrored by a counter a cooperative runtime
		// can poll (a goroutine waiting on wg would be outside it).
		p.rt.Block(func() bool { return p.running.Load() == 0 || ctx.Err() != nil })
		if p.running.Load() != 0 {
			err = fmt.Errorf("nereus/bkwal: close: %w", ctx.Err())
		}
	} else {
		done := make(chan struct{})
		go func() { p.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = fmt.Errorf("nereus/bkwal: close: %w", ctx.Err())
		}
	}
	p.cancel()
	p.readers.close()
	p.unobserve()
	return err
}

// ledgerTags are the custom metadata of a ledger of (stream, session).
func ledgerTags(stream, epoch, token uint64) map[string][]byte {
	return map[string][]byte{
		StreamKey:  []byte(fmt.Sprintf("%016x", stream)),
		SessionKey: []byte(strconv.FormatUint(epoch, 10) + "/" + strconv.FormatUint(token, 16)),
	}
}

// Reservation returns the namespace reservation the provider allocates from.
func (p *Provider) Reservation() namespace.Reservation { return p.cfg.Ledgers.Reservation() }

// spawn runs f as one of the provider's goroutines (through the runtime).
func (p *Provider) spawn(f func()) {
	p.wg.Add(1)
	p.running.Add(1)
	p.rt.Go(func() {
		defer p.running.Add(-1)
		defer p.wg.Done()
		f()
	})
}

func (l *lane) hasWork() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue) > 0 || l.stopped || l.roll != nil
}

func (l *lane) hasCompletes() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.completes) > 0
}
