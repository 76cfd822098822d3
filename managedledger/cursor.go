package managedledger

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// Cursor tracks what a subscription has acknowledged on one ledger.
//
// Invariants: every offset < ackedBelow is acknowledged; deleted holds only
// offsets >= ackedBelow; batchAcks holds only offsets that are neither below
// ackedBelow nor in deleted, and each of its sets has at least one bit set
// (set bit = that batch index is still unacknowledged, Pulsar's ack_set
// convention).
type Cursor struct {
	l       *Ledger
	name    string
	durable bool
	key     string

	mu         sync.Mutex
	ackedBelow int64
	deleted    rangeSet
	batchAcks  map[int64][]uint64
	resetEpoch int64
	createdAt  time.Time
	gen        uint64 // bumped by every change
	persisted  uint64 // gen last applied to metadata
	version    metadata.Version

	flushMu sync.Mutex // one metadata writer at a time

	persistOK, persistFailed atomic.Int64
}

// PersistStats returns how many cursor state writes were applied to
// metadata and how many failed (conflicts that were merged and retried are
// not failures).
func (c *Cursor) PersistStats() (applied, failed int64) {
	return c.persistOK.Load(), c.persistFailed.Load()
}

type cursorRecord struct {
	AckedBelow int64               `json:"ackedBelow"`
	Deleted    [][2]int64          `json:"deleted,omitempty"`
	BatchAcks  map[string][]uint64 `json:"batchAcks,omitempty"`
	ResetEpoch int64               `json:"resetEpoch"`
	CreatedAt  time.Time           `json:"createdAt"`
}

func (l *Ledger) cursorKey(name string) string {
	return keyCursors + l.name.keyPath() + "/" + escape(name)
}

// OpenCursor opens the durable cursor name, creating it positioned at
// initial() (the first offset to deliver) if it does not exist. created
// reports whether this call created it.
func (l *Ledger) OpenCursor(ctx context.Context, name string, initial func() (int64, error)) (c *Cursor, created bool, err error) {
	if name == "" {
		return nil, false, fmt.Errorf("%w: empty subscription name", ErrInvalidName)
	}
	key := l.cursorKey(name)
	for attempt := 0; attempt < 16; attempt++ {
		var rec cursorRecord
		ver, ok, err := getRecord(ctx, l.f.meta, key, &rec)
		if err != nil {
			return nil, false, err
		}
		if ok {
			c := &Cursor{l: l, name: name, durable: true, key: key}
			c.load(rec, ver)
			return c, false, nil
		}
		start, err := initial()
		if err != nil {
			return nil, false, err
		}
		c := &Cursor{l: l, name: name, durable: true, key: key, ackedBelow: start, batchAcks: map[int64][]uint64{},
			createdAt: time.Now().UTC()}
		val, err := encodeRecord(c.recordLocked())
		if err != nil {
			return nil, false, err
		}
		v, err := l.f.meta.Put(ctx, key, val, metadata.NotExists)
		switch metadata.Classify(err) {
		case metadata.Applied:
			c.version = v
			return c, true, nil
		case metadata.Conflict, metadata.Unknown:
			continue // created concurrently (or by our lost write): load it.
		default:
			return nil, false, err
		}
	}
	return nil, false, fmt.Errorf("%w: open cursor %s", ErrTooManyConflicts, name)
}

// NonDurableCursor returns an in-memory cursor whose next offset to deliver
// is start (readers).
func (l *Ledger) NonDurableCursor(name string, start int64) *Cursor {
	return &Cursor{l: l, name: name, ackedBelow: start, batchAcks: map[int64][]uint64{}, createdAt: time.Now().UTC()}
}

// CursorPosition reads a durable cursor's AckedBelow (the first offset not
// known to be acknowledged) from metadata without opening it; ok is false
// when the cursor does not exist.
func (l *Ledger) CursorPosition(ctx context.Context, name string) (ackedBelow int64, ok bool, err error) {
	var rec cursorRecord
	_, ok, err = getRecord(ctx, l.f.meta, l.cursorKey(name), &rec)
	if err != nil || !ok {
		return 0, ok, err
	}
	return rec.AckedBelow, true, nil
}

// CursorExists reports whether a durable cursor exists.
func (l *Ledger) CursorExists(ctx context.Context, name string) (bool, error) {
	_, err := l.f.meta.Get(ctx, l.cursorKey(name))
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ListCursors returns the names of the ledger's durable cursors.
func (l *Ledger) ListCursors(ctx context.Context) ([]string, error) {
	prefix := keyCursors + l.name.keyPath() + "/"
	recs, err := l.f.meta.RangeScan(ctx, prefix, prefix+"\xff", 0)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, unescape(strings.TrimPrefix(r.Key, prefix)))
	}
	return out, nil
}

// DeleteCursor removes a durable cursor's record.
func (l *Ledger) DeleteCursor(ctx context.Context, name string) error {
	err := l.f.meta.Delete(ctx, l.cursorKey(name), metadata.AnyVersion)
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return fmt.Errorf("%w: %s", ErrCursorNotFound, name)
	}
	return err
}

func (c *Cursor) load(rec cursorRecord, ver metadata.Version) {
	c.ackedBelow = rec.AckedBelow
	c.deleted = rangeSet{r: rec.Deleted}
	c.batchAcks = make(map[int64][]uint64, len(rec.BatchAcks))
	for k, v := range rec.BatchAcks {
		if off, err := strconv.ParseInt(k, 10, 64); err == nil {
			c.batchAcks[off] = v
		}
	}
	c.resetEpoch = rec.ResetEpoch
	c.createdAt = rec.CreatedAt
	c.version = ver
}

func (c *Cursor) recordLocked() cursorRecord {
	rec := cursorRecord{AckedBelow: c.ackedBelow, Deleted: append([][2]int64(nil), c.deleted.r...), ResetEpoch: c.resetEpoch, CreatedAt: c.createdAt}
	if PlantedBug == BugCursorAheadOfAck && len(c.deleted.r) > 0 {
		rec.AckedBelow, rec.Deleted = c.deleted.r[0][1], rec.Deleted[1:]
	}
	if len(c.batchAcks) > 0 {
		rec.BatchAcks = make(map[string][]uint64, len(c.batchAcks))
		for k, v := range c.batchAcks {
			rec.BatchAcks[strconv.FormatInt(k, 10)] = v
		}
	}
	return rec
}

// Name is the cursor's (subscription's) name.
func (c *Cursor) Name() string { return c.name }

// Durable reports whether the cursor is persisted.
func (c *Cursor) Durable() bool { return c.durable }

// AckedBelow is the first offset not known to be acknowledged: every offset
// below it is. The Pulsar mark-delete position is AckedBelow-1.
func (c *Cursor) AckedBelow() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ackedBelow
}

// An entry is named by its first offset off and its span n (Entry.Count:
// its number of messages on a message-counted topic, 1 otherwise). On a
// message-counted topic every message has its own offset, so batch-index
// acknowledgements are plain offset ranges; on an entry-counted topic they
// are kept as ack sets per entry (batchAcks).

// IsAcked reports whether the whole entry [off, off+n) is acknowledged.
func (c *Cursor) IsAcked(off, n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.isAckedLocked(off, n)
}

func (c *Cursor) isAckedLocked(off, n int64) bool {
	n = max(n, 1)
	return off+n <= c.ackedBelow || c.deleted.containsRange(max(off, c.ackedBelow), off+n)
}

// BatchAckSet returns the still-unacknowledged batch indexes of the entry
// [off, off+n) (set bit = unacknowledged, Pulsar's ack_set), or nil if none
// of its messages is acknowledged yet.
func (c *Cursor) BatchAckSet(off, n int64) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.l.CountsMessages() {
		if s, ok := c.batchAcks[off]; ok {
			return append([]uint64(nil), s...)
		}
		return nil
	}
	if n <= 1 || c.isAckedLocked(off, n) {
		return nil
	}
	set := make([]uint64, (n+63)/64)
	any := false
	for i := int64(0); i < n; i++ {
		if off+i < c.ackedBelow || c.deleted.contains(off+i) {
			any = true
			continue
		}
		set[i/64] |= 1 << (i % 64)
	}
	if !any {
		return nil
	}
	return set
}

// AckEntry acknowledges the whole entry [off, off+n).
func (c *Cursor) AckEntry(off, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ackRangeLocked(off, off+max(n, 1))
}

// AckRange acknowledges the offsets [from, to) (a Kafka-side commit or a
// whole-entry acknowledgement).
func (c *Cursor) AckRange(from, to int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ackRangeLocked(from, to)
}

func (c *Cursor) ackRangeLocked(from, to int64) {
	from = max(from, c.ackedBelow)
	if from >= to || c.deleted.containsRange(from, to) {
		return
	}
	for off := range c.batchAcks {
		if off >= from && off < to {
			delete(c.batchAcks, off)
		}
	}
	c.deleted.add(from, to)
	c.normalizeLocked()
	c.gen++
}

// normalizeLocked advances ackedBelow over a deleted range that starts at
// it, keeping the invariants.
func (c *Cursor) normalizeLocked() {
	if len(c.deleted.r) > 0 && c.deleted.r[0][0] <= c.ackedBelow {
		c.ackedBelow = max(c.ackedBelow, c.deleted.r[0][1])
		c.deleted.r = c.deleted.r[1:]
	}
	for off := range c.batchAcks {
		if off < c.ackedBelow {
			delete(c.batchAcks, off)
		}
	}
}

// AckBatch acknowledges the batch indexes of the entry [off, off+n) that
// are clear in unacked (set bit = still unacknowledged). When no index is
// left unacknowledged the entry is acknowledged.
func (c *Cursor) AckBatch(off, n int64, unacked []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isAckedLocked(off, n) {
		return
	}
	if c.l.CountsMessages() {
		for i := int64(0); i < n; i++ {
			if w := i / 64; int(w) < len(unacked) && unacked[w]&(1<<(i%64)) != 0 {
				continue
			}
			c.ackRangeLocked(off+i, off+i+1)
		}
		return
	}
	cur, ok := c.batchAcks[off]
	if !ok {
		cur = append([]uint64(nil), unacked...)
	} else {
		cur = andSets(cur, unacked)
	}
	if isEmptySet(cur) {
		c.ackRangeLocked(off, off+1)
		return
	}
	c.batchAcks[off] = cur
	c.gen++
}

// AckCumulative acknowledges every offset below off+n: the entry
// [off, off+n) and everything before it.
func (c *Cursor) AckCumulative(off, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ackBelowLocked(off + max(n, 1))
}

// AckBelow acknowledges every offset below x (backlog eviction, a Kafka
// group's commit moving forward).
func (c *Cursor) AckBelow(x int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ackBelowLocked(x)
}

func (c *Cursor) ackBelowLocked(x int64) {
	if x <= c.ackedBelow {
		return
	}
	c.ackedBelow = x
	c.deleted.trimBelow(c.ackedBelow)
	c.normalizeLocked()
	c.gen++
}

// AckCumulativeBatch acknowledges every offset below off and the batch
// indexes of the entry [off, off+n) clear in unacked.
func (c *Cursor) AckCumulativeBatch(off, n int64, unacked []uint64) {
	if isEmptySet(unacked) {
		c.AckCumulative(off, n)
		return
	}
	c.mu.Lock()
	c.ackBelowLocked(off)
	c.mu.Unlock()
	c.AckBatch(off, n, unacked)
}

// Reset repositions the cursor so that off is the next entry delivered and
// forgets acknowledgements at or above it (seek). It starts a new reset
// epoch, so a concurrent older state never merges back into it.
func (c *Cursor) Reset(off int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ackedBelow = off
	c.deleted = rangeSet{}
	c.batchAcks = map[int64][]uint64{}
	c.resetEpoch++
	c.gen++
}

// Backlog is the number of unacknowledged entries below end.
func (c *Cursor) Backlog(end int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if end <= c.ackedBelow {
		return 0
	}
	n := end - c.ackedBelow
	for _, r := range c.deleted.r {
		if r[0] >= end {
			break
		}
		n -= min(r[1], end) - r[0]
	}
	return n
}

// Flush persists the cursor state as of the call. It returns nil only once
// that state (or a later one) has been applied to metadata. Concurrent
// calls coalesce into one write. Non-durable cursors return at once.
func (c *Cursor) Flush(ctx context.Context) error {
	if !c.durable {
		return nil
	}
	c.mu.Lock()
	target := c.gen
	c.mu.Unlock()
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	for attempt := 0; attempt < 32; attempt++ {
		c.mu.Lock()
		if c.persisted >= target {
			c.mu.Unlock()
			return nil
		}
		gen, ver := c.gen, c.version
		val, err := encodeRecord(c.recordLocked())
		c.mu.Unlock()
		if err != nil {
			return err
		}
		newVer, err := c.l.f.meta.Put(ctx, c.key, val, ver)
		switch metadata.Classify(err) {
		case metadata.Applied:
			c.mu.Lock()
			c.version = newVer
			c.persisted = max(c.persisted, gen)
			c.mu.Unlock()
			c.persistOK.Add(1)
			return nil
		case metadata.Conflict, metadata.Unknown:
			// Reload proof and merge; acknowledgements only grow within
			// a reset epoch, so the union is always safe to write.
			if ctx.Err() != nil {
				return fmt.Errorf("cursor %s: flush not settled: %w", c.name, ctx.Err())
			}
			if err := c.mergeStored(ctx); err != nil {
				return err
			}
		default:
			c.persistFailed.Add(1)
			return fmt.Errorf("cursor %s: flush not applied: %w", c.name, err)
		}
	}
	return fmt.Errorf("%w: cursor %s", ErrTooManyConflicts, c.name)
}

func (c *Cursor) mergeStored(ctx context.Context) error {
	var rec cursorRecord
	ver, ok, err := getRecord(ctx, c.l.f.meta, c.key, &rec)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok {
		// Deleted underneath us (unsubscribe elsewhere): recreate.
		c.version = metadata.NotExists
		return nil
	}
	c.version = ver
	switch {
	case rec.ResetEpoch > c.resetEpoch:
		c.load(rec, ver)
		c.persisted = c.gen
		c.gen++ // our in-flight target is superseded; make waiters settle on the next write
	case rec.ResetEpoch == c.resetEpoch && PlantedBug == BugMergeDropsLocal:
		c.load(rec, ver)
	case rec.ResetEpoch == c.resetEpoch:
		c.ackedBelow = max(c.ackedBelow, rec.AckedBelow)
		for _, r := range rec.Deleted {
			c.deleted.add(r[0], r[1])
		}
		c.deleted.trimBelow(c.ackedBelow)
		for k, v := range rec.BatchAcks {
			off, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				continue
			}
			if cur, ok := c.batchAcks[off]; ok {
				c.batchAcks[off] = andSets(cur, v)
			} else if !c.deleted.contains(off) {
				c.batchAcks[off] = v
			}
		}
		c.normalizeLocked()
		for off, s := range c.batchAcks {
			if c.deleted.contains(off) || isEmptySet(s) {
				delete(c.batchAcks, off)
			}
		}
	}
	return nil
}

// Snapshot describes the cursor for stats and tests.
type Snapshot struct {
	AckedBelow int64
	Deleted    [][2]int64
	BatchAcks  map[int64][]uint64
}

// Snapshot returns a copy of the state.
func (c *Cursor) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{AckedBelow: c.ackedBelow, Deleted: c.deleted.clone().r, BatchAcks: map[int64][]uint64{}}
	for k, v := range c.batchAcks {
		s.BatchAcks[k] = append([]uint64(nil), v...)
	}
	return s
}

func andSets(a, b []uint64) []uint64 {
	out := make([]uint64, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] & b[i]
	}
	return out
}

func isEmptySet(s []uint64) bool {
	for _, w := range s {
		if bits.OnesCount64(w) > 0 {
			return false
		}
	}
	return true
}
