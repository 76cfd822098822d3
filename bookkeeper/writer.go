package bookkeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	"github.com/nereusstream/nereus-go/bookkeeper/proto"
)

// Writer appends entries to one ledger it created. It is safe for
// concurrent use; entry IDs are assigned in AppendAsync call order.
//
// Pipelining and order. Adds are sent as soon as they are accepted (up to
// Config.MaxPendingAdds unacknowledged), each to its write set of WQ
// bookies, as one frame whose bytes never change: a resend after a failure
// is byte-identical, LAC included. An add is acknowledged when AQ bookies
// answered EOK AND every earlier add was acknowledged; futures complete in
// entry order, and the writer's LAC is the last acknowledged entry.
//
// No ensemble change. A bookie failure is retried on the same bookie (with
// back-off, identical bytes) until the add reaches its ack quorum or
// AddTimeout passes. Then the writer breaks: every unacknowledged add fails
// with an AddError (outcome unknown) and new appends fail with
// ErrWriterBroken. Close then seals the ledger at the LAC, which settles all
// of them as not applied; the caller continues in a new ledger.
//
// Fencing. An EFENCED answer means another client is recovering the ledger:
// the writer stops for good (ErrFenced). Only EOK answers count as acks, and
// fenced bookies answer normal adds with EFENCED, so once a recovery has
// fenced enough bookies nothing this writer sends can be acknowledged.
//
// Lock order: Writer.mu, then connPool.mu, then bookieConn.mu. Bookie
// callbacks run without connection locks held and take Writer.mu.
type Writer struct {
	c        *Client
	id       int64
	digest   *proto.Digester
	mk       [proto.MasterKeyLen]byte
	ensemble []string
	wq, aq   int
	maxEntry int
	window   chan struct{}
	closeMu  sync.Mutex // serialises Close

	mu      sync.Mutex
	md      *meta.LedgerMetadata
	version Version
	next    int64 // next entry ID to assign
	length  int64 // cumulative payload length through next-1
	// Invariant: lac < next; pending holds entries lac+1 .. next-1 in order
	// while the writer is open or closing.
	lac      int64
	lacLen   int64
	pending  []*pendingAdd
	state    writerState
	stateErr error
	changed  chan struct{} // closed and replaced on every LAC advance or state change
	result   CloseResult
}

type writerState uint8

const (
	writerOpen writerState = iota
	writerClosing
	writerBroken
	writerFenced
	writerClosed
)

type pendingAdd struct {
	entryID  int64
	length   int64
	frame    []byte
	ws       []int
	acked    uint64 // ensemble-index bitmask of EOK answers
	inflight uint64 // ensemble-index bitmask of requests on the wire or queued
	acks     int
	resends  int
	quorum   bool // acks >= AQ
	final    bool // future completed
	fut      *AddFuture
	timer    *time.Timer
}

// AddFuture is the pending result of one add.
type AddFuture struct {
	entryID int64
	done    chan struct{}
	err     error
}

// EntryID is the entry ID the add was given.
func (f *AddFuture) EntryID() int64 { return f.entryID }

// Done is closed when the add is acknowledged or failed.
func (f *AddFuture) Done() <-chan struct{} { return f.done }

// Err is nil if the add was acknowledged (ack quorum reached, and every
// earlier add acknowledged). Valid after Done is closed. A non-nil error is
// an *AddError (outcome unknown until the ledger is closed) or, for adds
// still pending when Close sealed the ledger, ErrLedgerClosed (not applied).
func (f *AddFuture) Err() error {
	<-f.done
	return f.err
}

// Wait waits for the add or ctx. A ctx error says nothing about the add.
func (f *AddFuture) Wait(ctx context.Context) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newWriter(c *Client, id int64, md *meta.LedgerMetadata, ver Version) (*Writer, error) {
	d, err := proto.NewDigester(md.DigestType, md.Password)
	if err != nil {
		return nil, err
	}
	w := &Writer{
		c: c, id: id, digest: d, mk: proto.MasterKey(md.Password),
		ensemble: append([]string(nil), md.Last().Ensemble...),
		wq:       int(md.WriteQuorum), aq: int(md.AckQuorum),
		window: make(chan struct{}, c.cfg.MaxPendingAdds),
		md:     md, version: ver, lac: -1, changed: make(chan struct{}),
	}
	w.maxEntry = c.cfg.MaxFrameSize - (4 + 4 + proto.MasterKeyLen + proto.EntryHeaderLen + d.Size())
	return w, nil
}

// LedgerID returns the ledger's ID.
func (w *Writer) LedgerID() int64 { return w.id }

// Ensemble returns the ledger's bookies in ensemble order.
func (w *Writer) Ensemble() []string { return append([]string(nil), w.ensemble...) }

// MaxEntrySize is the largest payload one entry can carry (the bookies'
// frame limit minus headers).
func (w *Writer) MaxEntrySize() int { return w.maxEntry }

// LastAddConfirmed returns the last acknowledged entry ID (-1 if none).
func (w *Writer) LastAddConfirmed() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lac
}

// Length returns the payload bytes through the LAC.
func (w *Writer) Length() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lacLen
}

// Pending returns the number of accepted, unacknowledged adds.
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// Err returns why the writer stopped accepting appends (nil while open).
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stateErrLocked()
}

func (w *Writer) stateErrLocked() error {
	switch w.state {
	case writerOpen:
		return nil
	case writerClosing, writerClosed:
		return fmt.Errorf("%w: ledger %d", ErrLedgerClosed, w.id)
	case writerFenced:
		return fmt.Errorf("ledger %d: %w", w.id, w.stateErr)
	}
	return fmt.Errorf("%w: ledger %d: %v", ErrWriterBroken, w.id, w.stateErr)
}

// Append adds one entry and waits for its acknowledgement. See AppendAsync.
func (w *Writer) Append(ctx context.Context, payload []byte) (int64, error) {
	f, err := w.AppendAsync(ctx, payload)
	if err != nil {
		return -1, err
	}
	if err := f.Wait(ctx); err != nil {
		return f.entryID, err
	}
	return f.entryID, nil
}

// AppendAsync accepts one entry, gives it the next entry ID and sends it.
// It blocks only while MaxPendingAdds adds are unacknowledged (until ctx
// ends). An error here means the entry was not accepted and nothing was
// sent (not applied). The payload is copied; the caller may reuse it.
func (w *Writer) AppendAsync(ctx context.Context, payload []byte) (*AddFuture, error) {
	if len(payload) > w.maxEntry {
		return nil, fmt.Errorf("%w: entry of %d bytes exceeds the %d-byte limit", ErrInvalidArgument, len(payload), w.maxEntry)
	}
	select {
	case w.window <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("bookkeeper: append not accepted: %w", ctx.Err())
	}
	w.mu.Lock()
	if w.state != writerOpen {
		<-w.window
		err := w.stateErrLocked()
		w.mu.Unlock()
		return nil, err
	}
	e := w.next
	w.next++
	w.length += int64(len(payload))
	frame := w.digest.AppendAddFrame(make([]byte, 0, w.digest.AddFrameSize(len(payload))), &w.mk, proto.FlagNone,
		proto.EntryHeader{LedgerID: w.id, EntryID: e, LastAddConfirmed: w.lac, Length: w.length}, payload)
	pa := &pendingAdd{entryID: e, length: w.length, frame: frame, ws: writeSet(e, len(w.ensemble), w.wq),
		fut: &AddFuture{entryID: e, done: make(chan struct{})}}
	w.pending = append(w.pending, pa)
	pa.timer = time.AfterFunc(w.c.cfg.AddTimeout, func() { w.onAddTimeout(pa) })
	for _, idx := range pa.ws {
		pa.inflight |= uint64(1) << idx
	}
	w.mu.Unlock()
	// Sent without w.mu held, so the socket may be written on this
	// goroutine (see bookieConn): a write blocked on a full socket must not
	// hold the lock the response callbacks need.
	for _, idx := range pa.ws {
		if err := w.c.pool.send(w.ensemble[idx], w.addRequest(pa, idx, frame), true); err != nil {
			w.mu.Lock()
			pa.inflight &^= uint64(1) << idx
			if !pa.final {
				w.scheduleResendLocked(pa, idx, err)
			}
			w.mu.Unlock()
		}
	}
	return pa.fut, nil
}

func (w *Writer) addRequest(pa *pendingAdd, idx int, frame []byte) *bookieRequest {
	return &bookieRequest{
		key:     reqKey{op: proto.OpAdd, ledger: w.id, entry: pa.entryID},
		frame:   frame,
		timeout: w.c.cfg.RequestTimeout,
		cb:      func(resp proto.Response, err error) { w.onAddResponse(pa, idx, resp, err) },
	}
}

// sendLocked (re)sends pa to one bookie through the write loop (w.mu is
// held, so no direct socket write).
func (w *Writer) sendLocked(pa *pendingAdd, idx int) {
	bit := uint64(1) << idx
	pa.inflight |= bit
	if err := w.c.pool.send(w.ensemble[idx], w.addRequest(pa, idx, pa.frame), false); err != nil {
		pa.inflight &^= bit
		w.scheduleResendLocked(pa, idx, err)
	}
}

func (w *Writer) onAddResponse(pa *pendingAdd, idx int, resp proto.Response, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	bit := uint64(1) << idx
	pa.inflight &^= bit
	if pa.final {
		return
	}
	if err == nil {
		err = rcError(w.ensemble[idx], resp.RC)
	}
	switch {
	case err == nil:
		if pa.acked&bit == 0 {
			pa.acked |= bit
			pa.acks++
		}
		if !pa.quorum && pa.acks >= w.aq {
			pa.quorum = true
			pa.timer.Stop()
			w.advanceLocked()
		}
	case errors.Is(err, ErrFenced):
		w.failLocked(writerFenced, err)
	case errors.Is(err, ErrUnauthorized):
		w.failLocked(writerBroken, err)
	default:
		if !pa.quorum {
			w.scheduleResendLocked(pa, idx, err)
		}
	}
}

func (w *Writer) scheduleResendLocked(pa *pendingAdd, idx int, cause error) {
	pa.resends++
	d := w.c.cfg.ResendBackoff << min(pa.resends-1, 6)
	d = min(d, time.Second)
	if pa.resends == 1 {
		w.c.cfg.Logger.Warn("bookkeeper: add failed on a bookie; resending identical bytes",
			"ledger", w.id, "entry", pa.entryID, "bookie", w.ensemble[idx], "err", cause)
	}
	time.AfterFunc(d, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		bit := uint64(1) << idx
		if pa.final || pa.quorum || pa.acked&bit != 0 || pa.inflight&bit != 0 ||
			(w.state != writerOpen && w.state != writerClosing) {
			return
		}
		w.sendLocked(pa, idx)
	})
}

func (w *Writer) onAddTimeout(pa *pendingAdd) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pa.final || pa.quorum {
		return
	}
	w.failLocked(writerBroken, fmt.Errorf("entry %d reached %d of %d acks in %v", pa.entryID, pa.acks, w.aq, w.c.cfg.AddTimeout))
}

// advanceLocked acknowledges the contiguous prefix of quorum-reached adds.
func (w *Writer) advanceLocked() {
	n := 0
	for n < len(w.pending) && w.pending[n].quorum {
		pa := w.pending[n]
		w.lac, w.lacLen = pa.entryID, pa.length
		pa.final = true
		pa.frame = nil
		close(pa.fut.done)
		<-w.window
		n++
	}
	if n > 0 {
		clear(w.pending[:n])
		w.pending = w.pending[n:]
		w.notifyLocked()
	}
}

// failLocked stops the writer and fails every unacknowledged add with an
// outcome-unknown AddError.
func (w *Writer) failLocked(st writerState, cause error) {
	if w.state == writerBroken || w.state == writerFenced || w.state == writerClosed {
		return
	}
	if st == writerFenced {
		w.c.cfg.Logger.Warn("bookkeeper: ledger fenced; writer stopped", "ledger", w.id, "lac", w.lac)
	} else {
		w.c.cfg.Logger.Warn("bookkeeper: writer broken", "ledger", w.id, "lac", w.lac, "err", cause)
	}
	w.state, w.stateErr = st, cause
	for _, pa := range w.pending {
		pa.final = true
		pa.timer.Stop()
		pa.fut.err = &AddError{LedgerID: w.id, EntryID: pa.entryID, Err: cause}
		close(pa.fut.done)
		<-w.window
	}
	w.pending = nil
	w.notifyLocked()
}

func (w *Writer) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// CloseResult is the final state of a closed ledger: entries 0..LastEntryID
// (Length payload bytes) are the ledger; any other entry ID is not applied.
type CloseResult struct {
	LastEntryID int64
	Length      int64
	Version     Version
}

// Close stops accepting appends, waits (until ctx ends) for pending adds to
// be acknowledged or fail, and seals the ledger at its LAC with a metadata
// CAS OPEN -> CLOSED. Adds still pending when the seal applies fail with
// ErrLedgerClosed (not applied).
//
// Outcomes:
//   - nil: applied (or our own earlier, unanswered close had applied); the
//     result settles every add: applied iff EntryID <= LastEntryID.
//   - ErrFenced: conflict; the ledger was (or is being) recovered by
//     another client. If the recovery already closed it, the result holds
//     its LastEntryID, which settles our adds the same way; otherwise the
//     result is zero and the recovery will settle them.
//   - ErrOutcomeUnknown: the metadata store did not answer and re-reading
//     could not settle it before ctx ended; call Close again.
//
// Close on a broken writer seals it the same way.
func (w *Writer) Close(ctx context.Context) (CloseResult, error) {
	w.closeMu.Lock()
	defer w.closeMu.Unlock()
	w.mu.Lock()
	if w.state == writerClosed {
		defer w.mu.Unlock()
		return w.result, nil
	}
	if w.state == writerOpen {
		w.state = writerClosing
		w.notifyLocked()
	}
	for len(w.pending) > 0 && w.state == writerClosing {
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		w.mu.Lock()
		if ctx.Err() != nil {
			break
		}
	}
	st := w.state
	lac, lacLen, md, ver := w.lac, w.lacLen, w.md.Clone(), w.version
	w.mu.Unlock()

	if st == writerFenced {
		return w.fencedResult(ctx)
	}
	next := md.Clone()
	next.State, next.LastEntryID, next.Length = meta.StateClosed, lac, lacLen
	for {
		v, cur, cv, err := w.c.writeMetadataSettled(ctx, w.id, next, ver)
		if err == nil {
			return w.finishClose(CloseResult{LastEntryID: lac, Length: lacLen, Version: v}), nil
		}
		if !errors.Is(err, ErrBadVersion) || cur == nil {
			return CloseResult{}, err
		}
		switch cur.State {
		case meta.StateClosed:
			if cur.LastEntryID == lac && cur.Length == lacLen {
				return w.finishClose(CloseResult{LastEntryID: lac, Length: lacLen, Version: cv}), nil
			}
			w.markFenced()
			return CloseResult{LastEntryID: cur.LastEntryID, Length: cur.Length, Version: cv},
				fmt.Errorf("%w: ledger %d was recovered and closed at entry %d", ErrFenced, w.id, cur.LastEntryID)
		case meta.StateInRecovery:
			w.markFenced()
			return CloseResult{}, fmt.Errorf("%w: ledger %d is in recovery by another client", ErrFenced, w.id)
		default:
			if !sameSegments(cur, md) {
				w.markFenced()
				return CloseResult{}, fmt.Errorf("%w: ledger %d metadata changed under the writer", ErrFenced, w.id)
			}
			ver = cv // an unrelated change (e.g. custom metadata): close on top of it
			next = cur.Clone()
			next.State, next.LastEntryID, next.Length = meta.StateClosed, lac, lacLen
		}
	}
}

func (w *Writer) finishClose(res CloseResult) CloseResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.state, w.result, w.version = writerClosed, res, res.Version
	w.md.State, w.md.LastEntryID, w.md.Length = meta.StateClosed, res.LastEntryID, res.Length
	for _, pa := range w.pending {
		pa.final = true
		pa.timer.Stop()
		pa.fut.err = fmt.Errorf("%w: ledger %d sealed at entry %d before entry %d was acknowledged (not applied)",
			ErrLedgerClosed, w.id, res.LastEntryID, pa.entryID)
		close(pa.fut.done)
		<-w.window
	}
	w.pending = nil
	w.notifyLocked()
	return res
}

func (w *Writer) markFenced() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failLocked(writerFenced, fmt.Errorf("%w: ledger %d", ErrFenced, w.id))
}

// fencedResult reports the recovery's decision if it has closed the ledger.
func (w *Writer) fencedResult(ctx context.Context) (CloseResult, error) {
	md, v, err := w.c.readMetadata(ctx, w.id)
	if err == nil && md.State == meta.StateClosed {
		return CloseResult{LastEntryID: md.LastEntryID, Length: md.Length, Version: v},
			fmt.Errorf("%w: ledger %d was recovered and closed at entry %d", ErrFenced, w.id, md.LastEntryID)
	}
	return CloseResult{}, fmt.Errorf("%w: ledger %d is being recovered by another client", ErrFenced, w.id)
}

func sameSegments(a, b *meta.LedgerMetadata) bool {
	if len(a.Segments) != len(b.Segments) {
		return false
	}
	for i := range a.Segments {
		if a.Segments[i].FirstEntryID != b.Segments[i].FirstEntryID || len(a.Segments[i].Ensemble) != len(b.Segments[i].Ensemble) {
			return false
		}
		for j := range a.Segments[i].Ensemble {
			if a.Segments[i].Ensemble[j] != b.Segments[i].Ensemble[j] {
				return false
			}
		}
	}
	return true
}
