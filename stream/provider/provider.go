// Package provider is the contract between the stream core and a primary WAL
// (the Object WAL on package wal, the BookKeeper WAL): how a run of one
// stream's entries becomes durable bytes, and how committed runs are read
// back.
//
// A provider owns physical bytes only. It must never decide logical
// visibility: a Write that completed is durable, not committed; the core
// commits it by a head CAS and may still discard it (fencing, an earlier
// failure of the same stream). A provider must never reinterpret offsets: it
// stores the run's first offset and each entry's record count so reads can
// report offsets, nothing more.
package provider

import (
	"context"
	"errors"
	"time"
)

// Entry is one protocol entry as stored: a payload covering RecordCount
// consecutive offsets, with its maximum event time.
type Entry struct {
	Payload     []byte
	RecordCount uint32
	Timestamp   int64
}

// Run is a contiguous run of one stream's entries written under one append
// session: entry i covers offsets starting at Start + sum(RecordCount[0:i]).
type Run struct {
	Stream uint64
	// Epoch and Token identify the append session that wrote the run.
	Epoch uint64
	Token uint64
	// Commit numbers the run within its session (1, 2, ...); with Epoch and
	// Token it identifies the run uniquely across the stream's history.
	Commit  uint64
	Start   int64
	Entries []Entry
}

// End is the exclusive end offset of the run.
func (r Run) End() int64 {
	end := r.Start
	for _, e := range r.Entries {
		end += int64(e.RecordCount)
	}
	return end
}

// Target is a provider-encoded physical location of a durable run (segment
// and byte range, ledger and entry range). The core stores it in its commit
// descriptors without interpreting it.
type Target []byte

// ReadEntry is one entry read back with the offset of its first record.
type ReadEntry struct {
	Offset      int64
	RecordCount uint32
	Timestamp   int64
	Payload     []byte
}

// Intent is a run a previous incarnation of this provider made durable whose
// commit the core must settle before the provider reclaims it.
type Intent struct {
	Run    Run // Entries carry RecordCount only (no payloads), so Run.End works
	Target Target
}

// ErrCorrupt marks stored bytes that failed their checksum.
var ErrCorrupt = errors.New("nereus/provider: stored data failed its checksum")

// ErrNotFound marks a target whose bytes no longer exist.
var ErrNotFound = errors.New("nereus/provider: target not found")

// ErrIncompleteScan marks a Scanner.ScanRuns that visited every unit it
// could read but had to skip some it could not.
var ErrIncompleteScan = errors.New("nereus/provider: scan incomplete: some stored units could not be read")

// Provider is a primary WAL.
type Provider interface {
	// Name identifies the provider kind in targets and logs ("objectwal",
	// "bookkeeper").
	Name() string
	// Write makes the run durable and calls done exactly once with its target
	// or an error. Writes of one stream complete in submission order. done
	// may run on a provider goroutine and must not block. Write itself may
	// block for backpressure (the Object WAL's write queue and in-flight
	// budget), so the core never calls Write from inside a done: capacity
	// the calling goroutine alone frees would never come (the core hands
	// such follow-up writes to a goroutine of its own).
	Write(run Run, done func(Target, error))
	// Read returns the run's entries whose range ends after `from`, in
	// order, stopping once maxBytes of payload have been gathered (at least
	// one entry is always returned). runStart is the run's first offset.
	Read(ctx context.Context, target Target, runStart, from int64, maxBytes int) ([]ReadEntry, error)
	// Recover lists intents left by earlier incarnations (e.g. a crashed
	// process with the same broker identity) and, for each, asks settle
	// whether it is committed. Once every intent is settled the provider may
	// forget the uncommitted ones. It is called once at start-up, after the
	// provider fenced its predecessors.
	Recover(ctx context.Context, settle func(ctx context.Context, in Intent) (committed bool, err error)) error
	// Release tells the provider the core has settled a run it wrote
	// successfully: committed (the offset index references the target from
	// now on) or not committed (its bytes are garbage). It is called at most
	// once per successful Write, never for runs whose outcome the core could
	// not settle (those stay intents for the next incarnation's Recover).
	// Providers use it to truncate their own intent logs and to reclaim
	// space; it must not block.
	Release(target Target, committed bool)
	// Close stops the provider; pending writes fail.
	Close(ctx context.Context) error
}

// Health is what a provider knows about its ability to make writes durable.
type Health struct {
	// Degraded is set while writes fail for a cause that outlives one
	// request (a full disk, an unreachable object store or bookie quorum,
	// the WAL re-claiming its log). Reads of committed runs may still work.
	Degraded bool
	// Reason says why, for operators (empty when not degraded).
	Reason string
	// Since is when the current degraded period began (zero when healthy).
	Since time.Time
	// Recoveries counts the degraded periods that have ended.
	Recoveries int64
}

// HealthReporter is implemented by providers that can tell when they are
// degraded. It must be cheap and never block on I/O.
type HealthReporter interface {
	Health() Health
}

// Scanner is implemented by providers whose stored bytes describe the runs
// they hold (identity and offsets), so the core can rebuild its offset index
// from them if index entries are lost. ScanRuns calls fn for every run it
// finds, committed or not — deciding which ones are committed is the core's
// job. Entry payloads passed to fn are only valid during the call.
//
// A unit that cannot be read (corrupt, unreadable) does not stop the scan:
// ScanRuns skips it, goes on with the others, and then returns an error
// wrapping ErrIncompleteScan. The runs it reported are then not all the
// runs stored — the missing unit may hold the run that beats one of them —
// so the caller must not decide anything from their absence.
type Scanner interface {
	ScanRuns(ctx context.Context, fn func(run Run, target Target) error) error
}

// RunRef names a settled run a physical unit (a segment, a ledger) holds:
// its identity and offsets. Committed is true when the provider knows the
// core committed it (the core released it as committed); false means the
// provider does not know, and the core looks it up.
type RunRef struct {
	Stream               uint64
	Epoch, Token, Commit uint64
	Start, End           int64
	Committed            bool
}

// Verdict is the core's judgement of one settled run.
type Verdict uint8

const (
	// RunNeeded: the run is committed and still readable (not trimmed, not
	// yet served by a generation) or a reader protection may still use it.
	// Keep its bytes.
	RunNeeded Verdict = iota + 1
	// RunRetired: proven unneeded — trimmed, served by a published
	// generation, of a deleted stream, or never committed — and no
	// protection needs it.
	RunRetired
)

// Judge decides, for settled runs, whether the core still needs their
// bytes; verdicts are in run order. An error means the question is open
// (a store did not answer): keep everything.
type Judge func(ctx context.Context, runs []RunRef) ([]Verdict, error)

// ReclaimOptions configures one physical-GC pass.
type ReclaimOptions struct {
	// Grace: a unit is deleted only once it has been found all-retired for
	// at least this long (measured in this process, so it restarts with
	// the process).
	Grace time.Duration
	// DryRun reports instead of deleting.
	DryRun bool
	// Now is the pass's clock reading as it starts (a DueOnly pass picks
	// the units whose grace has ended by Now).
	Now time.Time
	// Clock reads the pass's clock again (nil: Now). A unit's grace period
	// starts at a reading taken once the judge call that first found it
	// retired has returned (JudgedAt), not at Now: a trim that commits
	// after Now but before the judge reads the heads would otherwise get a
	// grace shorter by that gap (the rediscovery reads, the judge, and an
	// earlier provider's whole pass when providers share one options
	// value).
	Clock func() time.Time
	// DueOnly asks for a pass over just the units an earlier pass found
	// retired whose grace period has ended by Now: each is judged again
	// (fresh verdicts, protections included) and deleted if it is still
	// retired, exactly as a full pass would. A provider may run a full
	// pass instead, or — if it never reports NextDue — do nothing.
	DueOnly bool
}

// JudgedAt is the clock reading a provider takes right after a judge call
// returns: the start of the grace period of the units that call found
// retired for the first time, and the moment their grace is measured to.
func (o ReclaimOptions) JudgedAt() time.Time {
	if o.Clock == nil {
		return o.Now
	}
	return o.Clock()
}

// PendingUnit is a physical unit a pass kept, and why.
type PendingUnit struct {
	Unit   string // segment key, "ledger <id>"
	Bytes  int64  // size when known
	Reason string
}

// ReclaimReport says what one pass did.
type ReclaimReport struct {
	Units        int // physical units considered
	Deleted      int
	DeletedBytes int64
	// DeletedUnits lists the units deleted (the audit trail).
	DeletedUnits []PendingUnit
	Errors       int
	// Pending lists (up to a bound) units kept, with the reason.
	Pending []PendingUnit
	// PendingCount and PendingBytes total every kept unit.
	PendingCount int
	PendingBytes int64
	// GraceBytes is the part of PendingBytes held only by the grace
	// period: units every run of which is retired and no protection needs.
	GraceBytes int64
	// NextDue, when not zero, is the earliest moment after Now at which
	// the grace period of a unit found retired ends (the core wakes a
	// DueOnly pass then instead of waiting for its next interval). A
	// provider that does not track it leaves it zero.
	NextDue time.Time
}

// Reclaimer is implemented by providers that delete the bytes of committed
// runs once the core proves them unneeded (physical GC). Reclaim runs one
// pass: every unit whose runs are all settled is judged; a unit all of
// whose runs are RunRetired, found so for at least Grace, is deleted.
// It must never delete a unit holding an unsettled run or a run judged
// RunNeeded, and never guess when the judge errs.
type Reclaimer interface {
	Reclaim(ctx context.Context, judge Judge, opts ReclaimOptions) (ReclaimReport, error)
}

// Adopter is implemented by providers whose physical sources belong to a
// writer identity (the Object WAL's log, the BookKeeper WAL's ledger
// registry). Physical GC reclaims only the sources of the process's own
// identity; when another writer's node is gone for good, one live node
// adopts that writer's sources so they are not left behind forever.
type Adopter interface {
	// Writers lists the writer identities that own sources of this
	// provider in the shared stores (this process's own included). A
	// listing only nominates: adopting proves nothing by itself.
	Writers(ctx context.Context) ([]string, error)
	// Adopt opens writer's sources for recovery and physical GC only,
	// taking over the writer's claim through the provider's normal
	// fencing path (a new log epoch, recovery-open of ledgers), so the
	// writer — were it still alive — can no longer make a run durable
	// there. The result never accepts runs: the core calls its Recover
	// (settling every run the writer left unsettled, fencing its sessions
	// where needed), then Reclaim on every GC pass, with the same
	// per-source proof as for its own sources, and Close once nothing is
	// left or the adoption ends.
	Adopt(ctx context.Context, writer string) (Adopted, error)
}

// Adopted is another writer's sources, opened by Adopter.Adopt.
type Adopted interface {
	Reclaimer
	Recover(ctx context.Context, settle func(ctx context.Context, in Intent) (committed bool, err error)) error
	Close(ctx context.Context) error
}

// RetentionHinter is implemented by providers whose physical units would
// otherwise hold a stream's bytes much longer than its retention: a unit is
// reclaimed whole, so one that spans more than the retention keeps retired
// bytes until its newest run is retired too. The core calls HintRetention
// for the streams it owns as it enforces retention (every retention pass,
// and with 0 once a stream has no time retention), so a provider can bound
// how long one unit takes a stream's runs.
//
// A hint is advisory and shapes layout only: it never retires anything (the
// Judge alone decides what is unneeded) and a provider may ignore it. It
// must be cheap and must not block: the core calls it for every owned
// stream on every pass.
type RetentionHinter interface {
	HintRetention(stream uint64, timeRetention time.Duration)
}
