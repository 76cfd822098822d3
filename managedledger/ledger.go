package managedledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/nereusstream/nereus-go/stream"
)

// Position is a Pulsar position: (ledgerId, entryId).
type Position struct {
	LedgerID int64
	EntryID  int64
}

// Sentinel positions used by clients.
var (
	Earliest = Position{LedgerID: -1, EntryID: -1}
	Latest   = Position{LedgerID: math.MaxInt64, EntryID: math.MaxInt64}
)

// Entry is one stored Pulsar entry.
type Entry struct {
	Offset    int64
	Timestamp int64
	Payload   []byte
}

// Ledger is one topic (or partition) opened over its stream. Appends need
// an append session (AcquireWriter); reads and cursors do not.
type Ledger struct {
	f    *Factory
	name TopicName
	rec  topicRecord
	id   stream.ID

	mu      sync.Mutex
	session *stream.Session
}

// Name is the topic's name.
func (l *Ledger) Name() TopicName { return l.name }

// LedgerID is the topic incarnation's virtual ledger ID.
func (l *Ledger) LedgerID() int64 { return l.rec.LedgerID }

// PositionOf maps an offset to its Pulsar position.
func (l *Ledger) PositionOf(offset int64) Position {
	return Position{LedgerID: l.rec.LedgerID, EntryID: offset}
}

// OffsetOf maps a position to an offset: positions of an older incarnation
// (and the earliest sentinel) map to math.MinInt64, of a later one (and
// the latest sentinel) to math.MaxInt64; callers clamp to the stream's
// bounds.
func (l *Ledger) OffsetOf(p Position) int64 {
	switch {
	case p.LedgerID < l.rec.LedgerID:
		return math.MinInt64
	case p.LedgerID > l.rec.LedgerID:
		return math.MaxInt64
	}
	return p.EntryID
}

// AcquireWriter makes this broker the stream's writer. A broker with a
// higher authority epoch takes over from a stale owner and fences it; the
// stale owner's appends then fail with stream.ErrFenced.
func (l *Ledger) AcquireWriter(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session != nil {
		return nil
	}
	var s stream.Session
	var err error
	if w := l.f.cfg.Writers; w != nil {
		s, err = w.Writer(ctx, l.id, l.rec.StreamName)
	} else {
		s, err = l.f.storage.AcquireSession(ctx, l.id, stream.SessionOptions{WriterID: l.f.cfg.WriterID,
			TTL: l.f.cfg.SessionTTL, AuthorityEpoch: l.f.cfg.AuthorityEpoch, StealExpired: true})
	}
	if err != nil {
		return fmt.Errorf("topic %s: acquire append session: %w", l.name, err)
	}
	l.session = &s
	return nil
}

// DropWriter forgets the append session after it was fenced, so a later
// AcquireWriter tries again.
func (l *Ledger) DropWriter() {
	l.mu.Lock()
	s := l.session
	l.session = nil
	l.mu.Unlock()
	if w := l.f.cfg.Writers; w != nil && s != nil {
		w.Lost(*s)
	}
}

// AppendAsync appends one entry (RecordCount 1) with optional producer
// sequence for deduplication. Appends on one ledger commit in call order.
func (l *Ledger) AppendAsync(e stream.Entry, seq *stream.ProducerSequence) *stream.AppendFuture {
	l.mu.Lock()
	s := l.session
	l.mu.Unlock()
	if s == nil {
		f := stream.NewAppendFuture()
		f.Resolve(stream.AppendResult{}, ErrNoWriter)
		return f
	}
	e.RecordCount = 1
	return l.f.storage.AppendAsync(*s, stream.AppendRequest{Entries: []stream.Entry{e}, ExpectedStart: -1, Sequence: seq})
}

// Bounds returns [start, end): the first readable and the next offset.
func (l *Ledger) Bounds(ctx context.Context) (start, end int64, err error) {
	info, err := l.f.storage.Describe(ctx, l.id)
	if err != nil {
		return 0, 0, err
	}
	return info.StartOffset, info.EndOffset, nil
}

// Info returns the stream's current description (for stats).
func (l *Ledger) Info(ctx context.Context) (stream.Info, error) {
	return l.f.storage.Describe(ctx, l.id)
}

// Read returns up to maxEntries entries starting at from (clamped to the
// stream's start). It does not wait.
func (l *Ledger) Read(ctx context.Context, from int64, maxEntries, maxBytes int) ([]Entry, int64, error) {
	res, err := l.f.storage.Read(ctx, l.id, from, stream.ReadOptions{MaxEntries: maxEntries, MaxBytes: maxBytes})
	if errors.Is(err, stream.ErrOffsetOutOfRange) && from < res.StartOffset {
		res, err = l.f.storage.Read(ctx, l.id, res.StartOffset, stream.ReadOptions{MaxEntries: maxEntries, MaxBytes: maxBytes})
	}
	if err != nil {
		return nil, from, err
	}
	out := make([]Entry, len(res.Entries))
	for i, e := range res.Entries {
		out[i] = Entry{Offset: e.Offset, Timestamp: e.Timestamp, Payload: e.Payload}
	}
	return out, res.Next, nil
}

// ReadOne reads the entry at offset; ok is false if it is not readable
// (trimmed or not yet written).
func (l *Ledger) ReadOne(ctx context.Context, offset int64) (Entry, bool, error) {
	res, err := l.f.storage.Read(ctx, l.id, offset, stream.ReadOptions{MaxEntries: 1})
	if errors.Is(err, stream.ErrOffsetOutOfRange) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	if len(res.Entries) == 0 || res.Entries[0].Offset != offset {
		return Entry{}, false, nil
	}
	e := res.Entries[0]
	return Entry{Offset: e.Offset, Timestamp: e.Timestamp, Payload: e.Payload}, true, nil
}

// Notify returns the committed end and a channel closed at the next change.
func (l *Ledger) Notify(ctx context.Context) (int64, <-chan struct{}, error) {
	return l.f.storage.Notify(ctx, l.id)
}

// OffsetForTimestamp returns the first entry whose timestamp (the publish
// time) is >= ts, or the end offset.
func (l *Ledger) OffsetForTimestamp(ctx context.Context, ts int64) (int64, error) {
	return l.f.storage.OffsetForTimestamp(ctx, l.id, ts)
}

// Close releases the append session, if any.
func (l *Ledger) Close(ctx context.Context) error {
	l.mu.Lock()
	s := l.session
	l.session = nil
	l.mu.Unlock()
	if s == nil {
		return nil
	}
	var err error
	if w := l.f.cfg.Writers; w != nil {
		err = w.Release(ctx, l.id)
	} else {
		err = l.f.storage.ReleaseSession(ctx, *s)
	}
	if errors.Is(err, stream.ErrFenced) || errors.Is(err, stream.ErrStreamNotFound) {
		return nil
	}
	return err
}

// Factory returns the factory the ledger belongs to.
func (l *Ledger) Factory() *Factory { return l.f }

// Terminate seals the topic's stream (Pulsar topic termination): every
// later append fails with stream.ErrStreamSealed; reads continue.
func (l *Ledger) Terminate(ctx context.Context) error {
	return l.f.storage.Seal(ctx, l.id)
}
