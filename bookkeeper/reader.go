package bookkeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	"github.com/nereusstream/nereus-go/bookkeeper/proto"
)

// Reader reads a ledger opened without recovery: it never fences and never
// changes the ledger, so it may run while the writer is still appending.
// Its readable range is [0, LastAddConfirmed()]. It is safe for concurrent
// use.
//
// On an open ledger the LAC comes from the entries' piggybacked LACs (v2 has
// no explicit LAC), so it lags the writer by at least one entry until the
// writer appends again or closes the ledger. Refresh re-reads it.
type Reader struct {
	c      *Client
	id     int64
	digest *proto.Digester
	mk     [proto.MasterKeyLen]byte

	mu      sync.Mutex
	md      *meta.LedgerMetadata
	version Version
	lac     int64
}

// Entry is one ledger entry.
type Entry struct {
	EntryID int64
	// Payload is the entry's data (without BookKeeper's header and digest).
	Payload []byte
	// LastAddConfirmed and Length are from the entry's stored header.
	LastAddConfirmed int64
	Length           int64
}

// OpenLedger opens a ledger for reading without recovery (never fences).
// A CLOSED ledger reads [0, lastEntryId]; an OPEN or IN_RECOVERY one reads
// up to the LAC found on the bookies of its last ensemble.
func (c *Client) OpenLedger(ctx context.Context, id int64, o OpenOptions) (*Reader, error) {
	if c.closed.Load() {
		return nil, ErrClientClosed
	}
	md, v, err := c.readMetadata(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := checkOpen(id, md, o); err != nil {
		return nil, err
	}
	r, err := newReader(c, id, md, v)
	if err != nil {
		return nil, err
	}
	if md.State != meta.StateClosed {
		res, err := c.readLastConfirmed(ctx, id, md, r.digest, nil)
		if err != nil {
			return nil, err
		}
		r.lac = max(res.lac, md.Last().FirstEntryID-1)
	}
	return r, nil
}

func newReader(c *Client, id int64, md *meta.LedgerMetadata, v Version) (*Reader, error) {
	d, err := proto.NewDigester(md.DigestType, md.Password)
	if err != nil {
		return nil, err
	}
	r := &Reader{c: c, id: id, digest: d, mk: proto.MasterKey(md.Password), md: md, version: v, lac: -1}
	if md.State == meta.StateClosed {
		r.lac = md.LastEntryID
	}
	return r, nil
}

// LedgerID returns the ledger's ID.
func (r *Reader) LedgerID() int64 { return r.id }

// LastAddConfirmed returns the last readable entry ID (-1: none).
func (r *Reader) LastAddConfirmed() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lac
}

// IsClosed reports whether the ledger was CLOSED when last read.
func (r *Reader) IsClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.md.State == meta.StateClosed
}

// Info returns the metadata the reader last saw.
func (r *Reader) Info() LedgerInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return LedgerInfo{LedgerID: r.id, Metadata: r.md.Clone(), Version: r.version}
}

// Refresh re-reads the metadata and, if the ledger is still open, the LAC
// from the bookies. It returns the new LAC (never lower than before).
func (r *Reader) Refresh(ctx context.Context) (int64, error) {
	md, v, err := r.c.readMetadata(ctx, r.id)
	if err != nil {
		return r.LastAddConfirmed(), err
	}
	lac := md.LastEntryID
	if md.State != meta.StateClosed {
		res, err := r.c.readLastConfirmed(ctx, r.id, md, r.digest, nil)
		if err != nil {
			return r.LastAddConfirmed(), err
		}
		lac = max(res.lac, md.Last().FirstEntryID-1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.md, r.version = md, v
	r.lac = max(r.lac, lac)
	return r.lac, nil
}

// Read returns entries first..last (inclusive), which must lie within
// [0, LastAddConfirmed()]. Each entry is read from its write set, one
// bookie after another until one returns it with a valid digest; up to
// Config.ReadWindow entries are read concurrently.
func (r *Reader) Read(ctx context.Context, first, last int64) ([]Entry, error) {
	r.mu.Lock()
	lac, md := r.lac, r.md
	r.mu.Unlock()
	if first < 0 || last < first || last > lac {
		return nil, fmt.Errorf("%w: read [%d, %d] of ledger %d outside [0, %d]", ErrInvalidArgument, first, last, r.id, lac)
	}
	return r.c.readEntries(ctx, r.id, md, r.digest, first, last)
}

// ReadUnconfirmed reads entries first..last without checking them against
// the LAC. Use it only for entries whose acknowledgement the caller knows
// from elsewhere (e.g. its own commit record of the writer's acks): an
// entry above the LAC that was never acknowledged may be absent, or may be
// cut off when the ledger is recovered. On a CLOSED ledger it still refuses
// entries past lastEntryId.
func (r *Reader) ReadUnconfirmed(ctx context.Context, first, last int64) ([]Entry, error) {
	r.mu.Lock()
	md := r.md
	r.mu.Unlock()
	if first < 0 || last < first || (md.State == meta.StateClosed && last > md.LastEntryID) {
		return nil, fmt.Errorf("%w: read [%d, %d] of ledger %d (state %s, last entry %d)",
			ErrInvalidArgument, first, last, r.id, md.State, md.LastEntryID)
	}
	return r.c.readEntries(ctx, r.id, md, r.digest, first, last)
}

func (c *Client) readEntries(ctx context.Context, id int64, md *meta.LedgerMetadata, d *proto.Digester, first, last int64) ([]Entry, error) {
	n := last - first + 1
	out := make([]Entry, n)
	errs := make([]error, n)
	sem := make(chan struct{}, c.cfg.ReadWindow)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := int64(0); i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
		if errs[i] != nil {
			break
		}
		wg.Add(1)
		go func(i int64) {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = c.readEntry(ctx, id, md, d, first+i)
			if errs[i] != nil {
				cancel()
			}
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readEntry tries the write set of entry e in order.
func (c *Client) readEntry(ctx context.Context, id int64, md *meta.LedgerMetadata, d *proto.Digester, e int64) (Entry, error) {
	seg := md.SegmentFor(e)
	frame := proto.AppendReadRequest(nil, id, e, proto.FlagNone, nil)
	var missing, corrupt, failed int
	var lastErr error
	for _, idx := range writeSet(e, len(seg.Ensemble), int(md.WriteQuorum)) {
		bookie := seg.Ensemble[idx]
		resp, err := c.call(ctx, bookie, reqKey{op: proto.OpRead, ledger: id, entry: e}, frame)
		if err == nil {
			err = rcError(bookie, resp.RC)
		}
		if err == nil {
			h, payload, verr := d.VerifyEntry(resp.Body, id, e)
			if verr == nil {
				return Entry{EntryID: e, Payload: payload, LastAddConfirmed: h.LastAddConfirmed, Length: h.Length}, nil
			}
			c.cfg.Logger.Warn("bookkeeper: entry failed its digest; trying the next replica",
				"ledger", id, "entry", e, "bookie", bookie, "err", verr)
			corrupt++
			lastErr = fmt.Errorf("%w: bookie %s: %v", ErrCorrupt, bookie, verr)
			continue
		}
		if ctx.Err() != nil {
			return Entry{}, ctx.Err()
		}
		if errors.Is(err, ErrUnauthorized) {
			return Entry{}, err
		}
		if errors.Is(err, ErrNoEntry) {
			missing++
		} else {
			failed++
		}
		lastErr = err
	}
	switch {
	case corrupt > 0:
		return Entry{}, fmt.Errorf("ledger %d entry %d: %w", id, e, lastErr)
	case failed > 0:
		return Entry{}, fmt.Errorf("ledger %d entry %d: %w (%d missing, %d failed)", id, e, lastErr, missing, failed)
	}
	return Entry{}, fmt.Errorf("ledger %d entry %d: %w", id, e, lastErr)
}

// lacResult is the outcome of a last-entry read over an ensemble.
type lacResult struct {
	// lac is the highest piggybacked LAC seen (-1 if none).
	lac int64
	// lacLength is the cumulative length through lac if an answer's entry
	// was lac itself; haveLength says whether it was.
	lacLength  int64
	haveLength bool
}

// readLastConfirmed sends READ(entry -1) to every bookie of the last
// ensemble (fencing when mk is non-nil) and returns once the answers cover
// every write set (RRQuorumCoverageSet) with at least one valid answer.
// EUA fails at once. Without coverage it fails with ErrRecoveryIncomplete
// (fencing) or ErrBookieUnavailable.
func (c *Client) readLastConfirmed(ctx context.Context, id int64, md *meta.LedgerMetadata, d *proto.Digester, mk *[proto.MasterKeyLen]byte) (lacResult, error) {
	seg := md.Last()
	flags := proto.FlagNone
	if mk != nil {
		flags = proto.FlagDoFencing
	}
	frame := proto.AppendReadRequest(nil, id, proto.LastEntry, flags, mk)
	type ans struct {
		idx  int
		resp proto.Response
		err  error
	}
	ch := make(chan ans, len(seg.Ensemble))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for idx, bookie := range seg.Ensemble {
		go func() {
			r, err := c.call(ctx, bookie, reqKey{op: proto.OpRead, ledger: id, entry: proto.LastEntry}, frame)
			ch <- ans{idx, r, err}
		}()
	}
	answers := make([]answer, len(seg.Ensemble))
	res := lacResult{lac: -1}
	lengths := map[int64]int64{} // entry ID -> cumulative length, from answers
	done := func() lacResult {
		res.lacLength, res.haveLength = lengths[res.lac]
		return res
	}
	valid := false
	var lastErr error
	for range seg.Ensemble {
		var a ans
		select {
		case a = <-ch:
		case <-ctx.Done():
			return res, ctx.Err()
		}
		err := a.err
		if err == nil {
			err = rcError(seg.Ensemble[a.idx], a.resp.RC)
		}
		switch {
		case err == nil:
			h, _, verr := d.VerifyEntry(a.resp.Body, id, proto.LastEntry)
			if verr != nil {
				answers[a.idx] = answerFailed
				lastErr = fmt.Errorf("%w: bookie %s: %v", ErrCorrupt, seg.Ensemble[a.idx], verr)
				c.cfg.Logger.Warn("bookkeeper: last entry failed its digest", "ledger", id, "bookie", seg.Ensemble[a.idx], "err", verr)
				break
			}
			answers[a.idx] = answerOK
			valid = true
			res.lac = max(res.lac, h.LastAddConfirmed)
			lengths[h.EntryID] = h.Length
		case errors.Is(err, ErrNoEntry):
			answers[a.idx] = answerMissing
			valid = true
		case errors.Is(err, ErrUnauthorized):
			return res, err
		default:
			answers[a.idx] = answerFailed
			lastErr = err
		}
		if valid && covered(answers, int(md.WriteQuorum), int(md.AckQuorum)) {
			return done(), nil
		}
	}
	if mk != nil {
		return res, fmt.Errorf("%w: fencing ledger %d: answers do not cover every write set: %v", ErrRecoveryIncomplete, id, lastErr)
	}
	return res, fmt.Errorf("%w: reading the LAC of ledger %d: answers do not cover every write set: %v", ErrBookieUnavailable, id, lastErr)
}
