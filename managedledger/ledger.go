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
	// Offset is the entry's first offset (its entry id).
	Offset int64
	// Count is how many offsets the entry covers: its number of messages
	// on a message-counted topic, 1 on an entry-counted one.
	Count     int64
	Timestamp int64
	Payload   []byte
}

// End is the offset right after the entry.
func (e Entry) End() int64 { return e.Offset + e.Count }

// Ledger is one topic (or partition) opened over its stream. Appends need
// an append session (AcquireWriter); reads and cursors do not.
type Ledger struct {
	f    *Factory
	name TopicName
	rec  topicRecord
	id   stream.ID

	mu   sync.Mutex
	w    *sharedWriter // the factory's writer of this stream, once acquired
	wgen uint64        // the acquisition of w this ledger holds a reference to
}

// Name is the topic's name.
func (l *Ledger) Name() TopicName { return l.name }

// StreamName is the name of the topic's stream (its ownership key in a
// cluster of brokers).
func (l *Ledger) StreamName() string { return l.rec.StreamName }

// LedgerID is the topic incarnation's virtual ledger ID.
func (l *Ledger) LedgerID() int64 { return l.rec.LedgerID }

// StreamID is the topic's stream (for projections that share the core's
// notifications; never a Pulsar coordinate).
func (l *Ledger) StreamID() stream.ID { return l.id }

// CountsMessages reports whether the topic's offsets count messages (every
// message of a batch has its own offset; an entry's id is the offset of
// its first message). Topics created before this offset model count
// entries: one offset per entry, whatever its batch size.
func (l *Ledger) CountsMessages() bool { return l.rec.Offsets == OffsetsPerMessage }

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
	if PlantedBug == BugPositionOffByOne {
		return p.EntryID + 1
	}
	return p.EntryID
}

// AcquireWriter makes this broker the stream's writer. A broker with a
// higher authority epoch takes over from a stale owner and fences it; the
// stale owner's appends then fail with stream.ErrFenced. Every ledger of
// one stream opened through the same factory shares one append session
// (see sharedWriter); each holds one reference until Close or DropWriter.
func (l *Ledger) AcquireWriter(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		if _, ok := l.w.session(l.wgen); ok {
			return nil
		}
		l.w = nil // dropped underneath us (fenced): take a new one
	}
	w := l.f.writerOf(l.id)
	gen, err := w.acquire(ctx, l.f, l.id, l.rec.StreamName)
	if err != nil {
		return fmt.Errorf("topic %s: acquire append session: %w", l.name, err)
	}
	l.w, l.wgen = w, gen
	return nil
}

// WriterEpoch is the epoch of the append session this ledger holds (the
// Kafka projection reports it as the partition leader epoch); ok is false
// without one.
func (l *Ledger) WriterEpoch() (epoch uint64, ok bool) {
	l.mu.Lock()
	w, gen := l.w, l.wgen
	l.mu.Unlock()
	if w == nil {
		return 0, false
	}
	s, ok := w.session(gen)
	return s.Epoch, ok
}

// DropWriter forgets the append session after it was fenced (for every
// ledger sharing it), so a later AcquireWriter tries again.
func (l *Ledger) DropWriter() {
	l.mu.Lock()
	w, gen := l.w, l.wgen
	l.w = nil
	l.mu.Unlock()
	if w != nil {
		w.drop(l.f, gen)
	}
}

// AppendAsync appends one entry with optional producer sequence for
// deduplication. On a message-counted topic e.RecordCount must be the
// entry's number of messages; an entry-counted topic always stores 1.
// Appends on one stream commit in call order.
func (l *Ledger) AppendAsync(e stream.Entry, seq *stream.ProducerSequence) *stream.AppendFuture {
	l.mu.Lock()
	w, gen := l.w, l.wgen
	l.mu.Unlock()
	var s stream.Session
	ok := false
	if w != nil {
		s, ok = w.session(gen)
	}
	if !ok {
		f := stream.NewAppendFuture()
		f.Resolve(stream.AppendResult{}, ErrNoWriter)
		return f
	}
	if !l.CountsMessages() || e.RecordCount == 0 {
		e.RecordCount = 1
	}
	if PlantedBug == BugDropsSequence {
		seq = nil
	}
	return l.f.storage.AppendAsync(s, stream.AppendRequest{Entries: []stream.Entry{e}, ExpectedStart: -1, Sequence: seq})
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

func toEntry(e stream.ReadEntry) Entry {
	return Entry{Offset: e.Offset, Count: int64(max(e.RecordCount, 1)), Timestamp: e.Timestamp, Payload: e.Payload}
}

// Read returns up to maxEntries entries starting with the one containing
// from (clamped to the stream's start). It does not wait.
func (l *Ledger) Read(ctx context.Context, from int64, maxEntries, maxBytes int) ([]Entry, int64, error) {
	res, err := l.ReadRaw(ctx, from, stream.ReadOptions{MaxEntries: maxEntries, MaxBytes: maxBytes})
	if err != nil {
		return nil, from, err
	}
	out := make([]Entry, len(res.Entries))
	for i, e := range res.Entries {
		out[i] = toEntry(e)
	}
	return out, res.Next, nil
}

// ReadRaw is Read returning the core's result (with the stream's bounds),
// for projections; opts.Wait long-polls.
func (l *Ledger) ReadRaw(ctx context.Context, from int64, opts stream.ReadOptions) (stream.ReadResult, error) {
	res, err := l.f.storage.Read(ctx, l.id, from, opts)
	if errors.Is(err, stream.ErrOffsetOutOfRange) && from < res.StartOffset {
		res, err = l.f.storage.Read(ctx, l.id, res.StartOffset, opts)
	}
	return res, err
}

// ReadOne reads the entry that starts at offset; ok is false if none does
// (trimmed, not yet written, or offset lies inside an entry).
func (l *Ledger) ReadOne(ctx context.Context, offset int64) (Entry, bool, error) {
	e, ok, err := l.EntryContaining(ctx, offset)
	if err != nil || !ok || e.Offset != offset {
		return Entry{}, false, err
	}
	return e, true, nil
}

// EntryContaining reads the entry whose offsets include offset; ok is false
// if it is not readable (trimmed or not yet written).
func (l *Ledger) EntryContaining(ctx context.Context, offset int64) (Entry, bool, error) {
	if offset < 0 {
		return Entry{}, false, nil
	}
	res, err := l.f.storage.Read(ctx, l.id, offset, stream.ReadOptions{MaxEntries: 1})
	if errors.Is(err, stream.ErrOffsetOutOfRange) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	if len(res.Entries) == 0 {
		return Entry{}, false, nil
	}
	e := toEntry(res.Entries[0])
	if offset < e.Offset || offset >= e.End() {
		return Entry{}, false, nil
	}
	return e, true, nil
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

// Close releases this ledger's reference to the append session; the
// session itself is released when no ledger of the factory holds it.
func (l *Ledger) Close(ctx context.Context) error {
	l.mu.Lock()
	w, gen := l.w, l.wgen
	l.w = nil
	l.mu.Unlock()
	if w == nil {
		return nil
	}
	err := w.release(ctx, l.f, gen)
	if errors.Is(err, stream.ErrFenced) || errors.Is(err, stream.ErrStreamNotFound) {
		return nil
	}
	return err
}

// SetRetention sets the retention of the ledger's stream (the Pulsar
// broker computes it from policies; the core applies it).
func (f *Factory) SetRetention(ctx context.Context, l *Ledger, r stream.Retention) error {
	return f.storage.SetRetention(ctx, l.id, r)
}

// Factory returns the factory the ledger belongs to.
func (l *Ledger) Factory() *Factory { return l.f }

// Terminate seals the topic's stream (Pulsar topic termination): every
// later append fails with stream.ErrStreamSealed; reads continue.
func (l *Ledger) Terminate(ctx context.Context) error {
	return l.f.storage.Seal(ctx, l.id)
}

// sharedWriter is the one append session a factory holds on a stream
// (acquired from the storage, or from Config.Writers in a cluster). The
// core gives a writer id one session per stream; two holders releasing it
// independently would end it under each other, so holders count
// references: the session is acquired by the first and released by the
// last. gen identifies one acquisition, so a reference taken on a session
// that was since fenced (dropped) never releases its successor.
type sharedWriter struct {
	mu   sync.Mutex // held across the core calls that change the session
	sess stream.Session
	has  bool
	gen  uint64
	refs int
}

func (f *Factory) writerOf(id stream.ID) *sharedWriter {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	w := f.writers[id]
	if w == nil {
		w = &sharedWriter{}
		f.writers[id] = w
	}
	return w
}

func (w *sharedWriter) session(gen uint64) (stream.Session, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sess, w.has && w.gen == gen
}

func (w *sharedWriter) acquire(ctx context.Context, f *Factory, id stream.ID, name string) (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.has {
		var s stream.Session
		var err error
		if cw := f.cfg.Writers; cw != nil {
			s, err = cw.Writer(ctx, id, name)
		} else {
			s, err = f.storage.AcquireSession(ctx, id, stream.SessionOptions{WriterID: f.cfg.WriterID,
				TTL: f.cfg.SessionTTL, AuthorityEpoch: f.cfg.AuthorityEpoch, StealExpired: true})
		}
		if err != nil {
			return 0, err
		}
		w.sess, w.has, w.refs = s, true, 0
		w.gen++
	}
	w.refs++
	return w.gen, nil
}

func (w *sharedWriter) release(ctx context.Context, f *Factory, gen uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.has || w.gen != gen {
		return nil // dropped (fenced) since: nothing of ours to release
	}
	if w.refs--; w.refs > 0 {
		return nil
	}
	w.has = false
	if cw := f.cfg.Writers; cw != nil {
		return cw.Release(ctx, w.sess.Stream)
	}
	return f.storage.ReleaseSession(ctx, w.sess)
}

func (w *sharedWriter) drop(f *Factory, gen uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.has && w.gen == gen {
		w.has = false
		if cw := f.cfg.Writers; cw != nil {
			cw.Lost(w.sess)
		}
	}
}
