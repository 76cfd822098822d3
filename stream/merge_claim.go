package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/metadata"
)

// Merge claims: one merge of a stream at a time, across processes.
//
// A merge publishes by one conditional write of its last source's record
// (key b, merge.go). Two merges of different processes whose windows
// overlap but end at different keys would both pass that condition: a plan
// made before another process's merge published, carried out after it,
// does not see that its middle sources are gone (seed 3184 of the
// simulation published [7,26) and [5,25) of one stream). A claim record
// per stream, s/m/<id>, makes merges exclusive with single-key CAS steps
// only:
//
//   - A merge task first writes the claim — create-only, or conditional on
//     the version of a stale claim it takes over — naming its window
//     [a, b) and the version of key b its publication is conditioned on.
//     Then it checks that its sources are unchanged: every source record
//     still at its planned version and nothing else indexed inside [a, b).
//     A stale plan is refused here.
//   - It releases the claim (a delete conditional on the claim's version)
//     only once its outcome is settled: published and every other source
//     retired, or provably not published. So at most one merge of a stream
//     is ever unfinished — the one the claim names — and a merge that
//     checks its sources under the claim sees every earlier merge whole
//     (its last source replaced, the others deleted), which is why the
//     check above suffices.
//   - A claim is stale once it is older than a task may run (taskTimeout,
//     plus LeaseSkew for the clocks of two processes), or at once when an
//     earlier task of this very process holds it (none is running: the
//     materializer runs one task per stream). Taking a stale claim over
//     first settles the holder's publication: the record at its key b is
//     read; still at the claimed version it is rewritten with its own value
//     (fenced: a version bump, so the holder's conditional write can never
//     apply; a conflict or unknown outcome is settled by reading the version
//     again); at another version the holder may have published, and every
//     record inside its window that the record at b covers is retired (the
//     holder's unfinished last step). Only then is the claim replaced.
//
// Clocks decide only when a claim may be taken over, never whether two
// merges publish: a clock that runs ahead makes a taker-over fence a live
// merge, which then is not published (its object is deleted, or left to
// the orphan sweep).

const (
	mergeClaimKeyPrefix = "s/m/"
	mergeClaimV1        = 1
)

func mergeClaimKey(id ID) string { return mergeClaimKeyPrefix + id.String() }

// mergeClaim is the value of s/m/<id>.
type mergeClaim struct {
	// Holder is the claiming process's writer tag (writer ID and
	// incarnation); Nonce tells its claims apart (an unknown claim write is
	// proven by reading the record back).
	Holder string
	Nonce  uint64
	// Start, End: the window [Start, End); the publication is a write of
	// the record at genKey(End) conditional on LastVersion.
	Start, End  int64
	LastVersion metadata.Version
	SinceMs     int64
}

func (m mergeClaim) encode() []byte {
	w := bin.Writer{}
	w.U8(mergeClaimV1)
	w.String(m.Holder)
	w.U64(m.Nonce)
	w.Varint(m.Start)
	w.Varint(m.End)
	w.Varint(int64(m.LastVersion))
	w.Varint(m.SinceMs)
	return w.Seal()
}

func decodeMergeClaim(b []byte) (mergeClaim, error) {
	body, err := bin.Open(b)
	if err != nil {
		return mergeClaim{}, fmt.Errorf("%w: merge claim: %w", ErrCorrupt, err)
	}
	r := bin.Reader{B: body}
	if v := r.U8(); v != mergeClaimV1 {
		return mergeClaim{}, fmt.Errorf("%w: merge claim version %d", ErrCorrupt, v)
	}
	m := mergeClaim{Holder: r.String(), Nonce: r.U64(), Start: r.Varint(), End: r.Varint(),
		LastVersion: metadata.Version(r.Varint()), SinceMs: r.Varint()}
	if err := r.Done(); err != nil || m.End <= m.Start {
		return mergeClaim{}, fmt.Errorf("%w: merge claim", ErrCorrupt)
	}
	return m, nil
}

// heldClaim is a claim this task wrote.
type heldClaim struct {
	version metadata.Version
}

// claimTTL is how old a claim must be before another process takes it
// over: a task's context ends after taskTimeout.
func (c *Core) claimTTL() time.Duration {
	return taskTimeout(c.cfg.Lifecycle) + c.cfg.Lifecycle.LeaseSkew
}

// claimMerge claims stream id's merges for the window srcs. It returns nil
// (and no error) when another live merge holds the claim or the claim
// moved while it was being taken: the next GC pass plans again.
func (c *Core) claimMerge(ctx context.Context, id ID, srcs []mergeSource) (*heldClaim, error) {
	last := srcs[len(srcs)-1]
	me := c.writerTag(c.cfg.WriterID)
	want := mergeClaim{Holder: me, Nonce: c.rt.random(), Start: srcs[0].d.Start, End: last.d.End,
		LastVersion: last.version, SinceMs: c.nowMs()}
	val := want.encode()
	key := mergeClaimKey(id)
	expected := metadata.NotExists
	rec, err := c.meta.Get(ctx, key)
	switch {
	case errors.Is(err, metadata.ErrKeyNotFound):
	case err != nil:
		return nil, err
	default:
		cl, err := decodeMergeClaim(rec.Value)
		if err != nil {
			// Without its window the holder's publication cannot be
			// fenced: merges of this stream stop until an operator looks.
			return nil, err
		}
		if cl.Holder != me && time.Duration(c.nowMs()-cl.SinceMs)*time.Millisecond < c.claimTTL() {
			return nil, nil // a live merge
		}
		if err := c.settleStaleClaim(ctx, id, cl); err != nil {
			return nil, err
		}
		expected = rec.Version
	}
	v, err := c.meta.Put(ctx, key, val, expected)
	switch metadata.Classify(err) {
	case metadata.Applied:
		return &heldClaim{version: v}, nil
	case metadata.NotApplied, metadata.Conflict:
		return nil, nil
	}
	// Unknown: ours only if the record shows it. A write that applies
	// later leaves a claim of this process that its next task takes over.
	if rec, gerr := c.meta.Get(ctx, key); gerr == nil && bytes.Equal(rec.Value, val) {
		return &heldClaim{version: rec.Version}, nil
	}
	return nil, fmt.Errorf("%w: merge claim of %v: %w", ErrCommitUnknown, id, err)
}

// releaseMergeClaim deletes the claim if it is still the one held. A
// failure leaves it for this process's next task (or, after the TTL,
// another process) to take over.
func (c *Core) releaseMergeClaim(ctx context.Context, id ID, hc *heldClaim) {
	_ = c.meta.Delete(ctx, mergeClaimKey(id), hc.version)
}

// settleStaleClaim makes the publication of stale claim cl impossible, or
// finishes it if it happened (see the top of this file).
func (c *Core) settleStaleClaim(ctx context.Context, id ID, cl mergeClaim) error {
	key := genKey(id, cl.End)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if attempt == 5 {
				return fmt.Errorf("%w: fencing the stale merge claim of %v at %s", ErrCommitUnknown, id, key)
			}
			if err := c.rt.sleep(ctx, unknownBackoff); err != nil {
				return err
			}
		}
		rec, err := c.meta.Get(ctx, key)
		if errors.Is(err, metadata.ErrKeyNotFound) {
			// Retired or trimmed: a write conditional on a version of an
			// absent key never applies (versions are never reused).
			return nil
		}
		if err != nil {
			continue
		}
		if rec.Version != cl.LastVersion {
			return c.finishStaleMerge(ctx, id, cl, rec)
		}
		// Still the last source's version: fence it with its own value.
		// Applied, conflict or unknown, the next read tells.
		if _, err := c.meta.Put(ctx, key, rec.Value, cl.LastVersion); err == nil {
			c.log.Debug("stale merge claim fenced", "stream", id, "start", cl.Start, "end", cl.End)
			return nil
		}
	}
}

// finishStaleMerge retires the records inside stale claim cl's window that
// the record at its end covers: all of them if the claim's merge published
// there, none otherwise.
func (c *Core) finishStaleMerge(ctx context.Context, id ID, cl mergeClaim, at metadata.Record) error {
	d, err := decodeIndexRecord(at.Value)
	if err != nil {
		return fmt.Errorf("generation record %s: %w", at.Key, err)
	}
	recs, err := c.meta.RangeScan(ctx, genKey(id, cl.Start+1), at.Key, 0)
	if err != nil {
		return err
	}
	// Highest first (see mergeGenerations): reads never meet a gap.
	for k := len(recs) - 1; k >= 0; k-- {
		r := recs[k]
		rd, err := decodeIndexRecord(r.Value)
		if err != nil {
			return fmt.Errorf("generation record %s: %w", r.Key, err)
		}
		if rd.Start < d.Start {
			continue
		}
		if err := c.retireMergedSource(ctx, id, mergeSource{key: r.Key, version: r.Version, d: rd}); err != nil {
			return err
		}
	}
	return nil
}

// mergeSourcesUnchanged reports whether the records with ends inside the
// window of srcs are exactly srcs at their planned versions (checked under
// the claim: no other merge can change them any more).
func (c *Core) mergeSourcesUnchanged(ctx context.Context, id ID, srcs []mergeSource) (bool, error) {
	a, b := srcs[0].d.Start, srcs[len(srcs)-1].d.End
	recs, err := c.meta.RangeScan(ctx, genKey(id, a+1), genKey(id, b+1), len(srcs)+1)
	if err != nil {
		return false, err
	}
	if len(recs) != len(srcs) {
		return false, nil
	}
	for i, r := range recs {
		if r.Key != srcs[i].key || r.Version != srcs[i].version {
			return false, nil
		}
	}
	return true, nil
}

// retireMergedSource journals a merged source's object and deletes its
// record; unlike retireGenRecord it succeeds only when the record is gone
// (a merge releases its claim only then).
func (c *Core) retireMergedSource(ctx context.Context, id ID, s mergeSource) error {
	if err := c.journalGeneration(ctx, id, s.d, "superseded by a merged generation"); err != nil {
		return err
	}
	err := c.meta.Delete(ctx, s.key, s.version)
	switch {
	case err == nil:
		c.lc.gcRecords.Add(1)
		return nil
	case errors.Is(err, metadata.ErrKeyNotFound):
		return nil
	}
	return fmt.Errorf("retiring merged source %s: %w", s.key, err)
}

// claimWindow is what the orphan sweep and the journal drain learn from a
// stream's merge claim: the window [start, end) of a merge that may still
// publish (all: an unreadable claim, whose window is unknown).
type claimWindow struct {
	start, end int64
	all        bool
}

// covers reports whether object key of stream id may be the claimed
// merge's output: a merge writes its object under its window's exact range
// (genObjectKey), and a window always spans at least two sources, so no
// source of it has that range.
func (w *claimWindow) covers(id ID, key string) bool {
	if w == nil {
		return false
	}
	if w.all {
		return true
	}
	_, s, e, ok := parseGenObjectKey(id, key)
	return !ok || s == w.start && e == w.end
}

// reason says why an object the claim covers is kept (nereus gc status).
func (w *claimWindow) reason() string {
	if w.all {
		return "the stream's merge claim record is unreadable: every unnamed generation object is kept (merges of the stream are stopped too) until an operator looks"
	}
	return "the stream's merge claim names its window (the merge's publication may still apply)"
}

// standingMergeClaim returns the window of h's merge claim while it stands:
// while it does, its holder's publication may still apply (a lost response
// keeps the claim, merge.go), so an unnamed object of that window is not an
// orphan, however old. A claim older than claimTTL is settled here as a
// merge taking it over would settle it — the holder's publication fenced or
// finished (settleStaleClaim) — and then deleted at its version; from then
// on the object's fate is final and the usual proofs apply. A claim that
// moved meanwhile, or a settlement that did not finish, still stands (until
// the next pass). The claim is read before anything it is to protect is
// judged: one that is gone by then was released only once its outcome was
// settled. A deleted stream is never read again, and its GC removes its
// claim: nothing stands there.
func (c *Core) standingMergeClaim(ctx context.Context, h *head) (*claimWindow, error) {
	if h.State == StateDeleted {
		return nil, nil
	}
	key := mergeClaimKey(h.ID)
	rec, err := c.meta.Get(ctx, key)
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cl, err := decodeMergeClaim(rec.Value)
	if err != nil {
		// Its window is unknown: every unnamed object may be its output.
		return &claimWindow{all: true}, nil
	}
	win := &claimWindow{start: cl.Start, end: cl.End}
	if c.cfg.Lifecycle.GCDryRun || time.Duration(c.nowMs()-cl.SinceMs)*time.Millisecond < c.claimTTL() {
		return win, nil
	}
	if err := c.settleStaleClaim(ctx, h.ID, cl); err != nil {
		c.log.Debug("settling a stale merge claim failed", "stream", h.ID, "err", err)
		return win, nil
	}
	switch err := c.meta.Delete(ctx, key, rec.Version); {
	case err == nil, errors.Is(err, metadata.ErrKeyNotFound):
		c.log.Debug("stale merge claim settled by GC", "stream", h.ID, "start", cl.Start, "end", cl.End)
		// Settling can leave an unnamed object: the fenced holder's, or
		// (it published) its last source, whose journal entry GC dropped
		// while the record still named it. The sweep looks next.
		c.markOrphanSweep(h.ID)
		return nil, nil
	default:
		return win, nil
	}
}
